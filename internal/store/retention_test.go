package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
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

// TestSessionRowsLeaveThroughOneSource: erasure (a whole session) and
// retention (expired runs) delete through one SQL routine (erase_rows),
// and every table with a session column is covered by both paths.
// Retention deletes an expired run's summary-log row only once a later
// reflection condensed its block (the session's latest output no longer
// holds it); the erasure deletes them all. session_log is append-only
// outside those two paths. The list of tables is read from the schema,
// so a new table with a session column fails here until it is added.
func TestSessionRowsLeaveThroughOneSource(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	digest := func(i int) string { return fmt.Sprintf("%064x", i) }
	commit := func(id string, log ...store.LogBlock) {
		t.Helper()
		_, err := st.SubmitRun(ctx, store.Run{ID: id, Tenant: "acme", Session: "s1", EventID: "ev-" + id, Trigger: "threshold"}, "body-"+id, nil)
		require.NoError(t, err)
		_, err = st.CommitRun(ctx, id, store.RunResult{OutputKey: "tenants/acme/output/" + id, OutputSHA256: digest(len(id)), Log: log})
		require.NoError(t, err)
	}
	commit("run-1", store.LogBlock{SHA256: digest(1), Label: "1"}, store.LogBlock{SHA256: digest(2), Label: "2"})
	commit("run-2", store.LogBlock{SHA256: digest(3), Label: "1-2", Reflection: true, Condensed: []string{digest(1)}})
	require.NoError(t, st.SetWatermark(ctx, "acme", "s1", "call_1", "run-1"))

	// session_log is history: no update, no delete outside erase_rows.
	_, err := st.Pool().Exec(ctx, `update session_log set label = 'x' where sha256 = $1`, digest(1))
	require.ErrorContains(t, err, "append-only")
	_, err = st.Pool().Exec(ctx, `delete from session_log where sha256 = $1`, digest(1))
	require.ErrorContains(t, err, "append-only")

	// Every table with a session column, from the schema itself.
	rows, err := st.Pool().Query(ctx, `select table_name from information_schema.columns
		where table_schema = current_schema() and column_name = 'session_id' order by table_name`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	count := func(table string) int {
		t.Helper()
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `select count(*) from `+table+` where tenant_id = 'acme' and session_id = 's1'`).Scan(&n))
		return n
	}
	kept := map[string]bool{"session_erasures": true} // the tombstone
	require.Subset(t, tables, []string{"runs", "events", "offloads", "watermarks", "watermark_history", "session_log", "promotions"})

	// Retention of both runs: the condensed block's row goes with its
	// run; the blocks the latest output still holds stay.
	require.NoError(t, st.SetRetention(ctx, "acme", 0.00001))
	time.Sleep(1200 * time.Millisecond)
	gone, err := st.EraseExpiredRuns(ctx, "acme", []string{"run-1", "run-2"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"run-1", "run-2"}, gone)
	log, err := st.SessionLog(ctx, "acme", "s1")
	require.NoError(t, err)
	var left []string
	for _, b := range log {
		left = append(left, b.SHA256)
	}
	require.Equal(t, []string{digest(2), digest(3)}, left, "block 1 was condensed: its row went with its run")
	for _, table := range []string{"runs", "events"} {
		require.Zero(t, count(table), table)
	}

	// A later run and its offload; then the erasure takes every row of
	// the session, in every table.
	commit("run-3", store.LogBlock{SHA256: digest(4), Label: "3"})
	require.NoError(t, st.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", RunID: "run-3", Key: "tenants/acme/offload/k"}))
	e, _, err := st.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	_, err = st.EraseSessionRows(ctx, e.ID, "acme", "s1")
	require.NoError(t, err)
	for _, table := range tables {
		if !kept[table] {
			require.Zero(t, count(table), "table %s still holds rows of the erased session", table)
		}
	}
	var sessions int
	require.NoError(t, st.Pool().QueryRow(ctx, `select count(*) from sessions where tenant_id = 'acme' and id = 's1'`).Scan(&sessions))
	require.Zero(t, sessions)
}
