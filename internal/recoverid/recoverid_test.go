package recoverid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

var sha = strings.Repeat("0a", 32)

func TestParseAndFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want recoverid.ID
		ok   bool
	}{
		{sha + ".m3-57", recoverid.Range(sha, 3, 57), true},
		{sha + ".m0-0", recoverid.Range(sha, 0, 0), true},
		{sha + ".m12b1", recoverid.BlockOf(sha, 12, 1), true},
		{sha + ".m0b0", recoverid.BlockOf(sha, 0, 0), true},
		{sha + ".m9999999-9999999", recoverid.Range(sha, 9999999, 9999999), true},

		{"", recoverid.ID{}, false},
		{sha, recoverid.ID{}, false},                                     // an offload id is no archive id
		{sha + ".", recoverid.ID{}, false},                               // nothing after the dot
		{sha + ".m", recoverid.ID{}, false},                              // no number
		{sha + ".m3", recoverid.ID{}, false},                             // one form only: m3-3
		{sha + ".m3-", recoverid.ID{}, false},                            // no end
		{sha + ".m5-3", recoverid.ID{}, false},                           // ends before it starts
		{sha + ".m03-5", recoverid.ID{}, false},                          // leading zero
		{sha + ".m3-05", recoverid.ID{}, false},                          // leading zero
		{sha + ".m3b01", recoverid.ID{}, false},                          // leading zero
		{sha + ".m-1-3", recoverid.ID{}, false},                          // sign
		{sha + ".m+1-3", recoverid.ID{}, false},                          // sign
		{sha + ".m 1-3", recoverid.ID{}, false},                          // space
		{sha + ".m1-3 ", recoverid.ID{}, false},                          // trailing space
		{sha + ".m1-3\n", recoverid.ID{}, false},                         // newline
		{sha + ".m1-3b2", recoverid.ID{}, false},                         // range and block
		{sha + ".m1b2-3", recoverid.ID{}, false},                         // block and range
		{sha + ".m1b", recoverid.ID{}, false},                            // no block number
		{sha + ".m10000000-10000001", recoverid.ID{}, false},             // 8 digits
		{sha + ".m1-99999999999999999999", recoverid.ID{}, false},        // overflow
		{sha + ".x1-3", recoverid.ID{}, false},                           // not m
		{sha + ".M1-3", recoverid.ID{}, false},                           // not m
		{strings.ToUpper(sha) + ".m1-3", recoverid.ID{}, false},          // uppercase hex
		{sha[:63] + ".m1-3", recoverid.ID{}, false},                      // short digest
		{sha + "0.m1-3", recoverid.ID{}, false},                          // long digest
		{strings.Repeat("g", 64) + ".m1-3", recoverid.ID{}, false},       // not hex
		{"tenants/a/archive/0a/" + sha + ".m1-3", recoverid.ID{}, false}, // a key is no id
		{"../" + sha + ".m1-3", recoverid.ID{}, false},
		{sha + ".m1-3/../x", recoverid.ID{}, false},
		{sha + ".m١-3", recoverid.ID{}, false}, // a non-ASCII digit
	} {
		got, err := recoverid.Parse(tc.in)
		if !tc.ok {
			require.Error(t, err, "%q", tc.in)
			require.True(t, errors.Is(err, recoverid.ErrMalformed), "%q: %v", tc.in, err)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
		require.Equal(t, tc.in, got.String(), "an id formats as it parses")
		require.Equal(t, strings.Contains(tc.in, "b"), got.IsBlock())
	}
	require.Equal(t, strategy.RecoverTool, recoverid.Tool)
}

// sample is a small OpenAI conversation: system, task, a call and its
// result, an error, a reply.
func sample() conversation.Conversation {
	return conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		{Role: conversation.RoleSystem, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "You are careful."}}},
		{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "Fix the parser."}}},
		{Role: conversation.RoleAssistant, Blocks: []conversation.Block{
			{Kind: conversation.KindText, Text: "Reading it."},
			{Kind: conversation.KindToolUse, ToolID: "c1", ToolName: "bash", Input: `{"command":"cat parse.go"}`},
		}},
		{Role: conversation.RoleTool, Blocks: []conversation.Block{{Kind: conversation.KindToolResult, ToolID: "c1", Text: "package parse\nfunc Parse() {}\n"}}},
		{Role: conversation.RoleAssistant, Blocks: []conversation.Block{
			{Kind: conversation.KindToolUse, ToolID: "c2", ToolName: "bash", Input: `{"command":"go test"}`},
		}},
		{Role: conversation.RoleTool, Blocks: []conversation.Block{{Kind: conversation.KindToolResult, ToolID: "c2", IsError: true, Text: "FAIL"}}},
		{Role: conversation.RoleAssistant, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "Fixed."}}},
	}}
}

func TestTextOfARangeAndABlock(t *testing.T) {
	t.Parallel()
	c := sample()
	got, err := recoverid.Text(c, recoverid.Range(sha, 1, 5))
	require.NoError(t, err)
	want := "[message 1 user]\nFix the parser.\n\n" +
		"[message 2 assistant]\nReading it.\n\n" +
		"[message 2 assistant tool call bash]\n{\"command\":\"cat parse.go\"}\n\n" +
		"[message 3 tool result bash]\npackage parse\nfunc Parse() {}\n\n\n" +
		"[message 4 assistant tool call bash]\n{\"command\":\"go test\"}\n\n" +
		"[message 5 tool error bash]\nFAIL\n\n"
	require.Equal(t, want, got, "role headers, calls and results, every text verbatim")
	again, err := recoverid.Text(c.Clone(), recoverid.Range(sha, 1, 5))
	require.NoError(t, err)
	require.Equal(t, got, again, "byte-stable")

	block, err := recoverid.Text(c, recoverid.BlockOf(sha, 3, 0))
	require.NoError(t, err)
	require.Equal(t, "package parse\nfunc Parse() {}\n", block, "a result verbatim")
	input, err := recoverid.Text(c, recoverid.BlockOf(sha, 2, 1))
	require.NoError(t, err)
	require.Equal(t, `{"command":"cat parse.go"}`, input, "a call's input verbatim")

	for _, id := range []recoverid.ID{
		recoverid.Range(sha, 0, 7), recoverid.Range(sha, 7, 7), recoverid.BlockOf(sha, 7, 0),
		recoverid.BlockOf(sha, 2, 2), recoverid.Range(sha, -1, 2),
	} {
		_, err := recoverid.Text(c, id)
		require.ErrorIs(t, err, recoverid.ErrOutOfRange, "%s", id)
	}
}

func TestSummaryAndResultLines(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Recover the summarized messages 3–57 with the recover_context tool, id: "+sha+".m3-57",
		recoverid.SummaryLine(recoverid.Range(sha, 3, 57)))
	require.Equal(t, "Recover the summarized message 4 with the recover_context tool, id: "+sha+".m4-4",
		recoverid.SummaryLine(recoverid.Range(sha, 4, 4)))
	require.Equal(t, "[Recover the original result with the recover_context tool, id: "+sha+".m3b0]",
		recoverid.ResultLine(recoverid.BlockOf(sha, 3, 0).String()))
}

func rangeOf(t *testing.T, m recoverid.Map, msgs ...int) string {
	t.Helper()
	id, ok := m.Range(msgs)
	require.True(t, ok)
	return id.String()
}

func blockOf(t *testing.T, m recoverid.Map, msg, block int) string {
	t.Helper()
	id, ok := m.Block(msg, block)
	require.True(t, ok)
	return id.String()
}

func TestAlignFollowsThePasses(t *testing.T) {
	t.Parallel()
	orig := sample()

	t.Run("texts replaced in place", func(t *testing.T) {
		t.Parallel()
		work := orig.Clone()
		work.Messages[3].Blocks[0].ReplaceResult("offloaded: see the reference")
		work.Messages[4].Blocks[0].Input = `{"truncated_input":"…"}`
		m := recoverid.Align(orig, work, sha)
		require.Equal(t, sha+".m3b0", blockOf(t, m, 3, 0))
		require.Equal(t, sha+".m4b0", blockOf(t, m, 4, 0))
		require.Equal(t, sha+".m2-5", rangeOf(t, m, 2, 3, 4, 5))
	})

	t.Run("watermark pruning", func(t *testing.T) {
		t.Parallel()
		// The first call and its result pruned: message 2 keeps its
		// text, message 3 is gone.
		work := orig.Clone()
		work.Messages[2].Blocks = work.Messages[2].Blocks[:1]
		work.Messages = append(work.Messages[:3], work.Messages[4:]...)
		m := recoverid.Align(orig, work, sha)
		require.Equal(t, sha+".m2-2", rangeOf(t, m, 2))
		require.Equal(t, sha+".m4-5", rangeOf(t, m, 3, 4), "positions after the dropped message are the original's")
		require.Equal(t, sha+".m5b0", blockOf(t, m, 4, 0))
	})

	t.Run("a summary stands for the range its id names", func(t *testing.T) {
		t.Parallel()
		protected := make([]bool, len(orig.Messages))
		protected[0], protected[1] = true, true
		summary := "the parser was read\n\n" + recoverid.SummaryLine(recoverid.Range(sha, 2, 3))
		work, _, err := strategy.Compact(orig, 4, summary, strategy.StyleSummaryFirst, protected)
		require.NoError(t, err)
		require.Len(t, work.Messages, 6) // system, task, summary, 4, 5, 6
		m := recoverid.Align(orig, work, sha)
		require.Equal(t, sha+".m2-3", rangeOf(t, m, 2))
		require.Equal(t, sha+".m2-5", rangeOf(t, m, 2, 3, 4), "a second summary covers the first one's range")
		require.Equal(t, sha+".m5b0", blockOf(t, m, 4, 0))
	})

	t.Run("an anthropic save merges a summary with its neighbours", func(t *testing.T) {
		t.Parallel()
		a := conversation.Conversation{Format: conversation.FormatAnthropic, Messages: []conversation.Message{
			{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "task"}}},
			{Role: conversation.RoleAssistant, Blocks: []conversation.Block{{Kind: conversation.KindToolUse, ToolID: "t1", ToolName: "read", Input: "{}"}}},
			{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindToolResult, ToolID: "t1", Text: "long"}}},
			{Role: conversation.RoleAssistant, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "next"}}},
			{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "go on"}}},
			{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "and quickly"}}},
		}}
		// Work: the task, a user summary of 1-3, then the tail, merged
		// by a save into one user message.
		work := conversation.Conversation{Format: conversation.FormatAnthropic, Messages: []conversation.Message{
			{Role: conversation.RoleUser, Blocks: []conversation.Block{
				{Kind: conversation.KindText, Text: "task"},
				{Kind: conversation.KindText, Text: "[Compressed History]\n\nread it\n\n" + recoverid.SummaryLine(recoverid.Range(sha, 1, 3))},
				{Kind: conversation.KindText, Text: "go on"},
				{Kind: conversation.KindText, Text: "and quickly"},
			}},
		}}
		m := recoverid.Align(a, work, sha)
		require.Equal(t, sha+".m0-5", rangeOf(t, m, 0))
		require.Equal(t, sha+".m5b0", blockOf(t, m, 0, 3))
		require.Equal(t, sha+".m0b0", blockOf(t, m, 0, 0))
		require.Equal(t, sha+".m0-5", blockOf(t, m, 0, 1), "the summary block: the message's range")
	})

	t.Run("what matches nothing stands for the whole original", func(t *testing.T) {
		t.Parallel()
		work := orig.Clone()
		work.Messages[6].Blocks[0].Text = "a text no original holds"
		m := recoverid.Align(orig, work, sha)
		require.Equal(t, sha+".m0-6", rangeOf(t, m, 5, 6))
		require.Equal(t, sha+".m0-6", blockOf(t, m, 6, 0))
		require.Equal(t, sha+".m5-5", rangeOf(t, m, 5))
		// Another archive's id is text, not a range.
		other := strings.Repeat("b", 64)
		work.Messages[6].Blocks[0].Text = recoverid.SummaryLine(recoverid.Range(other, 1, 2))
		m = recoverid.Align(orig, work, sha)
		require.Equal(t, sha+".m0-6", rangeOf(t, m, 6))
	})

	t.Run("no original", func(t *testing.T) {
		t.Parallel()
		m := recoverid.Align(conversation.Conversation{}, orig, sha)
		_, ok := m.Range([]int{1})
		require.False(t, ok)
	})
}
