package convtest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Anthropic turns a real conversation of any format into Anthropic
// Messages, as an agent on Claude would have sent it: the system prompt
// as the top-level field, tool results as tool_result blocks of user
// messages (consecutive ones in one message, results first), call
// arguments as JSON objects (arguments that are not one are wrapped as
// {"input": …}), and no fields of the source format.
func Anthropic(data []byte) ([]byte, error) {
	src, err := conversation.ParseAny(data)
	if err != nil {
		return nil, fmt.Errorf("anthropic from %s: %w", "source", err)
	}
	out := conversation.Conversation{Format: conversation.FormatAnthropic}
	for _, m := range src.Messages {
		var blocks []conversation.Block
		for _, b := range m.Blocks {
			nb := conversation.Block{Kind: b.Kind, Text: b.Text, ToolID: b.ToolID, ToolName: b.ToolName, IsError: b.IsError}
			switch b.Kind {
			case conversation.KindText:
				if strings.TrimSpace(b.Text) == "" {
					continue
				}
			case conversation.KindToolUse:
				nb.Input = objectInput(b.Input)
			case conversation.KindToolResult:
				nb.ToolName = ""
			default:
				continue
			}
			blocks = append(blocks, nb)
		}
		if len(blocks) == 0 {
			continue
		}
		role := m.Role
		if role == conversation.RoleTool {
			role = conversation.RoleUser
		}
		if n := len(out.Messages); n > 0 && role != conversation.RoleSystem && out.Messages[n-1].Role == role {
			prev := &out.Messages[n-1]
			prev.Blocks = append(prev.Blocks, blocks...)
			continue
		}
		out.Messages = append(out.Messages, conversation.Message{Role: role, Blocks: blocks})
	}
	rendered, err := conversation.Render(out)
	if err != nil {
		return nil, fmt.Errorf("anthropic from %s: %w", src.Format, err)
	}
	return rendered, nil
}

// objectInput is a call's arguments as one JSON object.
func objectInput(in string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(in), &obj) == nil && obj != nil {
		return in
	}
	wrapped, _ := json.Marshal(map[string]string{"input": in})
	return string(wrapped)
}
