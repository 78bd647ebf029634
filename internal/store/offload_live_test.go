package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestLiveOffloadsAreTheSessionsLiveOnes guards what a run may treat as a
// reference (LiveOffloads): only a key this tenant's session recorded and
// has not released. The same key recorded by another tenant's session of
// the same name, by another session of the tenant, or released by this
// session is ordinary text: restoring it would hand a run content that is
// not its session's (another tenant's, for the first), or an object whose
// deletion is under way.
func TestLiveOffloadsAreTheSessionsLiveOnes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	for _, o := range []store.Offload{
		{Tenant: "acme", Session: "s1", Key: "k/own"},
		{Tenant: "other", Session: "s1", Key: "k/other-tenant"},
		{Tenant: "acme", Session: "s2", Key: "k/other-session"},
		{Tenant: "acme", Session: "s1", Key: "k/released"},
	} {
		require.NoError(t, s.AddOffload(ctx, o))
	}
	n, err := s.MarkOffloadsDeleted(ctx, "acme", "s1", []string{"k/released"})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	keys := []string{"k/own", "k/other-tenant", "k/other-session", "k/released", "k/unknown"}
	live, err := s.LiveOffloads(ctx, "acme", "s1", keys)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"k/own": true}, live, "only the session's own live offload")

	// Each is live where it was recorded: the answers above are the
	// filters', not keys the store lost.
	for _, tc := range []struct{ tenant, session, key string }{
		{"other", "s1", "k/other-tenant"},
		{"acme", "s2", "k/other-session"},
	} {
		live, err := s.LiveOffloads(ctx, tc.tenant, tc.session, keys)
		require.NoError(t, err)
		require.Equal(t, map[string]bool{tc.key: true}, live, "%s/%s", tc.tenant, tc.session)
	}
}
