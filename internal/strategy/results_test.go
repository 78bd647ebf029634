package strategy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestToolResults(t *testing.T) {
	t.Parallel()
	c := conv(conversation.FormatAnthropic,
		userMsg("task"),
		asstMsg("Reading both.", use("a", "read_file", `{"path":"x"}`), use("b", "grep", `{"q":"y"}`)),
		userResults(result("a", "héllo"), errResult("b", "no match")),
	)
	require.Equal(t, []ResultLoc{
		{Msg: 2, Block: 0, ToolID: "a", ToolName: "read_file", Chars: 5, Context: "Reading both."},
		{Msg: 2, Block: 1, ToolID: "b", ToolName: "grep", Chars: 8, Context: "Reading both."},
	}, ToolResults(c))
	require.Empty(t, ToolResults(conv(conversation.FormatOpenAI, userMsg("hi"))))
}

func TestToolResultsReAct(t *testing.T) {
	t.Parallel()
	src, err := json.Marshal(map[string]any{
		"execution": map[string]any{
			"final_response": "done",
			"tool_calls": []map[string]any{
				{"thought": "I should search.", "action": map[string]any{"tool": "search", "query": "go generics"}, "result": "10 results"},
				{"thought": "Open the first.", "action": map[string]any{"tool": "fetch", "url": "https://go.dev"}, "result": "page"},
			},
		},
	})
	require.NoError(t, err)
	c, err := conversation.Parse(src, conversation.FormatReAct)
	require.NoError(t, err)
	locs := ToolResults(c)
	require.Len(t, locs, 2)
	require.Equal(t, "search", locs[0].ToolName)
	require.Equal(t, `Thought: I should search.`+"\n"+`Action: {"query":"go generics","tool":"search"}`, locs[0].Context)
	require.Equal(t, 4, locs[1].Chars)

	// Layer 2 (react-two-layer) rewrites only the result; the trajectory keeps its
	// shape, thought and action.
	out, err := ReplaceToolResult(c, locs[1].Msg, locs[1].Block, "summary of page")
	require.NoError(t, err)
	require.Equal(t, c.Messages[:3], out.Messages[:3])
	require.Equal(t, "summary of page", out.Messages[3].Blocks[0].Text)
	rendered, err := conversation.Render(out)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(rendered, &back))
	turns := back["execution"].(map[string]any)["tool_calls"].([]any)
	require.Len(t, turns, 2)
	require.Equal(t, "summary of page", turns[1].(map[string]any)["result"])
	require.Equal(t, "Open the first.", turns[1].(map[string]any)["thought"])
}

func TestReplaceToolResult(t *testing.T) {
	t.Parallel()
	c := conv(conversation.FormatOpenAI,
		asstMsg("x", use("a", "bash", "{}")),
		conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{errResult("a", "boom")}},
	)
	out, err := ReplaceToolResult(c, 1, 0, "short")
	require.NoError(t, err)
	require.Equal(t, "boom", c.Messages[1].Blocks[0].Text, "input unchanged")
	b := out.Messages[1].Blocks[0]
	require.Equal(t, "short", b.Text)
	require.True(t, b.IsError)
	require.Equal(t, "a", b.ToolID)

	for _, bad := range []struct {
		msg, block int
		want       string
	}{
		{-1, 0, "message -1 out of range"},
		{2, 0, "message 2 out of range"},
		{1, 1, "block 1 out of range"},
		{0, 0, "is text, not tool_result"},
		{0, 1, "is tool_use, not tool_result"},
	} {
		_, err := ReplaceToolResult(c, bad.msg, bad.block, "x")
		require.ErrorContains(t, err, bad.want)
	}
}
