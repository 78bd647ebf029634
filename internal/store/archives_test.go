package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestSessionArchiveOnlyForItsTenantAndSession: an archive digest resolves
// to its key only for the tenant and session of a run that recorded it;
// another session's, another tenant's and an unknown digest are not found.
func TestSessionArchiveOnlyForItsTenantAndSession(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	sha := strings.Repeat("ab", 32)
	key := "tenants/acme/archive/ab/" + sha
	r := newRun(t, s, "acme", "s1")
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{ArchiveKey: key, ArchiveSHA256: sha}))
	newRun(t, s, "acme", "s2")
	// Another tenant archived the same bytes under its own key.
	o := newRun(t, s, "other", "s9")
	require.NoError(t, s.StartRun(ctx, o.ID, o.Tenant, o.Session, store.RunStart{ArchiveKey: "tenants/other/archive/ab/" + sha, ArchiveSHA256: sha}))

	got, ok, err := s.SessionArchive(ctx, "acme", "s1", sha)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, key, got)
	got, ok, err = s.SessionArchive(ctx, "other", "s9", sha)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "tenants/other/archive/ab/"+sha, got, "each tenant gets its own key")

	for _, tc := range []struct{ tenant, session, sha string }{
		{"acme", "s2", sha},                        // another session of the tenant
		{"other", "s1", sha},                       // another tenant, same session name
		{"acme", "s1", strings.Repeat("cd", 32)},   // unknown digest
		{"acme", "s1", ""},                         // no digest
		{"acme", "s1", key},                        // a key is no digest
		{"acme", "s1", strings.ToUpper(sha)},       // digests are lowercase
		{"acme", "s1", sha[:63]},                   // a prefix is not the digest
		{"acme", "s1", "' or archive_sha256 <> '"}, // text stays text
	} {
		got, ok, err := s.SessionArchive(ctx, tc.tenant, tc.session, tc.sha)
		require.NoError(t, err, "%+v", tc)
		require.False(t, ok, "%+v", tc)
		require.Empty(t, got)
	}

	// A run that archived nothing (yet) resolves nothing, whatever its
	// empty digest.
	newRun(t, s, "acme", "s3")
	_, ok, err = s.SessionArchive(ctx, "acme", "s3", "")
	require.NoError(t, err)
	require.False(t, ok)
}
