package drift

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTranscriptBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []TranscriptBlock
	}{
		{"every header", "[user]\nfix it\n\n[assistant tool call bash]\n{\"command\":\"ls\"}\n\n[tool tool result bash]\na.go\n\n[tool tool error bash]\nboom\n",
			[]TranscriptBlock{
				{Head: "user", Text: "fix it"},
				{Head: "assistant tool call bash", Text: `{"command":"ls"}`},
				{Head: "tool tool result bash", Text: "a.go"},
				{Head: "tool tool error bash", Text: "boom"},
			}},
		{"a result without a tool name", "[tool tool result ]\nok\n", []TranscriptBlock{{Head: "tool tool result", Text: "ok"}}},
		{"no header", "just text", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := TranscriptBlocks(tc.in)
			if len(tc.want) == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}
