package activities_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestUnitCommitSkipsAnUnprofitableCompaction: a compaction of a
// conversation still under its limit that re-writes the agent's whole
// cached prefix and sheds almost nothing costs more than it saves. Under
// cost.skip_unprofitable the run keeps the input as it came, byte for
// byte, moves nothing of its session (watermark, log) and says so in a
// "skip" pass; without the option the compaction is committed, priced
// with its negative saving. The option decides threshold events only: a
// checkpoint or manual event is the caller's intent and is compacted,
// its watermark saved, whatever it costs.
func TestUnitCommitSkipsAnUnprofitableCompaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		trigger  string
		option   bool
		wantSkip bool
	}{
		{"threshold, option on", contract.TriggerThreshold, true, true},
		{"threshold, option off", contract.TriggerThreshold, false, false},
		{"checkpoint, option on", contract.TriggerCheckpoint, true, false},
		{"manual, option on", contract.TriggerManual, true, false},
	}
	for _, tt := range tests {
		skip := tt.wantSkip
		u := newUnit(t)
		ctx := t.Context()
		u.run.Trigger = tt.trigger
		u.run.ContextLimit = 100_000
		u.run.Resolved.Cost.SkipUnprofitable = tt.option
		u.a.Prices, u.a.CostTurns = pricing.Defaults(), 1
		archive, pr := u.planned()
		orig, err := conversation.ParseAny([]byte(u.get(archive.Key)))
		require.NoError(t, err)
		// The "compaction" changed the first message: nothing of the
		// request stays a cached prefix, and nothing is shed.
		work := orig.Clone()
		work.Messages[0].Blocks[0].Text += " "
		data, err := conversation.Render(work)
		require.NoError(t, err)
		ref, err := u.blob.PutContent(ctx, u.run.Tenant, blob.KindWork, data)
		require.NoError(t, err)
		block := store.LogBlock{SHA256: "0000000000000000000000000000000000000000000000000000000000000001", Label: "1"}
		res, err := u.a.Commit(ctx, activities.CommitInput{Run: u.run, WorkKey: ref.Key, ArchiveKey: pr.Archive.Key,
			TokensBefore: pr.TokensBefore, Watermark: "call_9", Log: []store.LogBlock{block}})
		require.NoError(t, err)
		o := res.Outcome
		require.Equal(t, "succeeded", o.Status)
		require.NotNil(t, o.Cost)
		require.True(t, o.Cost.Priced)
		watermark, err := u.store.GetWatermark(ctx, "acme", "s1")
		require.NoError(t, err)
		skipped := slices.ContainsFunc(o.Passes, func(p activities.PassStat) bool { return p.Name == "skip" })
		if skip {
			require.True(t, skipped, "%s: the run says it skipped", tt.name)
			require.Equal(t, u.get(archive.Key), u.get(o.OutputKey), "the input, byte for byte")
			require.Equal(t, o.TokensBefore, o.TokensAfter)
			require.Equal(t, 0, o.Cache.RewriteTokens, "nothing for the agent's cache to write again")
			require.Empty(t, watermark, "a skipped run moves no watermark")
			continue
		}
		require.False(t, skipped, tt.name)
		require.Equal(t, string(data), u.get(o.OutputKey), tt.name)
		require.Negative(t, o.Cost.NetSavingUSD, "re-writing the whole prefix for nothing costs more than it saves")
		require.Equal(t, "call_9", watermark, "%s: the watermark is saved", tt.name)
	}
}

// TestUnitCommitPricesAtTheSessionsPace: a run whose event showed the
// agent's calls since the previous compaction (an incremental event's
// appended assistant messages) prices its net saving over that many
// calls and says so; a run without them uses COST_TURNS.
func TestUnitCommitPricesAtTheSessionsPace(t *testing.T) {
	t.Parallel()
	cost := func(observed int) *contract.CostFigures {
		u := newUnit(t)
		u.run.ContextLimit = 100_000
		u.run.ObservedTurns = observed
		u.a.Prices, u.a.CostTurns = pricing.Defaults(), 10
		archive, pr := u.planned()
		orig, err := conversation.ParseAny([]byte(u.get(archive.Key)))
		require.NoError(t, err)
		work := orig.Clone()
		work.Messages = work.Messages[:2] // the system prompt and the task: the rest is shed
		data, err := conversation.Render(work)
		require.NoError(t, err)
		ref, err := u.blob.PutContent(t.Context(), u.run.Tenant, blob.KindWork, data)
		require.NoError(t, err)
		res, err := u.a.Commit(t.Context(), activities.CommitInput{Run: u.run, WorkKey: ref.Key, ArchiveKey: pr.Archive.Key,
			TokensBefore: pr.TokensBefore})
		require.NoError(t, err)
		require.NotNil(t, res.Outcome.Cost)
		require.True(t, res.Outcome.Cost.Priced)
		return res.Outcome.Cost
	}
	byDefault, observed := cost(0), cost(3)
	require.Equal(t, 10, byDefault.Turns)
	require.Equal(t, contract.TurnsDefault, byDefault.TurnsSource)
	require.Equal(t, 3, observed.Turns)
	require.Equal(t, contract.TurnsObserved, observed.TurnsSource)
	require.NotEqual(t, byDefault.NetSavingUSD, observed.NetSavingUSD, "the horizon changes the saving")
	require.Less(t, observed.NetSavingUSD, byDefault.NetSavingUSD, "fewer calls save less")
}
