package plan

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

func sample(t *testing.T) conversation.Conversation {
	t.Helper()
	return convtest.Load(t, "django__django-11742.json")
}

func preset(t *testing.T, name, overrides string) policy.Preset {
	t.Helper()
	var raw []byte
	if overrides != "" {
		raw = []byte(overrides)
	}
	p, err := policy.Resolve(name, raw)
	require.NoError(t, err)
	return p
}

func key(text string) string { return fmt.Sprintf("tenants/t/offload/%d", len(text)) }

func TestDeterministicPerPreset(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	tests := []struct {
		preset  string
		limit   int
		applied []string
		done    bool
	}{
		{policy.Watermark, 40000, nil, false},
		{policy.ThreeTier, 40000, []string{"truncate-inputs"}, false},
		{policy.ThreeTier, 400000, nil, false},
		{policy.AutoSummarize, 40000, nil, false},
		{policy.Adaptive, 400000, nil, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.preset, tc.limit), func(t *testing.T) {
			t.Parallel()
			p := preset(t, tc.preset, "")
			b, err := NewBudget(p, "gpt-4o", tc.limit, tokens.DefaultLimits())
			require.NoError(t, err)
			res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key})
			require.NoError(t, err)
			var applied []string
			for _, ps := range res.Passes {
				if ps.Applied {
					applied = append(applied, ps.Name)
					require.Positive(t, ps.TokensSaved, ps.Name)
				}
			}
			require.Equal(t, tc.applied, applied)
			require.Equal(t, tc.done, res.Done)
			require.LessOrEqual(t, res.SizeAfter, res.SizeBefore)
			require.NoError(t, conversation.CheckPairing(res.Conv))
		})
	}
}

func TestDebugDisablesEverything(t *testing.T) {
	t.Parallel()
	p := preset(t, policy.Adaptive, `{"debug":true}`)
	b, err := NewBudget(p, "gpt-4o", 1000, tokens.Limits{})
	require.NoError(t, err)
	conv := sample(t)
	res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key})
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Equal(t, conv, res.Conv)
}

func TestOffloadKeysAreTheCallersAndTextsReturned(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	big := strings.Repeat("result line with data 12345\n", 4000)
	conv.Messages[3].Blocks[0].Text = big
	require.Equal(t, conversation.KindToolResult, conv.Messages[3].Blocks[0].Kind)
	p := preset(t, policy.ThreeTier, `{"offload":{"min_tokens":2000}}`)
	b, err := NewBudget(p, "gpt-4o", 100000, tokens.Limits{})
	require.NoError(t, err)
	res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key})
	require.NoError(t, err)
	require.Len(t, res.Offloads, 1)
	require.Equal(t, big, res.Offloads[0].Text)
	require.Equal(t, key(big), res.Offloads[0].Key)
	ref := res.Conv.Messages[3].Blocks[0].Text
	require.Contains(t, ref, "Tool result is at: "+strconv.Itoa(len(big)), "the reference names the offload's id")
	require.NotContains(t, ref, key(big), "and never its storage key")
}

func TestHistoryDecision(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	tests := []struct {
		name   string
		preset string
		limit  int
		freed  int
		force  Force
		run    bool
		reason string
	}{
		{"under trigger", policy.AutoSummarize, 400000, 0, NotForced, false, "under the 50% trigger"},
		{"over trigger", policy.AutoSummarize, 40000, 0, NotForced, true, ""},
		{"offload freed enough (offload-compact)", policy.OffloadCompact, 40000, 20000, NotForced, false, "no compaction needed"},
		{"offload freed too little (offload-compact)", policy.OffloadCompact, 40000, 1000, NotForced, true, ""},
		{"manual compact ignores the trigger", policy.OffloadCompact, 400000, 0, ForcedManual, true, ""},
		// A tail-filling preset far under its target would keep nearly
		// everything; a manual compaction keeps its keep_last instead.
		{"manual compact of a tail-filling preset at low usage", policy.Adaptive, 400000, 0, ForcedManual, true, ""},
		{"watermark never summarizes", policy.Watermark, 1000, 0, NotForced, false, "disabled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := preset(t, tc.preset, "")
			b, err := NewBudget(p, "gpt-4o", tc.limit, tokens.Limits{})
			require.NoError(t, err)
			d := History(conv, p, b, tc.freed, tc.force, LogView{})
			require.Equal(t, tc.run, d.Run, d.Reason)
			if tc.reason != "" {
				require.Contains(t, d.Reason, tc.reason)
			}
			if d.Run {
				require.Equal(t, len(conv.Messages)-p.History.KeepLast, d.Split, "keeps the last %d", p.History.KeepLast)
				require.Positive(t, d.Summarized)
			}
		})
	}
}

func TestFewMessagesNothingToSummarize(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	conv.Messages = conv.Messages[:5]
	p := preset(t, policy.OffloadCompact, "")
	b, err := NewBudget(p, "gpt-4o", 100, tokens.Limits{})
	require.NoError(t, err)
	d := History(conv, p, b, 0, ForcedManual, LogView{})
	require.False(t, d.Run)
	require.Contains(t, d.Reason, "nothing to summarize")
}

func TestBudget(t *testing.T) {
	t.Parallel()
	p := preset(t, policy.ReactTwoLayer, "")
	b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, "chars", b.Counter.Name())
	require.Equal(t, 200000, b.Limit, "the ReAct two-layer design's default limit in characters")
	require.Equal(t, 8000, b.Overhead, "system ≈5K + instructions ≈3K")

	p = preset(t, policy.Adaptive, "")
	b, err = NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, "o200k_base", b.Counter.Name())
	require.Equal(t, 128000, b.Limit)
	b, err = NewBudget(p, "gpt-4o", 32000, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, 32000, b.Limit, "the caller's limit wins")
}

func TestInspectReportsEveryPreset(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	for _, name := range policy.Names() {
		r, err := Inspect(conv, preset(t, name, ""), "gpt-4o", 0, tokens.DefaultLimits())
		require.NoError(t, err, name)
		require.Equal(t, name, r.Preset)
		require.Positive(t, r.SizeBefore)
		require.NotEmpty(t, r.Level)
	}
}

// TestPreserveCountBelowProtection: offload-compact's preserve count below the
// preset's protected tail keeps exactly that many messages after the
// summary.
func TestPreserveCountBelowProtection(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	for _, keep := range []int{1, 2, 3, 5} {
		p := preset(t, policy.OffloadCompact, fmt.Sprintf(`{"history":{"keep_last":%d}}`, keep))
		b, err := NewBudget(p, "gpt-4o", 8000, tokens.DefaultLimits())
		require.NoError(t, err)
		d := History(conv, p, b, 0, ForcedManual, LogView{})
		require.True(t, d.Run)
		// The tail is keep messages, plus the call of a result at its
		// boundary (pairs are never cut), not the 5 the preset protects.
		kept := len(conv.Messages) - d.Split
		require.GreaterOrEqual(t, kept, keep, "keep_last %d", keep)
		require.LessOrEqual(t, kept, keep+1, "keep_last %d", keep)
		require.NoError(t, conversation.CheckPairing(conv))
	}
	p := preset(t, policy.OffloadCompact, `{"history":{"keep_last":1}}`)
	b, err := NewBudget(p, "gpt-4o", 8000, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, len(conv.Messages)-1, History(conv, p, b, 0, ForcedManual, LogView{}).Split, "the pending call alone")
}

// TestCheckpointEventAppliesTheWatermark: a checkpoint event prunes at the
// newest checkpoint call even under a preset without the watermark pass,
// and pairing stays intact; without the event nothing is pruned.
func TestCheckpointEventAppliesTheWatermark(t *testing.T) {
	t.Parallel()
	data := []byte(`{"model":"claude-sonnet-4","system":"You are careful.","messages":[
		{"role":"user","content":"Refactor module 1."},
		{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_r","name":"read_file","input":{"path":"m1.py"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_r","content":"def f(): pass"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_cp1","name":"deactivate_augments","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_cp1","content":"ok"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_cp2","name":"compress_to_checkpoint","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_cp2","content":"ok"},{"type":"text","text":"Now module 2."}]}]}`)
	conv, err := conversation.ParseAny(data)
	require.NoError(t, err)
	p := preset(t, policy.ThreeTier, "")
	b, err := NewBudget(p, "claude-sonnet-4", 0, tokens.DefaultLimits())
	require.NoError(t, err)

	res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key, Checkpoint: true, Watermark: "toolu_gone"})
	require.NoError(t, err)
	require.Equal(t, "toolu_cp2", res.Watermark, "the newest checkpoint, re-anchored")
	require.NoError(t, conversation.CheckPairing(res.Conv))
	require.Less(t, len(res.Conv.Messages), len(conv.Messages))
	require.Contains(t, res.Passes[0].Note, "re-anchored")

	plain, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key})
	require.NoError(t, err)
	require.Empty(t, plain.Watermark, "no checkpoint event: three-tier does not prune")
	require.Len(t, plain.Conv.Messages, len(conv.Messages))
}
