package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// responsesProtocol is OpenAI's Responses API (POST /v1/responses). A
// request that names previous_response_id keeps its conversation at the
// provider and is passed through; one that carries its whole input (as
// Codex does, stateless) is compacted like a chat: its input items are
// read as chat messages for the run (a message is a message, a
// function_call an assistant tool call, a function_call_output a tool
// message), and the run's output is written back as input items. The
// instructions stay the host's, counted beside the conversation like the
// tools.
//
// Reasoning items carry the model's encrypted reasoning, which only the
// provider reads: they are not conversation text, so the run never sees
// them; those the host appended after a compaction go upstream as they
// came, and those the compaction replaced are dropped with the turns
// they belonged to (the output's tool calls carry no item ids, so the
// provider asks for none). An item of any other type (a built-in tool's
// call, an item reference, an image or a file) is not read yet: the
// request goes upstream as it came, and the state header says why.
//
// The references a compaction leaves are followed as on the other
// routes: the proxy offers the recover tool as a function tool and
// answers the model's calls itself (responses_recover.go).
type responsesProtocol struct{}

func (responsesProtocol) route(rest string) routeKind {
	if rest == "/responses" {
		return routeMessages
	}
	return routePass
}

func (responsesProtocol) format() conversation.Format { return conversation.FormatOpenAI }

func (responsesProtocol) parse(body []byte, _ routeKind) (request, error) {
	var v struct {
		Model              string          `json:"model"`
		Instructions       json.RawMessage `json:"instructions"`
		Input              json.RawMessage `json:"input"`
		Tools              json.RawMessage `json:"tools"`
		Stream             bool            `json:"stream"`
		PreviousResponseID string          `json:"previous_response_id"`
		User               string          `json:"user"`
		PromptCacheKey     string          `json:"prompt_cache_key"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return request{}, fmt.Errorf("the request does not read as a Responses request: %w", err)
	}
	if v.PreviousResponseID != "" {
		return request{pass: "a Responses request with previous_response_id keeps its conversation at the provider"}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v.Input, &items); err != nil {
		// A string input is one user message, and nothing to compact.
		return request{pass: "the input is not a list of items"}, nil
	}
	if len(items) == 0 {
		return request{}, errors.New("the request has no input items")
	}
	if _, err := itemsToChat(items); err != nil {
		return request{pass: err.Error()}, nil
	}
	r := request{model: v.Model, msgs: items, tools: v.Tools, beside: v.Instructions, stream: v.Stream}
	if id := v.User + "\x00" + v.PromptCacheKey; id != "\x00" {
		r.thread = hexSum([]byte("openai responses user"), []byte(id), compact(v.Instructions))
	}
	// The instructions are the system prompt: part of what a request's
	// digests start from, so that another prompt is another line.
	r.system = v.Instructions
	r.digests(responsesProtocol{}.lasting)
	return r, nil
}

// lasting: every input item is one the host sends again.
func (responsesProtocol) lasting(json.RawMessage) bool { return true }

// splice sets the input; the instructions stay the host's.
func (responsesProtocol) splice(body []byte, _ json.RawMessage, msgs []json.RawMessage) ([]byte, error) {
	return setFields(body, map[string]json.RawMessage{"input": array(msgs)})
}

// document is the request as a chat conversation: its input items as
// chat messages (reasoning items left out).
func (responsesProtocol) document(body []byte) ([]byte, error) {
	var v struct {
		Model string            `json:"model"`
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("read the input items: %w", err)
	}
	msgs, err := itemsToChat(v.Input)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"model": v.Model, "messages": msgs})
}

// counted: input items are not a chat; the count reads the document.
func (r responsesProtocol) counted(body []byte) ([]byte, error) { return r.document(body) }

func (responsesProtocol) messages(items []json.RawMessage) (json.RawMessage, error) {
	msgs, err := itemsToChat(items)
	if err != nil {
		return nil, err
	}
	return json.Marshal(msgs)
}

// output reads a run's chat output as input items.
func (responsesProtocol) output(doc []byte) (json.RawMessage, []json.RawMessage, error) {
	_, msgs, err := openAIProtocol{}.output(doc)
	if err != nil {
		return nil, nil, err
	}
	items, err := chatToItems(msgs)
	if err != nil {
		return nil, nil, fmt.Errorf("write the output as input items: %w", err)
	}
	return nil, items, nil
}

func (responsesProtocol) fail(w http.ResponseWriter, status int, state, message string) {
	openAIProtocol{}.fail(w, status, state, message)
}

func (responsesProtocol) ping() string { return ": keep-alive\n\n" }

// streamError is an error event, as the Responses API sends one.
func (responsesProtocol) streamError(body []byte) string {
	var v struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	msg, code := string(body), any("server_error")
	if json.Unmarshal(body, &v) == nil && v.Error.Message != "" {
		msg, code = v.Error.Message, v.Error.Code
		if code == nil {
			code = v.Error.Type
		}
	}
	return "event: error\ndata: " + string(errorJSON(map[string]any{"type": "error", "code": code, "message": msg, "param": nil})) + "\n\n"
}

// reply: the recover tool is offered as a function tool and answered
// with function_call_output items, the stream renumbered across the
// follow-ups (responses_recover.go).
func (responsesProtocol) reply() reply { return responsesReply{} }

// responseItem is the part of an input item the conversion reads.
type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// chatMessage is a chat message as the conversion writes it.
type chatMessage struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	ToolCalls  []openAICall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

// itemsToChat reads input items as chat messages: consecutive
// function_call items join the assistant message before them.
func itemsToChat(items []json.RawMessage) ([]chatMessage, error) {
	var out []chatMessage
	for i, raw := range items {
		var it responseItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, fmt.Errorf("input item %d does not read: %v", i, err)
		}
		switch {
		case it.Type == "reasoning":
			continue
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			text, err := itemText(it.Content)
			if err != nil {
				return nil, fmt.Errorf("input item %d: %v", i, err)
			}
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			if role != "user" && role != "assistant" && role != "system" {
				return nil, fmt.Errorf("input item %d: role %q is not compacted", i, it.Role)
			}
			out = append(out, chatMessage{Role: role, Content: &text})
		case it.Type == "function_call":
			call := openAICall{ID: it.CallID, Type: "function"}
			call.Function.Name, call.Function.Arguments = it.Name, it.Arguments
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
				continue
			}
			out = append(out, chatMessage{Role: "assistant", ToolCalls: []openAICall{call}})
		case it.Type == "function_call_output":
			text, err := itemText(it.Output)
			if err != nil {
				return nil, fmt.Errorf("input item %d (function_call_output): %v", i, err)
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: &text})
		default:
			return nil, fmt.Errorf("input item %d is of type %q, which the proxy does not compact yet", i, it.Type)
		}
	}
	return out, nil
}

// itemText is an item's content or output as text: a string, or a list
// of text parts.
func itemText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("its content is neither text nor a list of parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			if i > 0 {
				b.WriteByte('\n') // parts are apart: their words are not one
			}
			b.WriteString(p.Text)
		default:
			return "", fmt.Errorf("a content part of type %q is not compacted yet", p.Type)
		}
	}
	return b.String(), nil
}

// chatToItems writes chat messages as input items.
func chatToItems(msgs []json.RawMessage) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for i, raw := range msgs {
		var m struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []openAICall    `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		text := ""
		if len(m.Content) > 0 && string(m.Content) != "null" {
			t, err := itemText(m.Content)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			text = t
		}
		add := func(v any) error {
			b, err := json.Marshal(v)
			out = append(out, b)
			return err
		}
		var err error
		switch m.Role {
		case "tool":
			err = add(map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": text})
		case "assistant":
			if text != "" {
				err = add(map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text}}})
			}
			for _, c := range m.ToolCalls {
				if err == nil {
					err = add(map[string]any{"type": "function_call", "call_id": c.ID, "name": c.Function.Name, "arguments": c.Function.Arguments})
				}
			}
		default:
			err = add(map[string]any{"type": "message", "role": m.Role, "content": text})
		}
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return out, nil
}
