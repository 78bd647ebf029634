package conversation

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireAlternating asserts that no two neighbouring messages of a
// conversation have the same role.
func requireAlternating(t testing.TB, c Conversation) {
	t.Helper()
	for i := 1; i < len(c.Messages); i++ {
		require.NotEqual(t, c.Messages[i-1].Role, c.Messages[i].Role, "messages %d and %d", i-1, i)
	}
}

// TestAnthropicMergesSameRole: Render writes same-role neighbours as one
// message, their blocks concatenated in order. Inputs and outputs are in
// the renderer's own compact form, so the expected output is exact.
func TestAnthropicMergesSameRole(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "user and user",
			in:   `{"system":"s","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"}]}`,
			want: `{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"c"}]}`,
		},
		{
			name: "assistant and assistant",
			in:   `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"}]},{"role":"assistant","content":"a"}]}`,
			want: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"text","text":"a"}]}]}`,
		},
		{
			name: "tool result user and text user",
			in:   `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]},{"role":"user","content":"next"}]}`,
			want: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"text","text":"next"}]}]}`,
		},
		{
			name: "three in a row",
			in:   `{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"c"}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}},{"type":"text","text":"c"}]}]}`,
		},
		{
			name: "bare array",
			in:   `[{"role":"user","content":"a"},{"role":"user","content":"b"}]`,
			want: `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`,
		},
		{
			name: "message fields merge, the first value wins",
			in:   `{"messages":[{"role":"user","content":"a","x":1},{"role":"user","content":"b","x":2,"y":3}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"x":1,"y":3}]}`,
		},
		{
			name: "empty final assistant joins the one before",
			in:   `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"assistant","content":""}]}`,
			want: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"text","text":"a"}]}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.in), FormatAnthropic)
			require.NoError(t, err)
			out, err := Render(c)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(out))

			// The output parses back to the merged model, alternating,
			// and renders again to the same bytes.
			again, err := Parse(out, FormatAnthropic)
			require.NoError(t, err)
			require.Equal(t, canonical(t, c.MergeSameRole()), canonical(t, again))
			requireAlternating(t, again)
			out2, err := Render(again)
			require.NoError(t, err)
			require.Equal(t, string(out), string(out2))
			require.NoError(t, CheckPairing(again))
		})
	}
}

// TestAnthropicAlternatingUntouched: a conversation that already
// alternates renders byte for byte as it was parsed, and MergeSameRole
// gives it back unchanged.
func TestAnthropicAlternatingUntouched(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"text","text":"go on"}]},{"role":"assistant","content":"done","stop_reason":"end_turn"}],"model":"m"}`,
		`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`,
		`[{"role":"user","content":"a"},{"role":"assistant","content":""}]`,
		`{"messages":[]}`,
	}
	for _, doc := range docs {
		c, err := Parse([]byte(doc), FormatAnthropic)
		require.NoError(t, err)
		require.Equal(t, c, c.MergeSameRole())
		out, err := Render(c)
		require.NoError(t, err)
		require.Equal(t, doc, string(out))
	}
	for _, file := range []string{"testdata/anthropic_sample.json", "testdata/anthropic_string_system.json"} {
		c, err := Parse(readFile(t, file), FormatAnthropic)
		require.NoError(t, err)
		require.Equal(t, c, c.MergeSameRole(), file)
		out, err := Render(c)
		require.NoError(t, err)
		again, err := Parse(out, FormatAnthropic)
		require.NoError(t, err)
		require.Len(t, again.Messages, len(c.Messages), file)
		out2, err := Render(again)
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2), file)
	}
}

// TestAnthropicMergeAfterCompaction: a summary user message inserted in
// code next to a kept user message, as a compaction does, goes out as one
// user turn with the tool pairing intact.
func TestAnthropicMergeAfterCompaction(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/anthropic_sample.json"), FormatAnthropic)
	require.NoError(t, err)
	require.NoError(t, CheckPairing(c))
	// Keep the system prompt and the first user message, then a summary,
	// then the tail from the assistant's third call on (its result pairs
	// inside the tail).
	out := c.Clone()
	summary := Message{Role: RoleUser, Blocks: []Block{{Kind: KindText, Text: "[Compressed History]\n\nRead the build files."}}}
	out.Messages = append([]Message{out.Messages[0], out.Messages[1], summary}, out.Messages[4:]...)
	require.Equal(t, RoleUser, out.Messages[1].Role)
	require.NoError(t, CheckPairing(out))

	data, err := Render(out)
	require.NoError(t, err)
	back, err := Parse(data, FormatAnthropic)
	require.NoError(t, err)
	requireAlternating(t, back)
	require.Len(t, back.Messages, len(out.Messages)-1)
	first := back.Messages[1]
	require.Equal(t, []Kind{KindText, KindText}, kinds(first))
	require.Equal(t, "Why does the build fail?", first.Blocks[0].Text)
	require.Equal(t, summary.Blocks[0].Text, first.Blocks[1].Text)

	require.NoError(t, CheckPairing(back))
	want, got := out.ToolIndex().Pairs, back.ToolIndex().Pairs
	require.Len(t, got, len(want))
	for k := range want {
		require.Equal(t, want[k].ID, got[k].ID)
		require.Equal(t, want[k].Pending, got[k].Pending)
		if got[k].Result.Valid() {
			require.Less(t, got[k].Use.Msg, got[k].Result.Msg, "use %s before its result", got[k].ID)
		}
	}
	// The input is untouched: merging happens only in the rendering.
	require.Len(t, out.Messages, len(c.Messages)-1)
	require.Equal(t, RoleUser, out.Messages[2].Role)
}

// TestAnthropicMergedRenderErrorIndex: an error inside a merged message
// still names the canonical message and block, as Render documents.
func TestAnthropicMergedRenderErrorIndex(t *testing.T) {
	t.Parallel()
	c := Conversation{Format: FormatAnthropic, Messages: []Message{
		{Role: RoleSystem, Shape: shapeSystemField, Blocks: []Block{{Kind: KindText, Text: "s"}}},
		{Role: RoleUser, Blocks: []Block{{Kind: KindText, Text: "a"}}},
		{Role: RoleUser, Blocks: []Block{{Kind: KindText, Text: "b"}, {Kind: KindText, Text: "bad \xff"}}},
	}}
	_, err := Render(c)
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, 2, e.Index)
	require.Equal(t, "blocks[1].text", e.Field)
}

// TestOpenAIKeepsSameRole: OpenAI accepts same-role neighbours, so they
// render as they are.
func TestOpenAIKeepsSameRole(t *testing.T) {
	t.Parallel()
	doc := `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`
	c, err := Parse([]byte(doc), FormatOpenAI)
	require.NoError(t, err)
	require.Equal(t, c, c.MergeSameRole())
	out, err := Render(c)
	require.NoError(t, err)
	require.Equal(t, doc, string(out))
}
