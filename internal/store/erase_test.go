package store_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestSessionObjectsListsEveryKey: the object list an erasure deletes
// names every key the session's rows name, each written the way the run
// steps write it: the input (submit), the archived original (plan's
// StartRun), the output and the handoff (commit, the handoff in the run's
// stats), the offloads of its runs and the caller's own offload (no run);
// and it names no key of another session or another tenant. A key left
// out would stay in S3 after the session is erased.
func TestSessionObjectsListsEveryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	// key is a key under tenant's prefix, named for what it holds.
	key := func(tenant, kind, name string) string { return fmt.Sprintf("tenants/%s/%s/%s", tenant, kind, name) }
	// session writes runs and offloads of tenant's session the way a
	// committed run, a run failed after its archive, and a caller's own
	// offload do, and returns every key they name.
	session := func(tenant, sess string) []string {
		t.Helper()
		var keys []string
		for i, committed := range []bool{true, false} {
			id := fmt.Sprintf("%s-%s-%d", tenant, sess, i)
			name := func(what string) string { return fmt.Sprintf("%s-%s-%d-%s", tenant, sess, i, what) }
			// The gateway stores the original as the run's input and
			// archive at once: one object, named twice.
			archive := key(tenant, blob.KindArchive, name("archive"))
			_, _, err := s.CreateRun(ctx, store.Run{ID: id, Tenant: tenant, Session: sess, EventID: id, Trigger: "auto",
				Preset: "adaptive", InputKey: archive})
			require.NoError(t, err)
			require.NoError(t, s.StartRun(ctx, id, tenant, sess,
				store.RunStart{ArchiveKey: archive, ArchiveSHA256: fmt.Sprintf("%064x", i+1)}))
			offload := key(tenant, blob.KindOffload, name("offload"))
			require.NoError(t, s.AddOffload(ctx, store.Offload{Tenant: tenant, Session: sess, RunID: id, Key: offload, ToolID: "call_1"}))
			keys = append(keys, archive, offload)
			if !committed {
				_, err = s.FailRun(ctx, id, store.Failure{Message: "the summarizer is down"})
				require.NoError(t, err)
				continue
			}
			output, handoff := key(tenant, blob.KindOutput, name("output")), key(tenant, blob.KindOutput, name("handoff"))
			stats, err := json.Marshal(store.RunStats{Stats: contract.Stats{Unit: "tokens", HandoffKey: handoff, HandoffSHA256: fmt.Sprintf("%064x", 9)}})
			require.NoError(t, err)
			c, err := s.CommitRun(ctx, id, store.RunResult{TokensAfter: 10, OutputKey: output, OutputSHA256: fmt.Sprintf("%064x", 8),
				Stats: stats})
			require.NoError(t, err)
			require.True(t, c.Committed)
			keys = append(keys, output, handoff)
		}
		own := key(tenant, blob.KindOffload, fmt.Sprintf("%s-%s-results-compress", tenant, sess))
		require.NoError(t, s.AddOffload(ctx, store.Offload{Tenant: tenant, Session: sess, Key: own, ToolID: "call_9"}))
		return append(keys, own)
	}
	want := session("acme", "s1")
	session("acme", "s2")  // another session of the tenant
	session("other", "s1") // another tenant's session of the same name

	keys, runs, err := s.SessionObjects(ctx, "acme", "s1")
	require.NoError(t, err)
	require.ElementsMatch(t, want, keys, "archive, output, handoff and offload keys of the session, nothing else")
	require.Len(t, keys, 7, "two archives and run offloads, one output and handoff, the caller's offload")
	require.Equal(t, []string{"acme-s1-0", "acme-s1-1"}, runs, "the session's runs, whose prefixes hold intermediates")
}

// TestCheckSessionGoneOnce: a read that found its session live asks
// Postgres no more for it (an erasure asked for since is not seen under
// its context, which is what makes the second check a no-op), while
// every other session, another tenant's of the same name included, and
// every context not marked are still checked; a gone session is not
// marked.
func TestCheckSessionGoneOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	for _, id := range []string{"a1", "a2"} {
		_, _, err := s.CreateRun(ctx, store.Run{ID: id, Tenant: "acme", Session: "s" + id[1:], EventID: id, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending})
		require.NoError(t, err)
	}
	_, _, err := s.CreateRun(ctx, store.Run{ID: "b1", Tenant: "beta", Session: "s1", EventID: "b1", Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)

	checked, err := s.CheckSessionGoneOnce(ctx, "acme", "s1")
	require.NoError(t, err)
	for _, tc := range []struct{ tenant, session string }{{"acme", "s1"}, {"acme", "s2"}, {"beta", "s1"}} {
		_, _, err := s.StartErasure(ctx, tc.tenant, tc.session, "test")
		require.NoError(t, err)
	}
	require.NoError(t, s.CheckSessionGone(checked, "acme", "s1"), "checked once for this read")
	var gone *store.SessionGoneError
	require.ErrorAs(t, s.CheckSessionGone(ctx, "acme", "s1"), &gone, "another read asks again")
	require.ErrorAs(t, s.CheckSessionGone(checked, "acme", "s2"), &gone, "another session")
	require.ErrorAs(t, s.CheckSessionGone(checked, "beta", "s1"), &gone, "another tenant's session of the name")

	again, err := s.CheckSessionGoneOnce(ctx, "acme", "s2")
	require.ErrorAs(t, err, &gone)
	require.ErrorAs(t, s.CheckSessionGone(again, "acme", "s2"), &gone, "a gone session is not marked")
}
