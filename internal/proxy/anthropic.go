package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// anthropicProtocol is the Anthropic Messages API: POST /v1/messages (a
// turn, streaming or not, with any query such as ?beta=true) and POST
// /v1/messages/count_tokens; any other route is passed through.
type anthropicProtocol struct{}

func (anthropicProtocol) route(rest string) routeKind {
	switch rest {
	case "/v1/messages":
		return routeMessages
	case "/v1/messages/count_tokens":
		return routeCount
	}
	return routePass
}

func (anthropicProtocol) format() conversation.Format { return conversation.FormatAnthropic }

func (anthropicProtocol) parse(body []byte, _ routeKind) (request, error) {
	var v struct {
		Model    string            `json:"model"`
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
		Stream   bool              `json:"stream"`
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return request{}, fmt.Errorf("the request does not read as a Messages request: %w", err)
	}
	if len(v.Messages) == 0 {
		return request{}, errors.New("the request has no messages")
	}
	r := request{model: v.Model, system: v.System, msgs: v.Messages, tools: v.Tools, stream: v.Stream}
	if v.Metadata.UserID != "" {
		// A host shares one user id across its main thread, its
		// sub-agents and its side calls; their system prompts differ.
		r.thread = hexSum([]byte("anthropic user"), []byte(v.Metadata.UserID), compact(v.System))
	}
	r.digests(anthropicProtocol{}.lasting)
	return r, nil
}

// lasting: a system message among the turns is a host's reminder for
// that one request (Claude Code inserts and removes them); the turns are
// the user's and the assistant's.
func (anthropicProtocol) lasting(m json.RawMessage) bool {
	var v struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(m, &v) != nil || v.Role != "system"
}

func (anthropicProtocol) splice(body []byte, system json.RawMessage, msgs []json.RawMessage) ([]byte, error) {
	if s := string(compact(system)); s == "[]" || s == `""` {
		// The empty system document added: the host sent none.
		system = nil
	}
	return setFields(body, map[string]json.RawMessage{"system": system, "messages": array(msgs)})
}

// document gives a request without a system prompt an empty one: a
// Messages request is told from a chat request by its system field
// (conversation.Detect), and a plain one without it reads as chat.
func (anthropicProtocol) document(body []byte) ([]byte, error) {
	var v struct {
		System json.RawMessage `json:"system"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	if v.System != nil {
		return body, nil
	}
	return setFields(body, map[string]json.RawMessage{"system": json.RawMessage("[]")})
}

func (anthropicProtocol) output(doc []byte) (json.RawMessage, []json.RawMessage, error) {
	var v struct {
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, nil, fmt.Errorf("read the output: %w", err)
	}
	if len(v.Messages) == 0 {
		return nil, nil, errors.New("the output has no messages")
	}
	for i, m := range v.Messages {
		stripped, err := withoutCacheControl(m)
		if err != nil {
			return nil, nil, fmt.Errorf("output message %d: %w", i, err)
		}
		v.Messages[i] = stripped
	}
	return v.System, v.Messages, nil
}

// fail writes Anthropic's error shape.
func (anthropicProtocol) fail(w http.ResponseWriter, status int, state, message string) {
	kind := "api_error"
	switch status {
	case http.StatusBadRequest:
		kind = "invalid_request_error"
	case http.StatusUnauthorized:
		kind = "authentication_error"
	case http.StatusNotFound:
		kind = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		kind = "request_too_large"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderState, state)
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": message}}))
}

// ping is the ping event Anthropic itself sends in a stream.
func (anthropicProtocol) ping() string { return "event: ping\ndata: {\"type\": \"ping\"}\n\n" }

// streamError is an error event, as Anthropic sends one mid-stream; a
// body that is not the provider's JSON error is wrapped in one.
func (anthropicProtocol) streamError(body []byte) string {
	if !json.Valid(body) {
		body = errorJSON(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": string(body)}})
	}
	return "event: error\ndata: " + string(compact(body)) + "\n\n"
}
