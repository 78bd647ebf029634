package convtest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Big is an OpenAI conversation of at least target bytes: the real
// SWE-agent run of testdata/conversations laid end to end (its complete
// turns repeated, tool call ids renamed on each repeat), then tail.
func Big(t testing.TB, target int, tail ...json.RawMessage) []byte {
	t.Helper()
	data := Read(t, "django__django-11742.json")
	var doc struct {
		Model    string            `json:"model"`
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	// The run ends with a call left unanswered: keep its complete turns.
	clean, pending := 0, map[string]bool{}
	for i, raw := range doc.Messages {
		var m struct {
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		require.NoError(t, json.Unmarshal(raw, &m))
		for _, c := range m.ToolCalls {
			pending[c.ID] = true
		}
		delete(pending, m.ToolCallID)
		if len(pending) == 0 {
			clean = i + 1
		}
	}
	out := []json.RawMessage{doc.Messages[0]}
	size := len(doc.Messages[0])
	for round := 0; size < target; round++ {
		for _, raw := range doc.Messages[1:clean] {
			var m map[string]any
			require.NoError(t, json.Unmarshal(raw, &m))
			prefix := fmt.Sprintf("r%d_", round)
			if id, ok := m["tool_call_id"].(string); ok {
				m["tool_call_id"] = prefix + id
			}
			if calls, ok := m["tool_calls"].([]any); ok {
				for _, c := range calls {
					if cm, ok := c.(map[string]any); ok {
						if id, ok := cm["id"].(string); ok {
							cm["id"] = prefix + id
						}
					}
				}
			}
			raw, err := json.Marshal(m)
			require.NoError(t, err)
			out = append(out, raw)
			size += len(raw)
		}
	}
	body, err := json.Marshal(map[string]any{"model": doc.Model, "messages": append(out, tail...)})
	require.NoError(t, err)
	return body
}
