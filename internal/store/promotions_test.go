package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestPromote: a replay that succeeded where its original failed becomes
// the session's state once, moving the watermark to the one it reached;
// every other case is refused naming the field at fault, and another
// tenant's replay is not found.
func TestPromote(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	run := func(id, session, replayOf string) {
		t.Helper()
		_, _, err := st.CreateRun(ctx, store.Run{ID: id, Tenant: "acme", Session: session, EventID: id, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending, ReplayOf: replayOf})
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // runs of a session start one after another
	}
	fail := func(id string) {
		t.Helper()
		_, err := st.FailRun(ctx, id, store.Failure{Message: "boom"})
		require.NoError(t, err)
	}
	succeed := func(id, watermark string) {
		t.Helper()
		stats, err := json.Marshal(store.RunStats{Watermark: watermark})
		require.NoError(t, err)
		c, err := st.CommitRun(ctx, id, store.RunResult{TokensAfter: 10, Stats: stats})
		require.NoError(t, err)
		require.True(t, c.Committed)
	}

	require.NoError(t, st.SetWatermark(ctx, "acme", "s1", "call_1", "run-0"))
	time.Sleep(5 * time.Millisecond)
	run("orig", "s1", "")
	fail("orig")
	seen, err := st.WatermarkSeenBy(ctx, "acme", "s1", "orig")
	require.NoError(t, err)
	require.Equal(t, "call_1", seen, "the watermark the original read when it started")

	run("replay-failed", "s1", "orig")
	fail("replay-failed")
	_, _, err = st.Promote(ctx, "acme", "replay-failed", "test")
	var pe *store.PromoteError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "run", pe.Field, "a replay that failed repairs nothing")

	run("replay-live", "s1", "orig")
	_, _, err = st.Promote(ctx, "acme", "replay-live", "test")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "run", pe.Field)
	require.Contains(t, pe.Reason, "wait until it succeeded", "a live replay may yet fail")
	_, err = st.FailRun(ctx, "replay-live", store.Failure{Message: "stopped"})
	require.NoError(t, err)

	run("replay", "s1", "orig")
	succeed("replay", "call_7")
	_, _, err = st.Promote(ctx, "other", "replay", "test")
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant's replay")

	p, fresh, err := st.Promote(ctx, "acme", "replay", "test")
	require.NoError(t, err)
	require.True(t, fresh)
	require.Equal(t, store.Promotion{Tenant: "acme", Session: "s1", RunID: "replay", ReplayOf: "orig", Watermark: "call_7",
		PromotedBy: "test", PromotedAt: p.PromotedAt}, p)
	again, fresh, err := st.Promote(ctx, "acme", "replay", "someone else")
	require.NoError(t, err)
	require.False(t, fresh, "promoting again answers the first promotion")
	require.Equal(t, p.PromotedAt, again.PromotedAt)
	require.Equal(t, "test", again.PromotedBy)
	w, err := st.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, "call_7", w, "the session moved to the replay's watermark")
	seen, err = st.WatermarkSeenBy(ctx, "acme", "s1", "orig")
	require.NoError(t, err)
	require.Equal(t, "call_1", seen, "what the original saw does not change")

	run("replay-2", "s1", "orig")
	succeed("replay-2", "")
	_, _, err = st.Promote(ctx, "acme", "replay-2", "test")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "replay_of", pe.Field, "one repair per original")

	_, _, err = st.Promote(ctx, "acme", "orig", "test")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "run", pe.Field, "not a replay")

	// The agent moved on: a run committed after the original.
	run("old", "s2", "")
	fail("old")
	run("newer", "s2", "")
	succeed("newer", "")
	run("replay-old", "s2", "old")
	succeed("replay-old", "")
	_, _, err = st.Promote(ctx, "acme", "replay-old", "test")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "session", pe.Field)
	require.Contains(t, pe.Error(), "newer")

	// A replay of a run that succeeded is a what-if only.
	run("good", "s3", "")
	succeed("good", "")
	run("replay-good", "s3", "good")
	succeed("replay-good", "")
	_, _, err = st.Promote(ctx, "acme", "replay-good", "test")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "replay_of", pe.Field)

	ps, err := st.Promotions(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, []store.Promotion{p}, ps)
	none, err := st.Promotions(ctx, "other", "s1")
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestPromotionsOf: a promotion is found from its replay and from the
// original it repaired, only for its tenant; SessionState counts a
// promoted replay and a run no promotion superseded, never a what-if
// replay nor a repaired original.
func TestPromotionsOf(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	for _, r := range []store.Run{{ID: "orig"}, {ID: "replay", ReplayOf: "orig"}, {ID: "what-if", ReplayOf: "orig"}, {ID: "other"}} {
		_, _, err := st.CreateRun(ctx, store.Run{ID: r.ID, Tenant: "acme", Session: "s1", EventID: r.ID, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending, ReplayOf: r.ReplayOf})
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	_, err := st.FailRun(ctx, "orig", store.Failure{Message: "boom"})
	require.NoError(t, err)
	for _, id := range []string{"replay", "what-if", "other"} {
		_, err := st.CommitRun(ctx, id, store.RunResult{TokensAfter: 10, Stats: []byte(`{}`)})
		require.NoError(t, err)
	}
	_, _, err = st.Promote(ctx, "acme", "replay", "test")
	require.ErrorAs(t, err, new(*store.PromoteError), "a run committed after the original")
	// Only "other" is in the way: promote in a session of its own.
	ps, err := st.PromotionsOf(ctx, "acme", []string{"orig", "replay", "what-if", "other"})
	require.NoError(t, err)
	require.Empty(t, ps.Of)

	for _, r := range []store.Run{{ID: "o2"}, {ID: "r2", ReplayOf: "o2"}} {
		_, _, err := st.CreateRun(ctx, store.Run{ID: r.ID, Tenant: "acme", Session: "s2", EventID: r.ID, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending, ReplayOf: r.ReplayOf})
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	_, err = st.FailRun(ctx, "o2", store.Failure{Message: "boom"})
	require.NoError(t, err)
	_, err = st.CommitRun(ctx, "r2", store.RunResult{TokensAfter: 10, Stats: []byte(`{}`)})
	require.NoError(t, err)
	p, _, err := st.Promote(ctx, "acme", "r2", "test")
	require.NoError(t, err)

	for _, ids := range [][]string{{"r2"}, {"o2"}} {
		ps, err = st.PromotionsOf(ctx, "acme", ids)
		require.NoError(t, err)
		require.Equal(t, map[string]store.Promotion{"r2": p}, ps.Of, "found from %v", ids)
		require.Equal(t, map[string]store.Promotion{"o2": p}, ps.RepairedBy)
	}
	ps, err = st.PromotionsOf(ctx, "other", []string{"r2", "o2"})
	require.NoError(t, err)
	require.Empty(t, ps.Of, "another tenant's")

	ps = store.SessionPromotions([]store.Promotion{p})
	require.True(t, ps.SessionState(store.Run{ID: "r2", ReplayOf: "o2"}), "a promoted replay is the session's state")
	require.False(t, ps.SessionState(store.Run{ID: "o2"}), "the original it repaired no longer is")
	require.False(t, ps.SessionState(store.Run{ID: "r3", ReplayOf: "o2"}), "another replay is a what-if")
	require.True(t, ps.SessionState(store.Run{ID: "n1"}), "a run nothing superseded")
}

// TestPrecedingDelivery: the delivery that must go before a promotion's
// is the same endpoint's delivery of the run's final event: the one
// already prepared, or one recorded now, once.
func TestPrecedingDelivery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	_, _, err := st.CreateRun(ctx, store.Run{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)
	w1, _, err := st.AddWebhook(ctx, "acme", "https://hooks.example.com/a", "", "whsec_b25l")
	require.NoError(t, err)
	final, err := st.PrepareDeliveries(ctx, "acme", "run-1", "run.succeeded")
	require.NoError(t, err)
	require.Len(t, final, 1)
	w2, _, err := st.AddWebhook(ctx, "acme", "https://hooks.example.com/b", "", "whsec_dHdv")
	require.NoError(t, err)
	promoted, err := st.PrepareDeliveries(ctx, "acme", "run-1", "run.promoted")
	require.NoError(t, err)
	require.Len(t, promoted, 2)
	for _, d := range promoted {
		pred, err := st.PrecedingDelivery(ctx, d, "run.succeeded")
		require.NoError(t, err)
		require.Equal(t, d.EndpointID, pred.EndpointID)
		require.Equal(t, "run.succeeded", pred.EventType)
		require.Equal(t, store.DeliveryPending, pred.Status)
		switch d.EndpointID {
		case w1.ID:
			require.Equal(t, final[0].ID, pred.ID, "the one the run's delivery prepared")
		case w2.ID:
			again, err := st.PrecedingDelivery(ctx, d, "run.succeeded")
			require.NoError(t, err)
			require.Equal(t, pred.ID, again.ID, "recorded once")
		}
	}
	all, err := st.PrepareDeliveries(ctx, "acme", "run-1", "run.succeeded")
	require.NoError(t, err)
	require.Len(t, all, 2, "the run's own delivery sends the one recorded for the later endpoint too")
}

// TestDailyRunStatsCountsTheSessionsState: the overview's tokens saved
// count a promoted replay in place of the run it repaired (once), never
// a what-if replay; only the what-if is counted as a replay.
func TestDailyRunStatsCountsTheSessionsState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range []store.Run{
		{ID: "orig", Status: store.RunOverLimit, TokensBefore: 9000, TokensAfter: 8000, Error: "too big"},
		{ID: "what-if", Status: store.RunSucceeded, TokensBefore: 9000, TokensAfter: 5000, ReplayOf: "orig"},
		{ID: "repair", Status: store.RunSucceeded, TokensBefore: 9000, TokensAfter: 3000, ReplayOf: "orig"},
		{ID: "other", Status: store.RunSucceeded, TokensBefore: 700, TokensAfter: 200},
	} {
		r.Tenant, r.Session, r.EventID, r.Trigger, r.Preset = "acme", "s1", r.ID, "manual", "adaptive"
		if r.ID == "other" {
			r.Session = "s2"
		}
		r.StartedAt = day.Add(time.Duration(i+1) * time.Hour)
		r.FinishedAt = r.StartedAt.Add(time.Minute)
		_, _, err := st.CreateRun(ctx, r)
		require.NoError(t, err)
	}
	saved := func() store.DailyRuns {
		t.Helper()
		days, err := st.DailyRunStats(ctx, "acme", day)
		require.NoError(t, err)
		require.Len(t, days, 1)
		return days[0]
	}
	before := saved()
	require.Equal(t, int64(1000+500), before.TokensSaved, "the run over its limit and the other session's; no replay")
	require.Equal(t, 2, before.Replays)

	_, _, err := st.Promote(ctx, "acme", "repair", "test")
	require.NoError(t, err)
	after := saved()
	require.Equal(t, int64(6000+500), after.TokensSaved, "the promoted replay in place of the run it repaired")
	require.Equal(t, 1, after.Replays, "only the what-if")
	require.Equal(t, 3, after.Succeeded)
	require.Equal(t, 1, after.OverLimit)
}
