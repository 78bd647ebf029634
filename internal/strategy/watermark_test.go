package strategy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

const deactivate = "mcp__nisaba__deactivate_augments"

// watermarkExample is the watermark design's execution-flow example, message for message.
func watermarkExample() conversation.Conversation {
	return conv(conversation.FormatAnthropic,
		userMsg("Can you deactivate refactoring/* augments?"),
		asstMsg("...", use("toolu_abc123xyz", deactivate, `{"patterns":["refactoring/*"]}`)),
		userResults(result("toolu_abc123xyz", `{"unloaded":["refactoring/a","refactoring/b","refactoring/c"]}`)),
		asstMsg("Deactivated 3 augments..."),
		userMsg("Now help me with feature X"),
	)
}

func TestWatermarkExecutionFlow(t *testing.T) {
	t.Parallel()
	c := watermarkExample()

	// Phase 1: checkpoint resolution from the empty watermark.
	id, found := FindCheckpoint(c, []string{deactivate}, "")
	require.True(t, found)
	require.Equal(t, "toolu_abc123xyz", id)

	// Phase 2: compression at the watermark (message index 1). Message 0
	// holds only text, so the request goes out unchanged.
	out, stats, err := PruneAtWatermark(c, id)
	require.NoError(t, err)
	require.Equal(t, WatermarkStats{Found: true, Boundary: 1}, stats)
	require.Equal(t, c, out)
	require.NoError(t, checkPairing(out))
}

// multiCheckpoint has two deactivations with tool traffic around them, in
// the Anthropic shape.
func multiCheckpoint() conversation.Conversation {
	return conv(conversation.FormatAnthropic,
		userMsg("Explore the codebase."),
		asstMsg("Reading main.go.", use("toolu_r1", "read_file", `{"path":"main.go"}`)),
		userResults(result("toolu_r1", "package main")),
		asstMsg("", use("toolu_111", "deactivate_augments", `{"patterns":["workflow/*"]}`)),
		userResults(result("toolu_111", "ok"), textBlock("Now switch to code analysis.")),
		asstMsg("Searching.", use("toolu_g1", "grep", `{"q":"TODO"}`), use("toolu_g2", "grep", `{"q":"FIXME"}`)),
		userResults(result("toolu_g1", "a.go:1"), result("toolu_g2", "b.go:2")),
		asstMsg("Done, deactivating.", use("toolu_222", "deactivate_augments", `{"patterns":["code_analysis/*"]}`)),
		userResults(result("toolu_222", "ok")),
		asstMsg("Ready for refactoring."),
	)
}

func TestFindCheckpoint(t *testing.T) {
	t.Parallel()
	c := multiCheckpoint()
	names := []string{"deactivate_augments", "compress_to_checkpoint"}
	tests := []struct {
		name      string
		names     []string
		watermark string
		wantID    string
		wantFound bool
	}{
		{"empty watermark: the newest checkpoint", names, "", "toolu_222", true},
		{"advances past the current watermark", names, "toolu_111", "toolu_222", true},
		{"nothing after the latest checkpoint", names, "toolu_222", "", false},
		{"a watermark gone from the conversation re-anchors on what is left", names, "toolu_gone", "toolu_222", true},
		{"other tool names: the newest call", []string{"grep"}, "", "toolu_g2", true},
		{"a watermark that is not a checkpoint still bounds the search", []string{"grep"}, "toolu_g1", "", false},
		{"no names", nil, "", "", false},
		{"MCP-qualified name matches the bare name", []string{"deactivate_augments"}, "toolu_111", "toolu_222", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, found := FindCheckpoint(c, tt.names, tt.watermark)
			require.Equal(t, tt.wantFound, found)
			require.Equal(t, tt.wantID, id)
		})
	}

	// MCP-qualified names in the conversation match bare names, but not a
	// name that merely ends the same way without the mcp__ prefix.
	mcp := watermarkExample()
	id, found := FindCheckpoint(mcp, []string{"deactivate_augments"}, "")
	require.True(t, found)
	require.Equal(t, "toolu_abc123xyz", id)
	other := conv(conversation.FormatAnthropic, asstMsg("", use("x", "my__deactivate_augments", "{}")))
	_, found = FindCheckpoint(other, []string{"deactivate_augments"}, "")
	require.False(t, found)

	// Only assistant messages are searched, as in the watermark design.
	odd := conv(conversation.FormatAnthropic, userResults(use("u", "deactivate_augments", "{}")))
	_, found = FindCheckpoint(odd, names, "")
	require.False(t, found)
}

func TestPruneAtWatermarkAdvancing(t *testing.T) {
	t.Parallel()
	c := multiCheckpoint()

	first, stats, err := PruneAtWatermark(c, "toolu_111")
	require.NoError(t, err)
	require.Equal(t, WatermarkStats{Found: true, BlocksRemoved: 2, MessagesRemoved: 1, Boundary: 3}, stats)
	require.Equal(t, conv(conversation.FormatAnthropic,
		userMsg("Explore the codebase."),
		asstMsg("Reading main.go."),
	), conversation.Conversation{Format: first.Format, Messages: first.Messages[:2]})
	require.Equal(t, c.Messages[3:], first.Messages[2:])
	require.NoError(t, checkPairing(first))

	// The watermark advances to the second deactivation: more is pruned,
	// the user's text next to a removed tool_result stays.
	second, stats, err := PruneAtWatermark(c, "toolu_222")
	require.NoError(t, err)
	require.Equal(t, WatermarkStats{Found: true, BlocksRemoved: 8, MessagesRemoved: 3, Boundary: 7}, stats)
	require.Equal(t, []conversation.Message{
		userMsg("Explore the codebase."),
		asstMsg("Reading main.go."),
		userMsg("Now switch to code analysis."),
		asstMsg("Searching."),
	}, second.Messages[:4])
	require.Equal(t, c.Messages[7:], second.Messages[4:])
	require.NoError(t, checkPairing(second))

	// Applying the advanced watermark to the already pruned history (the
	// proxy applies it on every request) changes nothing more.
	again, stats, err := PruneAtWatermark(second, "toolu_222")
	require.NoError(t, err)
	require.Equal(t, 0, stats.BlocksRemoved)
	require.Equal(t, second, again)
}

func TestPruneAtWatermarkEdgeCases(t *testing.T) {
	t.Parallel()
	c := multiCheckpoint()
	tests := []struct {
		name      string
		c         conversation.Conversation
		watermark string
		want      WatermarkStats
	}{
		{"not found: unchanged", c, "toolu_missing", WatermarkStats{}},
		{"empty watermark: unchanged", c, "", WatermarkStats{}},
		{"watermark id on a tool_result only: not found", conv(conversation.FormatAnthropic, userResults(result("toolu_111", "x"))), "toolu_111", WatermarkStats{}},
		{"watermark in the first message", conv(conversation.FormatAnthropic,
			asstMsg("", use("toolu_1", deactivate, "{}")),
			userResults(result("toolu_1", "ok")),
		), "toolu_1", WatermarkStats{Found: true}},
		{"checkpoint message with other calls whose results come after", conv(conversation.FormatAnthropic,
			userMsg("go"),
			asstMsg("", use("toolu_a", "read_file", `{"path":"a"}`), use("toolu_cp", deactivate, "{}"), use("toolu_b", "read_file", `{"path":"b"}`)),
			userResults(result("toolu_a", "A"), result("toolu_cp", "ok"), result("toolu_b", "B")),
		), "toolu_cp", WatermarkStats{Found: true, Boundary: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, stats, err := PruneAtWatermark(tt.c, tt.watermark)
			require.NoError(t, err)
			require.Equal(t, tt.want, stats)
			require.Equal(t, tt.c, out)
		})
	}
}

func TestPruneAtWatermarkOpenAI(t *testing.T) {
	t.Parallel()
	empty := asstMsg("", use("call_2", "bash", `{"command":"ls"}`))
	empty.Blocks = append([]conversation.Block{textBlock("")}, empty.Blocks...)
	c := conv(conversation.FormatOpenAI,
		sysMsg("You are an agent."),
		userMsg("Fix the bug."),
		asstMsg("Looking.", use("call_1", "bash", `{"command":"cat a.py"}`)),
		toolMsg("call_1", "print(1)"),
		empty,
		toolMsg("call_2", "a.py"),
		asstMsg("Checkpoint.", use("call_3", "compress_to_checkpoint", `{}`)),
		toolMsg("call_3", "ok"),
		asstMsg("Continuing."),
	)
	out, stats, err := PruneAtWatermark(c, "call_3")
	require.NoError(t, err)
	require.Equal(t, WatermarkStats{Found: true, BlocksRemoved: 4, MessagesRemoved: 3, Boundary: 6}, stats)
	require.Equal(t, []conversation.Message{
		sysMsg("You are an agent."),
		userMsg("Fix the bug."),
		asstMsg("Looking."),
	}, out.Messages[:3])
	require.Equal(t, c.Messages[6:], out.Messages[3:])
	require.NoError(t, checkPairing(out))
}

func TestPruneAtWatermarkKeepBeforeAndProtected(t *testing.T) {
	t.Parallel()
	c := multiCheckpoint()

	// Keeping one message before toolu_222 would keep the results of
	// toolu_g1/g2 without their calls; the boundary moves to the calls.
	out, stats, err := PruneAtWatermarkWith(c, "toolu_222", WatermarkOptions{KeepBefore: 1})
	require.NoError(t, err)
	require.Equal(t, 5, stats.Boundary)
	require.Equal(t, c.Messages[5:], out.Messages[len(out.Messages)-5:])
	require.NoError(t, checkPairing(out))

	// A pinned message before the watermark stays verbatim, and so does the
	// call its tool_result answers.
	mask := make([]bool, len(c.Messages))
	mask[4] = true
	out, stats, err = PruneAtWatermarkWith(c, "toolu_222", WatermarkOptions{Protected: mask})
	require.NoError(t, err)
	require.Equal(t, 6, stats.BlocksRemoved)
	require.Contains(t, out.Messages, c.Messages[3])
	require.Contains(t, out.Messages, c.Messages[4])
	require.NoError(t, checkPairing(out))

	_, _, err = PruneAtWatermarkWith(c, "toolu_222", WatermarkOptions{Protected: []bool{true}})
	require.ErrorContains(t, err, "1 entries for 10 messages")
	_, _, err = PruneAtWatermarkWith(c, "toolu_222", WatermarkOptions{KeepBefore: -1})
	require.ErrorContains(t, err, "KeepBefore")
}

func TestPruneAtWatermarkRefusesReAct(t *testing.T) {
	t.Parallel()
	c := watermarkExample()
	c.Format = conversation.FormatReAct
	_, _, err := PruneAtWatermark(c, "toolu_abc123xyz")
	require.ErrorIs(t, err, ErrUnsupportedFormat)
}

// TestWatermarkNeverStuck: after a history summary removed the message
// holding the watermark, a later checkpoint call is found (re-anchored on
// what is left), and several calls since advance to the newest; pruning
// there keeps the pairing intact.
func TestWatermarkNeverStuck(t *testing.T) {
	t.Parallel()
	c := conv(conversation.FormatAnthropic,
		userMsg("[Compressed History]\n\nThe agent explored the workflow code and deactivated its augments."),
		asstMsg("Reading util.go.", use("toolu_u1", "read_file", `{"path":"util.go"}`)),
		userResults(result("toolu_u1", "package util")),
		asstMsg("", use("toolu_c1", "compress_to_checkpoint", `{}`)),
		userResults(result("toolu_c1", "ok")),
		asstMsg("Reading api.go.", use("toolu_u2", "read_file", `{"path":"api.go"}`)),
		userResults(result("toolu_u2", "package api")),
		asstMsg("", use("toolu_c2", "mcp__nisaba__compress_to_checkpoint", `{}`)),
		userResults(result("toolu_c2", "ok")),
		asstMsg("Continuing."),
	)
	names := []string{"deactivate_augments", "compress_to_checkpoint"}
	id, found, reanchored := FindCheckpointAnchored(c, names, "toolu_summarized_away")
	require.True(t, found)
	require.True(t, reanchored)
	require.Equal(t, "toolu_c2", id, "the newest of the calls since")
	out, st, err := PruneAtWatermark(c, id)
	require.NoError(t, err)
	require.True(t, st.Found)
	require.Equal(t, 6, st.BlocksRemoved, "the calls u1, c1, u2 and their results before c2")
	require.NoError(t, checkPairing(out))
	_, found, _ = FindCheckpointAnchored(out, names, id)
	require.False(t, found, "nothing newer after it")
}
