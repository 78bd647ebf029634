package plan

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TestHistoryTail: a preset that fills its tail (adaptive, the ladder of
// every preset) keeps the largest tail under its aim, with pairs intact;
// a design's fixed tail (keep_last) stays as the design says, and the note
// says when that leaves the output below half the target.
func TestHistoryTail(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	adaptive, err := policy.Builtin(policy.Adaptive)
	require.NoError(t, err)
	offload, err := policy.Builtin(policy.OffloadCompact)
	require.NoError(t, err)
	watermark, err := policy.Builtin(policy.Watermark)
	require.NoError(t, err)
	summarize, err := policy.Builtin(policy.AutoSummarize)
	require.NoError(t, err)

	measure := func(p policy.Preset) Budget {
		b, err := NewBudget(p, "gpt-4o", 1_000_000, tokens.Limits{})
		require.NoError(t, err)
		b.Limit = b.Measure(conv) // usage 100%
		return b
	}
	cases := []struct {
		name     string
		preset   func(Budget) policy.Preset
		fills    bool
		wantNote string
	}{
		{"adaptive fills up to its target", func(Budget) policy.Preset { return adaptive }, true, "largest tail"},
		{"the ladder of watermark fills", func(b Budget) policy.Preset { return LadderHistoryPreset(watermark, b) }, true, "largest tail"},
		{"the ladder of offload-compact fills", func(b Budget) policy.Preset { return LadderHistoryPreset(offload, b) }, true, "largest tail"},
		{"the auto-summarize design keeps its last 3", func(Budget) policy.Preset { return summarize }, false, "below half"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := measure(adaptive)
			p := tc.preset(b)
			protected := strategy.Protected(conv, HistoryProtection(p))
			got := HistoryTail(conv, p, b, protected)
			require.Contains(t, got.Note, tc.wantNote)
			kept := len(conv.Messages) - got.Split
			if !tc.fills {
				require.Equal(t, strategy.SplitPoint(conv, p.History.KeepLast, protected), got.Split)
				return
			}
			aim := TailAim(p, b)
			require.Positive(t, aim)
			require.LessOrEqual(t, got.Estimate, aim, "the estimate stays under the aim")
			require.Greater(t, kept, p.History.KeepLast, "more than the minimum tail is kept")
			// One more message would not fit: the tail is the largest.
			k := kept + 1
			for k < len(conv.Messages) && strategy.SplitPoint(conv, k, protected) == got.Split {
				k++
			}
			if strategy.SplitPoint(conv, k, protected) < got.Split {
				next := HistoryTail(conv, withKeep(p, k), b, protected)
				require.Greater(t, next.Estimate, aim, "a larger tail would be over the aim")
			}
			// The kept tail begins at a pair-safe boundary.
			require.Equal(t, got.Split, strategy.SplitPoint(conv, kept, protected))
			// What stays is at least half the aim: least destruction.
			require.GreaterOrEqual(t, got.Estimate, aim/2)
		})
	}
}

// withKeep is p with a fixed tail of k messages that does not fill.
func withKeep(p policy.Preset, k int) policy.Preset {
	p.History.KeepLast = k
	p.StopAtTarget = false
	p.TargetUsage = 0
	return p
}

// TestLadderKeepsTheTask: every preset's ladder summary protects the task
// statement and pinned constraints, including presets whose own rules do
// not (watermark, offload-compact).
func TestLadderKeepsTheTask(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	for _, name := range policy.Names() {
		p, err := policy.Builtin(name)
		require.NoError(t, err)
		b, err := NewBudget(p, "gpt-4o", 100_000, tokens.Limits{})
		require.NoError(t, err)
		lp := LadderHistoryPreset(p, b)
		require.True(t, lp.Protection.FirstUser, name)
		require.NotEmpty(t, lp.Protection.PinMarkers, name)
		protected := strategy.Protected(conv, HistoryProtection(lp))
		first := -1
		for i, m := range conv.Messages {
			if m.Role == conversation.RoleUser {
				first = i
				break
			}
		}
		require.GreaterOrEqual(t, first, 0)
		require.True(t, protected[first], "%s: the task statement is protected", name)
	}
}
