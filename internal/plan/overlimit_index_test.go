package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TestOverLimitReasonNamesCallerPositions: the reason names each message
// by its position in the messages[] the caller sent (and gets back), not
// in the canonical model, which holds the Anthropic system prompt as
// message 0.
func TestOverLimitReasonNamesCallerPositions(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("the build log goes on and on ", 2000)
	medium := strings.Repeat("be careful ", 500)
	tail := []any{
		map[string]any{"role": "user", "content": "Fix the build."},
		map[string]any{"role": "assistant", "content": "Looking."},
		map[string]any{"role": "user", "content": big},
	}
	anthropicDoc := map[string]any{"model": "claude-sonnet-4-5", "system": medium, "messages": tail}
	openaiDoc := map[string]any{"model": "gpt-4o", "messages": append([]any{map[string]any{"role": "system", "content": medium}}, tail...)}
	reactDoc := map[string]any{"execution": map[string]any{"tool_calls": []any{
		map[string]any{"thought": "look", "action": map[string]any{"tool": "ls"}, "result": "ok"},
		map[string]any{"thought": "read", "action": map[string]any{"tool": "cat"}, "result": big},
	}}}
	cases := []struct {
		name   string
		format conversation.Format
		doc    any
		want   []string
		absent []string
	}{
		{"anthropic top-level system", conversation.FormatAnthropic, anthropicDoc,
			[]string{"message 2 (user text)", "system (system text)"}, []string{"message 3"}},
		{"openai system is messages[0]", conversation.FormatOpenAI, openaiDoc,
			[]string{"message 3 (user text)", "message 0 (system text)"}, []string{"system (system text)"}},
		{"react turns", conversation.FormatReAct, reactDoc,
			[]string{"turn 1 (tool tool result)"}, []string{"message"}},
	}
	p := preset(t, policy.ThreeTier, "")
	b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, err := json.Marshal(tc.doc)
			require.NoError(t, err)
			conv, err := conversation.Parse(data, tc.format)
			require.NoError(t, err)
			reason := OverLimitReason(conv, p, b, true, false)
			for _, w := range tc.want {
				require.Contains(t, reason, w)
			}
			for _, a := range tc.absent {
				require.NotContains(t, reason, a)
			}
		})
	}
}

// TestOverLimitReasonMergedMessages: messages the Anthropic rendering
// merges (a summary next to a kept user message) are named by the one
// position they share in the output's messages[].
func TestOverLimitReasonMergedMessages(t *testing.T) {
	t.Parallel()
	text := func(s string) []conversation.Block {
		return []conversation.Block{{Kind: conversation.KindText, Text: s}}
	}
	conv := conversation.Conversation{Format: conversation.FormatAnthropic, Messages: []conversation.Message{
		{Role: conversation.RoleSystem, Blocks: text("s")},
		{Role: conversation.RoleUser, Blocks: text("Fix the build.")},
		{Role: conversation.RoleUser, Blocks: text("[Compressed History]\n\n" + strings.Repeat("long summary ", 3000))},
		{Role: conversation.RoleAssistant, Blocks: text("Done.")},
	}}
	p := preset(t, policy.ThreeTier, "")
	b, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	reason := OverLimitReason(conv, p, b, true, false)
	require.Contains(t, reason, "largest: message 0 (user text)")
	require.Contains(t, reason, "message 1 (assistant text)")
	require.NotContains(t, reason, "message 2")
}
