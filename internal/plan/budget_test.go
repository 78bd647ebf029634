package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// overflowing is a real conversation of the given file whose newest tool
// results are texts: the result that just arrived overflows the context.
func overflowing(t *testing.T, file string, texts ...string) conversation.Conversation {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	data, err = convtest.AppendResults(data, texts...)
	require.NoError(t, err)
	c, err := conversation.ParseAny(data)
	require.NoError(t, err)
	return c
}

// words lists, per message, what the user and the assistant wrote (text,
// thinking, tool calls): what no strategy but a history summary changes.
func words(c conversation.Conversation) []string {
	out := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		var sb strings.Builder
		for _, b := range m.Blocks {
			if b.Kind != conversation.KindToolResult {
				sb.WriteString(string(b.Kind) + ":" + b.Text + b.Input + b.ToolID + "\n")
			} else {
				sb.WriteString("result:" + b.ToolID + "\n")
			}
		}
		out[i] = sb.String()
	}
	return out
}

// TestNewestResultFitsWithoutLLM: for every format, the newest tool result
// alone over 100K tokens (single line, multi-line, two parallel results)
// is offloaded by the presets that offload, and the deterministic ladder
// brings every preset under the limit; the structure of every turn, the
// pairing and the small results stay as they were.
func TestNewestResultFitsWithoutLLM(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"openai":    "../../testdata/conversations/django__django-11742.json",
		"anthropic": "../conversation/testdata/anthropic_sample.json",
		"react":     "../conversation/testdata/react_sample.json",
	}
	shapes := map[string][]string{
		"single line":      {convtest.SingleLine(420_000)},
		"multi-line":       {convtest.MultiLine(420_000)},
		"parallel results": {convtest.SingleLine(420_000), convtest.MultiLine(400_000)},
	}
	for format, file := range files {
		for shape, texts := range shapes {
			for _, name := range policy.Names() {
				t.Run(format+"/"+shape+"/"+name, func(t *testing.T) {
					t.Parallel()
					conv := overflowing(t, file, texts...)
					p := preset(t, name, "")
					b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
					require.NoError(t, err)
					require.True(t, b.Over(b.Measure(conv)), "the fixture overflows")

					res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: key})
					require.NoError(t, err, "every preset runs on every valid input")
					if p.Offload.Enabled && p.Offload.TriggerUsage <= b.Usage(res.SizeBefore) {
						require.NotEmpty(t, res.Offloads, "an oversized newest result is offloaded although it is recent")
					}
					out, _, _, err := FitOffload(res.Conv, p, b, key)
					require.NoError(t, err)
					out, _, err = FitTruncate(out, p, b, "tenants/t/archive/x")
					require.NoError(t, err)

					require.False(t, b.Over(b.Measure(out)), "%s ends under the limit", name)
					require.NoError(t, conversation.CheckPairing(out))
					if res.Watermark == "" && p.Watermark.KeepBefore == 0 {
						require.Equal(t, words(conv), words(out), "the words and calls of every turn are unchanged")
					}
					for i, m := range conv.Messages {
						for j, blk := range m.Blocks {
							if blk.Kind == conversation.KindToolResult && b.Counter.Count(blk.Text) < 500 {
								require.Equal(t, blk.Text, out.Messages[i].Blocks[j].Text, "small result %d/%d untouched", i, j)
							}
						}
					}
				})
			}
		}
	}
}

// TestUncuttableContentIsHopeless: a user message larger than the limit
// cannot be cut; the floor says so and the reason names it.
func TestUncuttableContentIsHopeless(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	big := conversation.Message{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: convtest.MultiLine(700_000)}}}
	conv.Messages = append(conv.Messages, big)
	p := preset(t, policy.ThreeTier, "")
	b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	require.True(t, b.Over(Floor(conv, p, b)))
	reason := OverLimitReason(conv, p, b, true, false)
	require.Contains(t, reason, "message 141 (user text)")
	require.Contains(t, reason, "no step may cut")

	out, pass, err := FitTruncate(conv, p, b, "a")
	require.NoError(t, err)
	require.Equal(t, big.Blocks[0].Text, out.Messages[141].Blocks[0].Text, "the user's words are never cut")
	require.LessOrEqual(t, pass.Count, len(conv.Messages))
}

// TestLadderStopsAtTheGoal: the ladder offloads largest first and only as
// many results as it needs.
func TestLadderStopsAtTheGoal(t *testing.T) {
	t.Parallel()
	conv := overflowing(t, "../../testdata/conversations/django__django-11742.json",
		convtest.MultiLine(200_000), convtest.MultiLine(600_000), convtest.MultiLine(20_000))
	p := preset(t, policy.Watermark, "")
	b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	out, pass, offloads, err := FitOffload(conv, p, b, key)
	require.NoError(t, err)
	require.True(t, pass.Applied)
	require.Len(t, offloads, 1, "the largest result alone is enough")
	require.Equal(t, "call_big_1", offloads[0].ToolID)
	require.LessOrEqual(t, b.Measure(out), LadderGoal(p, b))
	require.Equal(t, pass.TokensSaved, b.Measure(conv)-b.Measure(out))

	off, err := policy.Resolve(policy.Watermark, []byte(`{"budget":{"enabled":false}}`))
	require.NoError(t, err)
	require.Contains(t, OverLimitReason(conv, off, b, false, false), "budget.enabled=false")
}
