package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// errUnsupported marks a conversation that has no faithful count_tokens
// request (a ReAct trajectory, an image in an OpenAI conversation): the
// caller falls back to the estimate.
var errUnsupported = fmt.Errorf("count_tokens request: %w", tokens.ErrNoProviderCount)

// countRequest is the body of POST /v1/messages/count_tokens: the fields
// of a Messages request that make up its input.
type countRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system,omitempty"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools,omitempty"`
}

// RequestBody is the count_tokens body for sending conv to model: for an
// Anthropic conversation its own rendering (system, messages and tools as
// the agent sends them); for an OpenAI conversation the same turns in
// Anthropic's shape (system messages joined into system, tool calls as
// tool_use, tool messages as tool_result in a user turn, function tools as
// tools). A conversation that has no faithful request (a ReAct
// trajectory; an image or an unknown block in an OpenAI conversation) is
// an error wrapping errUnsupported. The body is deterministic: the same
// conversation gives the same bytes, which key the count cache.
func RequestBody(model string, conv conversation.Conversation) ([]byte, error) {
	var req countRequest
	var err error
	switch conv.Format {
	case conversation.FormatAnthropic:
		req, err = fromAnthropic(conv)
	case conversation.FormatOpenAI:
		req, err = fromOpenAI(conv)
	default:
		return nil, fmt.Errorf("%w: format %q", errUnsupported, conv.Format)
	}
	if err != nil {
		return nil, err
	}
	req.Model = model
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode count_tokens request: %w", err)
	}
	return body, nil
}

// fromAnthropic takes system, messages and tools from conv's rendering.
func fromAnthropic(conv conversation.Conversation) (countRequest, error) {
	data, err := conversation.Render(conv)
	if err != nil {
		return countRequest{}, fmt.Errorf("%w: %w", errUnsupported, err)
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		return countRequest{Messages: trimmed}, nil // a bare list of messages
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return countRequest{}, fmt.Errorf("read rendered conversation: %w", err)
	}
	req := countRequest{Messages: top["messages"], Tools: nonNull(top["tools"])}
	if s := nonNull(top["system"]); s != nil && string(s) != `""` {
		req.System = s
	}
	return req, nil
}

// nonNull is raw, or nil for an absent or null value.
func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// message is one Anthropic message of a request built from the canonical
// model.
type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is an Anthropic content block: text, tool_use or tool_result.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *string         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// fromOpenAI builds the Anthropic request of an OpenAI conversation.
// Thinking blocks are left out: Anthropic does not count a previous
// turn's thinking. Consecutive turns of one role become one message, as
// the API wants the roles to alternate; empty texts are dropped, as the
// API refuses them.
func fromOpenAI(conv conversation.Conversation) (countRequest, error) {
	var system []string
	var msgs []message
	for i, m := range conv.Messages {
		role := "user"
		var content []block
		for j, b := range m.Blocks {
			bl, keep, err := openAIBlock(m.Role, b)
			if err != nil {
				return countRequest{}, fmt.Errorf("message %d block %d: %w", i, j, err)
			}
			if !keep {
				continue
			}
			if m.Role == conversation.RoleSystem {
				system = append(system, bl.Text)
				continue
			}
			content = append(content, bl)
		}
		switch m.Role {
		case conversation.RoleSystem:
			continue
		case conversation.RoleAssistant:
			role = "assistant"
		case conversation.RoleUser, conversation.RoleTool:
		default:
			return countRequest{}, fmt.Errorf("%w: message %d has role %q", errUnsupported, i, m.Role)
		}
		if len(content) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, content...)
			continue
		}
		msgs = append(msgs, message{Role: role, Content: content})
	}
	req := countRequest{}
	var err error
	if req.Messages, err = json.Marshal(msgs); err != nil {
		return req, fmt.Errorf("encode messages: %w", err)
	}
	if msgs == nil {
		req.Messages = json.RawMessage("[]")
	}
	if len(system) > 0 {
		if req.System, err = json.Marshal(strings.Join(system, "\n\n")); err != nil {
			return req, fmt.Errorf("encode system: %w", err)
		}
	}
	if req.Tools, err = openAITools(conv.Extra["tools"]); err != nil {
		return req, err
	}
	return req, nil
}

// openAIBlock maps one canonical block of an OpenAI message; keep is false
// for a block the request leaves out.
func openAIBlock(role conversation.Role, b conversation.Block) (block, bool, error) {
	switch b.Kind {
	case conversation.KindText:
		return block{Type: "text", Text: b.Text}, b.Text != "", nil
	case conversation.KindThinking:
		return block{}, false, nil
	case conversation.KindToolUse:
		input := json.RawMessage(strings.TrimSpace(b.Input))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		if !json.Valid(input) || input[0] != '{' {
			return block{}, false, fmt.Errorf("%w: tool call arguments are not a JSON object", errUnsupported)
		}
		return block{Type: "tool_use", ID: b.ToolID, Name: b.ToolName, Input: input}, true, nil
	case conversation.KindToolResult:
		if role != conversation.RoleTool && role != conversation.RoleUser {
			return block{}, false, fmt.Errorf("%w: a tool result in a %s message", errUnsupported, role)
		}
		text := b.Text
		return block{Type: "tool_result", ToolUseID: b.ToolID, Content: &text, IsError: b.IsError}, true, nil
	default:
		return block{}, false, fmt.Errorf("%w: a %s block", errUnsupported, b.Kind)
	}
}

// openAITools maps OpenAI function tools to Anthropic tools (name,
// description, input_schema).
func openAITools(raw json.RawMessage) (json.RawMessage, error) {
	if nonNull(raw) == nil {
		return nil, nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters,omitempty"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, fmt.Errorf("%w: tools: %w", errUnsupported, err)
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	out := make([]tool, 0, len(tools))
	for i, t := range tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, fmt.Errorf("%w: tool %d is not a named function", errUnsupported, i)
		}
		schema := nonNull(t.Function.Parameters)
		if schema == nil {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	if len(out) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode tools: %w", err)
	}
	return data, nil
}
