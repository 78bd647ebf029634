package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/store/storetest"
)

// TestRetentionPicksOnlyExpiredRuns: only final runs of a tenant with a
// retention, ended before it, are listed and deleted; a run a live
// offload still names stays; erase_runs_rows deletes nothing else even
// when asked to.
func TestRetentionPicksOnlyExpiredRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	final := func(tenant, id string) {
		t.Helper()
		_, _, err := st.CreateRun(ctx, store.Run{ID: id, Tenant: tenant, Session: "s1", EventID: id, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending})
		require.NoError(t, err)
		_, err = st.FailRun(ctx, id, store.Failure{Message: "done"})
		require.NoError(t, err)
	}
	final("acme", "run-old")
	final("acme", "run-offloaded")
	require.NoError(t, st.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", RunID: "run-offloaded", Key: "tenants/acme/offload/k"}))
	final("other", "run-other")
	_, _, err := st.CreateRun(ctx, store.Run{ID: "run-live", Tenant: "acme", Session: "s1", EventID: "live", Trigger: "manual",
		Preset: "adaptive", Status: store.RunRunning})
	require.NoError(t, err)

	require.Error(t, st.SetRetention(ctx, "acme", 0))
	require.NoError(t, st.SetRetention(ctx, "acme", 0.00001)) // under a second
	days, ok, err := st.Retention(ctx, "acme")
	require.NoError(t, err)
	require.True(t, ok)
	require.InDelta(t, 0.00001, days, 1e-12)
	time.Sleep(1200 * time.Millisecond)

	exp, err := st.ExpiredRuns(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []store.ExpiredRun{{Tenant: "acme", RunID: "run-old"}}, exp,
		"not the live run, not the one a live offload names, not another tenant's")
	gone, err := st.EraseExpiredRuns(ctx, "acme", []string{"run-old", "run-offloaded", "run-live", "run-other"})
	require.NoError(t, err)
	require.Equal(t, []string{"run-old"}, gone, "asking for more deletes nothing more")
	for _, id := range []string{"run-offloaded", "run-live", "run-other"} {
		_, err := st.GetRun(ctx, id)
		require.NoError(t, err, id)
	}
	_, err = st.GetRun(ctx, "run-old")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestRetentionCanBeUnset: an unset retention reads as none, expires
// nothing any more, and can be set again.
func TestRetentionCanBeUnset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	_, _, err := st.CreateRun(ctx, store.Run{ID: "run-a", Tenant: "acme", Session: "s1", EventID: "a", Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)
	_, err = st.FailRun(ctx, "run-a", store.Failure{Message: "done"})
	require.NoError(t, err)

	require.NoError(t, st.UnsetRetention(ctx, "acme"), "unsetting what was never set is fine")
	require.NoError(t, st.SetRetention(ctx, "acme", 0.00001))
	require.NoError(t, st.UnsetRetention(ctx, "acme"))
	_, ok, err := st.Retention(ctx, "acme")
	require.NoError(t, err)
	require.False(t, ok, "unset: runs are kept for good")
	time.Sleep(1200 * time.Millisecond)
	exp, err := st.ExpiredRuns(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, exp, "an unset retention expires nothing")

	require.NoError(t, st.SetRetention(ctx, "acme", 30))
	days, ok, err := st.Retention(ctx, "acme")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 30.0, days)
}
