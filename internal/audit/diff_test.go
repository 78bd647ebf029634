package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// msg builds one OpenAI chat message.
func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func call(content, id, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": content, "tool_calls": []any{
		map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": args}},
	}}
}

func result(id, content string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
}

func openai(t *testing.T, msgs ...map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	require.NoError(t, err)
	return data
}

// actions lists the actions of a diff in order, for compact assertions.
func actions(d Diff) []string {
	out := make([]string, len(d.Changes))
	for i, c := range d.Changes {
		out[i] = c.Action
	}
	return out
}

func TestDiffConversations(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("line of build output\n", 500)
	offID := strings.Repeat("ab", 32)
	original := openai(t,
		msg("system", "You are careful."),
		msg("user", "Fix the bug."),
		call("Looking at the log.", "c1", `{"command":"cat build.log"}`),
		result("c1", big),
		call("Running tests.", "c2", `{"command":"go test ./..."}`),
		result("c2", "ok"),
		msg("assistant", "Done."),
	)
	tests := []struct {
		name    string
		output  []byte
		want    []string
		counts  [5]int // kept, replaced, removed, summarized, added
		noteHas string
	}{
		{
			name: "unchanged", output: original,
			want:   []string{"kept", "kept", "kept", "kept", "kept", "kept", "kept"},
			counts: [5]int{7, 0, 0, 0, 0},
		},
		{
			name: "offloaded result",
			output: openai(t,
				msg("system", "You are careful."), msg("user", "Fix the bug."),
				call("Looking at the log.", "c1", `{"command":"cat build.log"}`),
				result("c1", "## Offloaded: bash Result\n**Id:** "+offID+"\nline of build output\nTool result is at: "+offID),
				call("Running tests.", "c2", `{"command":"go test ./..."}`), result("c2", "ok"), msg("assistant", "Done.")),
			want:    []string{"kept", "kept", "kept", "replaced", "kept", "kept", "kept"},
			counts:  [5]int{6, 1, 0, 0, 0},
			noteHas: "offloaded as " + offID,
		},
		{
			name: "history summarized, last two kept",
			output: openai(t,
				msg("system", "You are careful."), msg("user", "[Compressed History]\n\nThe user asked for a fix."),
				call("Running tests.", "c2", `{"command":"go test ./..."}`), result("c2", "ok"), msg("assistant", "Done.")),
			want:   []string{"kept", "summarized", "summarized", "summarized", "added", "kept", "kept", "kept"},
			counts: [5]int{4, 0, 0, 3, 1},
		},
		{
			name: "watermark pruned tool blocks",
			output: openai(t,
				msg("system", "You are careful."), msg("user", "Fix the bug."),
				msg("assistant", "Looking at the log."),
				call("Running tests.", "c2", `{"command":"go test ./..."}`), result("c2", "ok"), msg("assistant", "Done.")),
			want:    []string{"kept", "kept", "replaced", "removed", "kept", "kept", "kept"},
			counts:  [5]int{5, 1, 1, 0, 0},
			noteHas: "tool_use c1 (bash) removed",
		},
		{
			name: "truncated tool input",
			output: openai(t,
				msg("system", "You are careful."), msg("user", "Fix the bug."),
				call("Looking at the log.", "c1", `{"command":"cat"}`), result("c1", big),
				call("Running tests.", "c2", `{"command":"go test ./..."}`), result("c2", "ok"), msg("assistant", "Done.")),
			want:    []string{"kept", "kept", "replaced", "kept", "kept", "kept", "kept"},
			counts:  [5]int{6, 1, 0, 0, 0},
			noteHas: "input 27 → 17 chars",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := DiffConversations(original, tc.output)
			require.NoError(t, err)
			require.Equal(t, tc.want, actions(d))
			require.Equal(t, tc.counts, [5]int{d.Kept, d.Replaced, d.Removed, d.Summarized, d.Added})
			if tc.noteHas != "" {
				var notes []string
				for _, c := range d.Changes {
					notes = append(notes, c.Note)
				}
				require.Contains(t, strings.Join(notes, "\n"), tc.noteHas)
			}
			// Every original message appears once, in order; every output
			// message too.
			var in, out []int
			for _, c := range d.Changes {
				if c.Index >= 0 {
					in = append(in, c.Index)
				}
				if c.OutIndex >= 0 {
					out = append(out, c.OutIndex)
				}
			}
			require.Len(t, in, 7)
			require.IsIncreasing(t, in)
			require.IsIncreasing(t, out)
		})
	}
}

func TestDiffCountsCharacters(t *testing.T) {
	t.Parallel()
	d, err := DiffConversations(openai(t, msg("user", "héllo"), call("", "c9", "{}"), result("c9", "12345")),
		openai(t, msg("user", "héllo"), call("", "c9", "{}"), result("c9", "12")))
	require.NoError(t, err)
	require.Equal(t, Change{Index: 0, OutIndex: 0, At: "0", OutAt: "0", Role: "user", Action: "kept", Before: 5, After: 5}, d.Changes[0])
	require.Equal(t, 5, d.Changes[2].Before)
	require.Equal(t, 2, d.Changes[2].After)
	require.Equal(t, "replaced", d.Changes[2].Action)
	require.Equal(t, "tool_result c9 (bash) 5 → 2 chars", d.Changes[2].Note)
}

func TestDiffRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, err := DiffConversations([]byte(`{"messages": 3}`), openai(t, msg("user", "x")))
	require.ErrorContains(t, err, "parse original")
	_, err = DiffConversations(openai(t, msg("user", "x")), []byte(`nope`))
	require.ErrorContains(t, err, "parse output")
}

func TestAlignGreedyFallbackMatchesInOrder(t *testing.T) {
	t.Parallel()
	// 6,000 × 3,000 messages exceed the table bound: the greedy alignment
	// must still pair what corresponds and keep both sides in order.
	var a, b []map[string]any
	for i := 0; i < 6000; i++ {
		a = append(a, msg("user", fmt.Sprintf("question %d", i)))
		if i%2 == 0 {
			b = append(b, msg("user", fmt.Sprintf("question %d", i)))
		}
	}
	// A changed first message defeats the common-prefix shortcut.
	b[0] = msg("user", "rewritten")
	d, err := DiffConversations(openai(t, a...), openai(t, b...))
	require.NoError(t, err)
	require.Equal(t, 2999, d.Kept)
	require.Equal(t, 1, d.Added)
	require.Equal(t, 3001, d.Summarized)
	require.Equal(t, []string{"summarized", "summarized", "added", "kept"}, actions(d)[:4],
		"the rewritten message sits where the first ones were")
}

// anthropic builds an Anthropic Messages request with a top-level system
// prompt.
func anthropic(t *testing.T, system string, msgs ...map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "system": system, "messages": msgs})
	require.NoError(t, err)
	return data
}

func blocks(role string, b ...map[string]any) map[string]any {
	return map[string]any{"role": role, "content": b}
}

func toolUse(id string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": "bash", "input": map[string]any{"command": "cat build.log"}}
}

func toolResult(id, content string) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": content}
}

// TestDiffIndexesAreCallerPositions: for an Anthropic conversation, whose
// system prompt is a top-level field, every index of the diff is a
// position in the messages[] of the original or the output, and the
// system prompt is named "system".
func TestDiffIndexesAreCallerPositions(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("line of build output\n", 500)
	original := anthropic(t, "You are careful.",
		msg("user", "Fix the bug."),
		blocks("assistant", map[string]any{"type": "text", "text": "Looking at the log."}, toolUse("c1")),
		blocks("user", toolResult("c1", big)),
		blocks("assistant", map[string]any{"type": "text", "text": "Running tests."}, toolUse("c2")),
		blocks("user", toolResult("c2", "ok")),
		msg("assistant", "Done."),
	)

	t.Run("replaced result", func(t *testing.T) {
		t.Parallel()
		output := anthropic(t, "You are careful.",
			msg("user", "Fix the bug."),
			blocks("assistant", map[string]any{"type": "text", "text": "Looking at the log."}, toolUse("c1")),
			blocks("user", toolResult("c1", "[Offloaded]")),
			blocks("assistant", map[string]any{"type": "text", "text": "Running tests."}, toolUse("c2")),
			blocks("user", toolResult("c2", "ok")),
			msg("assistant", "Done."),
		)
		d, err := DiffConversations(original, output)
		require.NoError(t, err)
		require.Equal(t, []string{"kept", "kept", "kept", "replaced", "kept", "kept", "kept"}, actions(d))
		sys := d.Changes[0]
		require.Equal(t, Change{Index: -1, OutIndex: -1, At: "system", OutAt: "system", Role: "system", Action: "kept",
			Before: 16, After: 16}, sys)
		replaced := d.Changes[3]
		require.Equal(t, 2, replaced.Index, "messages[2] of the original holds the result")
		require.Equal(t, 2, replaced.OutIndex)
		require.Equal(t, "2", replaced.At)
		require.Contains(t, string(convtest.Messages(t, original)[replaced.Index]), `"tool_use_id":"c1"`)
		require.Contains(t, string(convtest.Messages(t, output)[replaced.OutIndex]), `[Offloaded]`)
		for k, c := range d.Changes[1:] {
			require.Equal(t, k, c.Index)
			require.Equal(t, k, c.OutIndex)
		}
	})

	t.Run("history summarized", func(t *testing.T) {
		t.Parallel()
		output := anthropic(t, "You are careful.",
			msg("user", "[Compressed History]\n\nThe user asked for a fix."),
			blocks("assistant", map[string]any{"type": "text", "text": "Running tests."}, toolUse("c2")),
			blocks("user", toolResult("c2", "ok")),
			msg("assistant", "Done."),
		)
		d, err := DiffConversations(original, output)
		require.NoError(t, err)
		require.Equal(t, []string{"kept", "summarized", "summarized", "summarized", "added", "kept", "kept", "kept"}, actions(d))
		in, out := convtest.Messages(t, original), convtest.Messages(t, output)
		for _, c := range d.Changes[1:] {
			if c.Index >= 0 {
				var m struct {
					Role string `json:"role"`
				}
				require.NoError(t, json.Unmarshal(in[c.Index], &m))
				require.Equal(t, c.Role, m.Role, "original messages[%d]", c.Index)
			}
			if c.OutIndex >= 0 {
				require.Less(t, c.OutIndex, len(out))
			}
		}
		added := d.Changes[4]
		require.Equal(t, 0, added.OutIndex, "the summary is messages[0] of the output")
		require.Equal(t, "0", added.OutAt)
		require.Empty(t, added.At)
		require.Equal(t, []int{0, 1, 2}, []int{d.Changes[1].Index, d.Changes[2].Index, d.Changes[3].Index})
		require.Equal(t, [][2]int{{3, 1}, {4, 2}, {5, 3}},
			[][2]int{{d.Changes[5].Index, d.Changes[5].OutIndex}, {d.Changes[6].Index, d.Changes[6].OutIndex}, {d.Changes[7].Index, d.Changes[7].OutIndex}})
	})
}

// TestDiffOpenAISystemIsMessageZero: OpenAI holds the system prompt in
// messages[], so it has a number like any other message.
func TestDiffOpenAISystemIsMessageZero(t *testing.T) {
	t.Parallel()
	doc := openai(t, msg("system", "You are careful."), msg("user", "Fix the bug."))
	d, err := DiffConversations(doc, doc)
	require.NoError(t, err)
	require.Equal(t, Change{Index: 0, OutIndex: 0, At: "0", OutAt: "0", Role: "system", Action: "kept", Before: 16, After: 16}, d.Changes[0])
	require.Equal(t, 1, d.Changes[1].Index)
}

// TestDiffReActTurns: a ReAct trajectory is a list of turns; both
// messages of a turn (the action, then its result) are at the turn's
// position.
func TestDiffReActTurns(t *testing.T) {
	t.Parallel()
	traj := func(result string) []byte {
		data, err := json.Marshal(map[string]any{"execution": map[string]any{"tool_calls": []any{
			map[string]any{"thought": "look", "action": map[string]any{"tool": "ls"}, "result": "a b"},
			map[string]any{"thought": "read", "action": map[string]any{"tool": "cat"}, "result": result},
		}}})
		require.NoError(t, err)
		return data
	}
	d, err := DiffConversations(traj(strings.Repeat("x", 100)), traj("short"))
	require.NoError(t, err)
	require.Equal(t, []string{"kept", "kept", "kept", "replaced"}, actions(d))
	var idx []int
	for _, c := range d.Changes {
		idx = append(idx, c.Index)
	}
	require.Equal(t, []int{0, 0, 1, 1}, idx)
	require.Equal(t, "1", d.Changes[3].OutAt)
}
