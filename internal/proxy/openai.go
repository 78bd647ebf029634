package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// openAIProtocol is the OpenAI API under /v1: POST /chat/completions (a
// turn, streaming or not) is compacted; POST /responses is passed
// through (see parse); /models and every other route are passed through.
type openAIProtocol struct{}

func (openAIProtocol) route(rest string) routeKind {
	switch rest {
	case "/chat/completions", "/responses":
		return routeMessages
	}
	return routePass
}

func (openAIProtocol) format() conversation.Format { return conversation.FormatOpenAI }

func (openAIProtocol) parse(body []byte, _ routeKind) (request, error) {
	var v struct {
		Model              string            `json:"model"`
		Messages           []json.RawMessage `json:"messages"`
		Tools              json.RawMessage   `json:"tools"`
		Stream             bool              `json:"stream"`
		Input              json.RawMessage   `json:"input"`
		PreviousResponseID string            `json:"previous_response_id"`
		User               string            `json:"user"`
		PromptCacheKey     string            `json:"prompt_cache_key"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return request{}, fmt.Errorf("the request does not read as a chat request: %w", err)
	}
	if v.Messages == nil && len(v.Input) > 0 {
		// A Responses request. One that names previous_response_id keeps
		// its conversation at the provider, which is the provider's to
		// keep; one that carries its whole input is not read yet (its
		// items are not chat messages).
		if v.PreviousResponseID != "" {
			return request{pass: "a Responses request with previous_response_id keeps its state at the provider"}, nil
		}
		return request{pass: "Responses input items are not compacted yet (use /chat/completions)"}, nil
	}
	if len(v.Messages) == 0 {
		return request{}, errors.New("the request has no messages")
	}
	r := request{model: v.Model, msgs: v.Messages, tools: v.Tools, stream: v.Stream}
	if id := v.User + "\x00" + v.PromptCacheKey; id != "\x00" {
		// The system message is the first one, when there is one: a
		// host's sub-agents share its user id but not its prompt.
		r.thread = hexSum([]byte("openai user"), []byte(id), compact(v.Messages[0]))
	}
	r.digests(openAIProtocol{}.lasting)
	return r, nil
}

// lasting: every chat message is a turn (the system prompt is the first
// message, and part of the conversation).
func (openAIProtocol) lasting(json.RawMessage) bool { return true }

func (openAIProtocol) splice(body []byte, _ json.RawMessage, msgs []json.RawMessage) ([]byte, error) {
	return setFields(body, map[string]json.RawMessage{"messages": array(msgs)})
}

func (openAIProtocol) document(body []byte) ([]byte, error) { return body, nil }

func (openAIProtocol) output(doc []byte) (json.RawMessage, []json.RawMessage, error) {
	var v struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, nil, fmt.Errorf("read the output: %w", err)
	}
	if len(v.Messages) == 0 {
		return nil, nil, errors.New("the output has no messages")
	}
	return nil, v.Messages, nil
}

// fail writes OpenAI's error shape.
func (openAIProtocol) fail(w http.ResponseWriter, status int, state, message string) {
	kind := "server_error"
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		kind = "invalid_request_error"
	case http.StatusUnauthorized:
		kind = "authentication_error"
	case http.StatusNotFound:
		kind = "not_found_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderState, state)
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(map[string]any{"error": map[string]any{"message": message, "type": kind, "param": nil, "code": nil}}))
}

// ping is an SSE comment, which OpenAI's clients skip.
func (openAIProtocol) ping() string { return ": keep-alive\n\n" }

// streamError is the provider's error as a data event, as OpenAI sends
// one mid-stream.
func (openAIProtocol) streamError(body []byte) string {
	if !json.Valid(body) {
		body = errorJSON(map[string]any{"error": map[string]any{"message": string(body), "type": "server_error"}})
	}
	return "data: " + string(compact(body)) + "\n\n"
}
