package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/store/storetest"
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
