package convtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// TestAnthropic: a real OpenAI conversation becomes Anthropic Messages
// that parse as such, with every call still paired and the words kept.
func TestAnthropic(t *testing.T) {
	t.Parallel()
	data := Read(t, "django__django-11742.json")
	out, err := Anthropic(data)
	require.NoError(t, err)
	format, err := conversation.Detect(out)
	require.NoError(t, err)
	require.Equal(t, conversation.FormatAnthropic, format)
	src, err := conversation.ParseAny(data)
	require.NoError(t, err)
	got, err := conversation.ParseAny(out)
	require.NoError(t, err)
	count := func(c conversation.Conversation, k conversation.Kind) int {
		n := 0
		for _, m := range c.Messages {
			for _, b := range m.Blocks {
				if b.Kind == k {
					n++
				}
			}
		}
		return n
	}
	require.Equal(t, count(src, conversation.KindToolUse), count(got, conversation.KindToolUse))
	require.Equal(t, count(src, conversation.KindToolResult), count(got, conversation.KindToolResult))
	for i := 1; i < len(got.Messages); i++ {
		require.NotEqual(t, got.Messages[i-1].Role, got.Messages[i].Role, "roles alternate at %d", i)
	}
	require.Equal(t, conversation.RoleSystem, got.Messages[0].Role)
}
