package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	offKey := "tenants/acme/offload/ab/" + strings.Repeat("ab", 32)
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
				result("c1", "[Offloaded to "+offKey+"]\nline of build output"),
				call("Running tests.", "c2", `{"command":"go test ./..."}`), result("c2", "ok"), msg("assistant", "Done.")),
			want:    []string{"kept", "kept", "kept", "replaced", "kept", "kept", "kept"},
			counts:  [5]int{6, 1, 0, 0, 0},
			noteHas: "offloaded to " + offKey,
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
	require.Equal(t, Change{Index: 0, OutIndex: 0, Role: "user", Action: "kept", Before: 5, After: 5}, d.Changes[0])
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
