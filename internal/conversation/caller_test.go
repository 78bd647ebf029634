package conversation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// callerRoles decodes the roles of the caller's messages[] in a rendered
// OpenAI or Anthropic document.
func callerRoles(t *testing.T, data []byte) []string {
	t.Helper()
	var msgs []struct {
		Role string `json:"role"`
	}
	if jsonKind(data) == jsonObject {
		var top struct {
			Messages json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(data, &top))
		data = top.Messages
	}
	require.NoError(t, json.Unmarshal(data, &msgs))
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = m.Role
	}
	return roles
}

func TestCallerIndexes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		format Format
		doc    string
		want   []int
	}{
		{"openai system is messages[0]", FormatOpenAI,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
			[]int{0, 1, 2}},
		{"anthropic top-level system", FormatAnthropic,
			`{"system":"s","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`,
			[]int{-1, 0, 1, 2}},
		{"anthropic without system", FormatAnthropic,
			`{"system":null,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`,
			[]int{0, 1}},
		{"anthropic bare array", FormatAnthropic,
			`[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]`,
			[]int{0, 1}},
		{"anthropic same-role neighbours share their merged position", FormatAnthropic,
			`{"system":"s","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}`,
			[]int{-1, 0, 0, 1, 2}},
		{"react turns", FormatReAct,
			`{"execution":{"tool_calls":[{"thought":"t","action":{"tool":"x"},"result":"r"},{"thought":"u","action":{"tool":"y"},"result":"s"}]}}`,
			[]int{0, 0, 1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.doc), tc.format)
			require.NoError(t, err)
			require.Equal(t, tc.want, c.CallerIndexes())
			for i, want := range tc.want {
				got, ok := c.CallerIndex(i)
				require.Equal(t, want, got, "message %d", i)
				require.Equal(t, want >= 0, ok, "message %d", i)
			}
			_, ok := c.CallerIndex(len(c.Messages))
			require.False(t, ok, "out of range")
			_, ok = c.CallerIndex(-1)
			require.False(t, ok, "out of range")
		})
	}
}

// TestCallerIndexNamesTheRenderedMessage: every message with a caller
// position is, in the rendered document, at that position with its role;
// checked on the samples and on a conversation changed in code (a summary
// next to a kept user message, which Render merges).
func TestCallerIndexNamesTheRenderedMessage(t *testing.T) {
	t.Parallel()
	var convs []Conversation
	for _, tc := range []struct {
		file   string
		format Format
	}{
		{"testdata/anthropic_sample.json", FormatAnthropic},
		{"testdata/anthropic_string_system.json", FormatAnthropic},
		{"testdata/openai_sample.json", FormatOpenAI},
		{"testdata/openai_array.json", FormatOpenAI},
	} {
		c, err := Parse(readFile(t, tc.file), tc.format)
		require.NoError(t, err)
		convs = append(convs, c)
	}
	compacted := convs[0].Clone()
	summary := Message{Role: RoleUser, Blocks: []Block{{Kind: KindText, Text: "[Compressed History]\n\nsummary"}}}
	compacted.Messages = append([]Message{compacted.Messages[0], compacted.Messages[1], summary}, compacted.Messages[4:]...)
	convs = append(convs, compacted)

	for _, c := range convs {
		data, err := Render(c)
		require.NoError(t, err)
		roles := callerRoles(t, data)
		idx := c.CallerIndexes()
		for i, pos := range idx {
			if pos < 0 {
				require.Equal(t, 0, i, "only the system prompt has no position")
				require.Equal(t, RoleSystem, c.Messages[i].Role)
				continue
			}
			require.Less(t, pos, len(roles))
			role := string(c.Messages[i].Role)
			if hasShape(c.Messages[i].Shape, shapeDeveloper) {
				role = "developer"
			}
			require.Equal(t, role, roles[pos], "message %d at messages[%d]", i, pos)
		}
		if len(idx) > 0 {
			require.Equal(t, len(roles)-1, idx[len(idx)-1], "the last message is the last of messages[]")
		}
	}
}
