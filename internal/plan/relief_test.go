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

// TestFitRelieve: a conversation that fits its goal but is RED because a
// result just arrived (in every format, ReAct included) is brought under
// RED by offloading it, with its reference paired with its call and every
// turn's words unchanged; the level reason is then empty. What no offload
// can reduce keeps the run RED, and the reason says why.
func TestFitRelieve(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"openai":    "../../testdata/conversations/django__django-11742.json",
		"anthropic": "../conversation/testdata/anthropic_sample.json",
		"react":     "../conversation/testdata/react_sample.json",
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conv := overflowing(t, file, convtest.MultiLine(180_000))
			for _, preset := range []string{policy.AutoSummarize, policy.Watermark} {
				p, err := policy.Builtin(preset)
				require.NoError(t, err)
				b, err := NewBudget(p, "gpt-4o", 1, tokens.Limits{})
				require.NoError(t, err)
				size := b.Measure(conv)
				b.Limit = size * 100 / 84 // RED, under the 90% goal
				require.True(t, NeedsRelief(p, b, size))
				require.NotEmpty(t, LevelReason(conv, p, b))

				out, pass, offloads, err := FitRelieve(conv, p, b, key)
				require.NoError(t, err)
				require.Equal(t, LadderRelieve, pass.Name)
				require.True(t, pass.Applied, pass.Note)
				require.NotEmpty(t, offloads)
				require.Less(t, b.Usage(b.Measure(out)), RedUsage)
				require.False(t, NeedsRelief(p, b, b.Measure(out)))
				require.Empty(t, LevelReason(out, p, b))
				require.NoError(t, conversation.CheckPairing(out))
				require.Equal(t, words(conv), words(out), "the words of every turn stay")
			}
		})
	}

	// Only the user's words: nothing to offload, the reason says so.
	data, err := os.ReadFile(files["openai"])
	require.NoError(t, err)
	conv, err := conversation.ParseAny(data)
	require.NoError(t, err)
	p, err := policy.Builtin(policy.Watermark)
	require.NoError(t, err)
	b, err := NewBudget(p, "gpt-4o", 1, tokens.Limits{})
	require.NoError(t, err)
	small := conv.Clone()
	for i := range small.Messages {
		for j := range small.Messages[i].Blocks {
			if small.Messages[i].Blocks[j].Kind == conversation.KindToolResult {
				small.Messages[i].Blocks[j].ReplaceResult("ok")
			}
		}
	}
	b.Limit = b.Measure(small) * 100 / 80
	reason := LevelReason(small, p, b)
	require.Contains(t, reason, "no tool result above 1000 left to offload")
	require.Contains(t, reason, "under the budget goal")
	out, pass, _, err := FitRelieve(small, p, b, func(string) string { return "k" })
	require.NoError(t, err)
	require.False(t, pass.Applied)
	require.Equal(t, small, out)
}

// TestPostProcessReachesTheNewestResult: the auto-summarize design's table applies to the
// result that just arrived (a 2,000-line file read), not only to old ones.
func TestPostProcessReachesTheNewestResult(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for i := range 2000 {
		sb.WriteString("    x_" + strings.Repeat("a", i%7) + " = compute(" + strings.Repeat("b", i%5) + ")\n")
	}
	conv := overflowing(t, "../../testdata/conversations/django__django-11742.json", sb.String())
	last := len(conv.Messages) - 1
	conv.Messages[last-1].Blocks[0].ToolName = "read_file"
	conv.Messages[last].Blocks[0].ToolName = "read_file"
	p, err := policy.Builtin(policy.AutoSummarize)
	require.NoError(t, err)
	b, err := NewBudget(p, "gpt-4o", 1_000_000, tokens.Limits{})
	require.NoError(t, err)
	res, err := Deterministic(Input{Conv: conv, Preset: p, Budget: b, OffloadKey: func(string) string { return "k" }})
	require.NoError(t, err)
	got := res.Conv.Messages[last].Blocks[0].Text
	require.Less(t, len(got), len(sb.String())/2, "the newest file read was post-processed")
	require.Equal(t, words(conv), words(res.Conv))
}

// TestFitOffloadSmall: a ReAct trajectory of many small results, still
// over its goal when nothing is large enough to offload or cut, fits once
// its small results are offloaded, each for a short reference that names
// its recovery id; every turn's thought and action stay.
func TestFitOffloadSmall(t *testing.T) {
	t.Parallel()
	conv := conversation.Conversation{Format: conversation.FormatReAct}
	for i := range 60 {
		id := conversation.ReActToolID(i)
		result := strings.Repeat("line of output "+strings.Repeat("x", i%7)+"\n", 50)
		if i == 3 {
			result = "Traceback (most recent call last):\n" + result + "ValueError: the third call failed\n"
		}
		conv.Messages = append(conv.Messages,
			conversation.Message{Role: conversation.RoleAssistant, Blocks: []conversation.Block{
				{Kind: conversation.KindText, Text: "Look at the next file.", Shape: "thought"},
				{Kind: conversation.KindToolUse, ToolID: id, ToolName: "bash", Input: `{"tool":"bash","arguments":"ls"}`}}},
			conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{
				{Kind: conversation.KindToolResult, ToolID: id, ToolName: "bash", Text: result}}})
	}
	p, err := policy.Builtin(policy.ReactTwoLayer)
	require.NoError(t, err)
	b, err := NewBudget(p, "gpt-4o", 1, tokens.Limits{})
	require.NoError(t, err)
	b.Limit = b.Measure(conv) * 2 / 3
	goal := LadderGoal(p, b)

	// The ladder's earlier steps can do nothing here.
	_, pass, _, err := FitOffload(conv, p, b, key)
	require.NoError(t, err)
	require.False(t, pass.Applied, pass.Note)

	out, pass, offloads, err := FitOffloadSmall(conv, p, b, key)
	require.NoError(t, err)
	require.Equal(t, LadderOffloadSmall, pass.Name)
	require.True(t, pass.Applied)
	require.NotEmpty(t, offloads)
	require.LessOrEqual(t, b.Measure(out), goal)
	require.NoError(t, conversation.CheckPairing(out))
	require.Equal(t, words(conv), words(out), "thoughts and actions stay")
	originals := map[string]bool{}
	for _, m := range conv.Messages {
		for _, blk := range m.Blocks {
			if blk.Kind == conversation.KindToolResult {
				originals[blk.Text] = true
			}
		}
	}
	refs := 0
	for _, m := range out.Messages {
		for _, blk := range m.Blocks {
			if blk.Kind == conversation.KindToolResult && strings.Contains(blk.Text, "recover_context tool, id:") {
				refs++
			}
		}
	}
	require.Equal(t, len(offloads), refs, "each offloaded result leaves a reference naming its id")
	require.Less(t, refs, 60, "no more than the goal needs")
	last := out.Messages[len(out.Messages)-1].Blocks[0].Text
	require.Equal(t, conv.Messages[len(conv.Messages)-1].Blocks[0].Text, last, "oldest first: the newest result stays")
	for _, o := range offloads {
		require.True(t, originals[o.Text], "the offload holds a result byte for byte")
	}
	require.Equal(t, conv.Messages[7].Blocks[0].Text, out.Messages[7].Blocks[0].Text, "errors go last: the old failure stays")
	require.NotEqual(t, conv.Messages[5].Blocks[0].Text, out.Messages[5].Blocks[0].Text, "an older plain result went")

	// When even every small result would leave it over the limit, the
	// step does nothing: the agent keeps what it had.
	b.Limit = b.Measure(conv) / 10
	same, pass, offloads, err := FitOffloadSmall(conv, p, b, key)
	require.NoError(t, err)
	require.False(t, pass.Applied)
	require.Contains(t, pass.Note, "not done")
	require.Empty(t, offloads)
	require.Equal(t, conv, same)
}
