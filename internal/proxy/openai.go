package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// openAIProtocol is the OpenAI API under /v1: POST /chat/completions (a
// turn, streaming or not) is compacted; POST /responses is
// responsesProtocol's; /models and every other route are passed through.
type openAIProtocol struct{}

func (openAIProtocol) route(rest string) routeKind {
	switch rest {
	case "/chat/completions":
		return routeMessages
	}
	return routePass
}

func (openAIProtocol) format() conversation.Format { return conversation.FormatOpenAI }

func (openAIProtocol) parse(body []byte, _ routeKind) (request, error) {
	var v struct {
		Model          string            `json:"model"`
		Messages       []json.RawMessage `json:"messages"`
		Tools          json.RawMessage   `json:"tools"`
		Stream         bool              `json:"stream"`
		User           string            `json:"user"`
		PromptCacheKey string            `json:"prompt_cache_key"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return request{}, fmt.Errorf("the request does not read as a chat request: %w", err)
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

func (openAIProtocol) counted(body []byte) ([]byte, error) { return body, nil }

func (openAIProtocol) messages(msgs []json.RawMessage) (json.RawMessage, error) {
	return array(msgs), nil
}

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

func (openAIProtocol) reply() reply { return openAIReply{} }

// openAIReply reads chat completions for the recover flow.
type openAIReply struct{}

// offer adds the tool as a function (withTool), unless the request asks
// for several choices (n > 1), which the flow does not read.
func (openAIReply) offer(body []byte) ([]byte, bool) {
	var v struct {
		N int `json:"n"`
	}
	if json.Unmarshal(body, &v) != nil || v.N > 1 {
		return body, false
	}
	def := `{"type":"function","function":{"name":"` + RecoverTool + `","description":` +
		string(errorJSON(recoverDescription)) + `,"parameters":` + recoverSchema + `}}`
	return withTool(body, def, func(tool json.RawMessage) (string, error) {
		var t struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		err := json.Unmarshal(tool, &t)
		return t.Function.Name, err
	})
}

// openAICall is a tool call of a chat completion.
type openAICall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAIChoice is the first choice of a completion: the one a host reads
// (the proxy answers only when the request asks for one).
func openAIChoice(resp []byte) (msg json.RawMessage, calls []openAICall, err error) {
	var v struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, nil, err
	}
	if len(v.Choices) != 1 {
		return nil, nil, fmt.Errorf("the answer has %d choices", len(v.Choices))
	}
	var m struct {
		ToolCalls []openAICall `json:"tool_calls"`
	}
	if err := json.Unmarshal(v.Choices[0].Message, &m); err != nil {
		return nil, nil, err
	}
	return v.Choices[0].Message, m.ToolCalls, nil
}

func (openAIReply) calls(resp []byte) ([]recoverCall, int, error) {
	_, tcs, err := openAIChoice(resp)
	if err != nil {
		return nil, 0, err
	}
	var calls []recoverCall
	host := 0
	for _, c := range tcs {
		if c.Function.Name == RecoverTool {
			calls = append(calls, recoverCall{id: c.ID, input: json.RawMessage(c.Function.Arguments)})
			continue
		}
		host++
	}
	return calls, host, nil
}

func (openAIReply) message(resp []byte) ([]json.RawMessage, error) {
	msg, tcs, err := openAIChoice(resp)
	if err != nil {
		return nil, err
	}
	var m struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	return assistantMessage(m.Content, tcs)
}

// extend appends to the request's messages.
func (openAIReply) extend(body []byte, msgs []json.RawMessage) ([]byte, error) {
	return withRecovery(body, msgs)
}

// assistantMessage is a chat assistant message with its tool calls, as
// the one message a follow-up appends.
func assistantMessage(content *string, calls []openAICall) ([]json.RawMessage, error) {
	for i := range calls {
		calls[i].Index = nil
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
	msg, err := json.Marshal(map[string]any{"role": "assistant", "content": content, "tool_calls": calls})
	if err != nil {
		return nil, err
	}
	return []json.RawMessage{msg}, nil
}

func (openAIReply) strip(resp []byte) ([]byte, error) {
	msg, tcs, err := openAIChoice(resp)
	if err != nil {
		return nil, err
	}
	var kept []json.RawMessage
	for _, c := range tcs {
		if c.Function.Name != RecoverTool {
			raw, _ := json.Marshal(c)
			kept = append(kept, raw)
		}
	}
	calls := json.RawMessage("null")
	if len(kept) > 0 {
		calls = array(kept)
	}
	msg, err = setFields(msg, map[string]json.RawMessage{"tool_calls": calls})
	if err != nil {
		return nil, err
	}
	var v struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, err
	}
	set := map[string]json.RawMessage{"message": msg}
	if len(kept) == 0 {
		// No call left for the host to answer: the turn ended.
		set["finish_reason"] = json.RawMessage(`"stop"`)
	}
	choice, err := setFields(v.Choices[0], set)
	if err != nil {
		return nil, err
	}
	return setFields(resp, map[string]json.RawMessage{"choices": array([]json.RawMessage{choice})})
}

// withoutOffer: a chat completion does not echo the request's tools.
func (openAIReply) withoutOffer(resp []byte) []byte { return resp }

// answers are one tool message per call.
func (openAIReply) answers(as []recoverAnswer) []json.RawMessage {
	out := make([]json.RawMessage, len(as))
	for i, a := range as {
		out[i] = errorJSON(map[string]any{"role": "tool", "tool_call_id": a.callID, "content": a.text})
	}
	return out
}

func (openAIReply) stream() streamReply {
	return &openAIStream{recover: map[int]bool{}, byIndex: map[int]*openAICall{}}
}

// openAIStream reads a chat completion stream: chunks whose first choice
// carries a delta (content, tool calls by index), a finish_reason, then
// data: [DONE]. A follow-up's tool calls are numbered on from the calls
// the host has (shift).
type openAIStream struct {
	round   int
	shift   int
	holding bool
	held    []sseEvent
	sent    int // tool calls of this round sent to the host
	content *string
	order   []int
	byIndex map[int]*openAICall
	recover map[int]bool
	host    int
}

// openAIChunk is the part of a chunk the flow reads.
type openAIChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string      `json:"content"`
			ToolCalls []openAICall `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

func (s *openAIStream) event(ev sseEvent) []byte {
	if string(bytes.TrimSpace(ev.data)) == "[DONE]" {
		return s.pass(ev)
	}
	var c openAIChunk
	if json.Unmarshal(ev.data, &c) != nil || len(c.Choices) != 1 {
		return s.pass(ev)
	}
	d := c.Choices[0].Delta
	if d.Content != nil {
		if s.content == nil {
			s.content = new(string)
		}
		*s.content += *d.Content
	}
	for _, tc := range d.ToolCalls {
		if tc.Index == nil {
			// Some compatible providers send one call without an index.
			zero := 0
			tc.Index = &zero
		}
		call, ok := s.byIndex[*tc.Index]
		if !ok {
			call = &openAICall{ID: tc.ID, Type: tc.Type}
			call.Function.Name = tc.Function.Name
			s.byIndex[*tc.Index] = call
			s.order = append(s.order, *tc.Index)
			if tc.Function.Name == RecoverTool {
				s.recover[*tc.Index] = true
				s.holding = true
			} else {
				s.host++
				if !s.holding {
					s.sent++
				}
			}
		}
		call.Function.Arguments += tc.Function.Arguments
	}
	if !s.holding && s.shift != 0 && len(d.ToolCalls) > 0 {
		return s.renumber(ev, func(i int) (int, bool) { return i + s.shift, true })
	}
	return s.pass(ev)
}

func (s *openAIStream) pass(ev sseEvent) []byte {
	if s.holding {
		s.held = append(s.held, ev)
		return nil
	}
	return ev.raw
}

// renumber is ev with its tool calls' indexes mapped by to (false: the
// call is left out).
func (s *openAIStream) renumber(ev sseEvent, to func(int) (int, bool)) []byte {
	var v struct {
		Choices []json.RawMessage `json:"choices"`
	}
	var d struct {
		Delta json.RawMessage `json:"delta"`
	}
	var calls struct {
		ToolCalls []json.RawMessage `json:"tool_calls"`
	}
	if json.Unmarshal(ev.data, &v) != nil || len(v.Choices) != 1 || json.Unmarshal(v.Choices[0], &d) != nil ||
		json.Unmarshal(d.Delta, &calls) != nil || len(calls.ToolCalls) == 0 {
		return ev.raw
	}
	var kept []json.RawMessage
	for _, raw := range calls.ToolCalls {
		var tc openAICall
		if json.Unmarshal(raw, &tc) != nil {
			kept = append(kept, raw)
			continue
		}
		index := 0 // a call without an index is the only one (event)
		if tc.Index != nil {
			index = *tc.Index
		}
		n, ok := to(index)
		if !ok {
			continue
		}
		out, err := setFields(raw, map[string]json.RawMessage{"index": json.RawMessage(fmt.Sprint(n))})
		if err != nil {
			return ev.raw
		}
		kept = append(kept, out)
	}
	list := json.RawMessage("[]")
	if len(kept) > 0 {
		list = array(kept)
	}
	delta, err1 := setFields(d.Delta, map[string]json.RawMessage{"tool_calls": list})
	choice, err2 := setFields(v.Choices[0], map[string]json.RawMessage{"delta": delta})
	data, err3 := setFields(ev.data, map[string]json.RawMessage{"choices": array([]json.RawMessage{choice})})
	if err := errors.Join(err1, err2, err3); err != nil {
		return ev.raw
	}
	return []byte("data: " + string(data) + "\n\n")
}

func (s *openAIStream) calls() ([]recoverCall, int) {
	var out []recoverCall
	for _, i := range s.order {
		if s.recover[i] {
			c := s.byIndex[i]
			out = append(out, recoverCall{id: c.ID, input: json.RawMessage(c.Function.Arguments)})
		}
	}
	return out, s.host
}

func (s *openAIStream) message() ([]json.RawMessage, error) {
	calls := make([]openAICall, 0, len(s.order))
	for _, i := range s.order {
		calls = append(calls, *s.byIndex[i])
	}
	return assistantMessage(s.content, calls)
}

// release is the held chunks without the recover calls, the later calls
// numbered down past them.
func (s *openAIStream) release() []byte {
	var out bytes.Buffer
	for _, ev := range s.held {
		if s.host == 0 && bytes.Contains(ev.data, []byte(`"finish_reason":"tool_calls"`)) {
			// No call left for the host to answer: the turn ended.
			ev = sseEvent{name: ev.name, data: bytes.Replace(ev.data, []byte(`"finish_reason":"tool_calls"`), []byte(`"finish_reason":"stop"`), 1)}
			ev.raw = []byte("data: " + string(ev.data) + "\n\n")
		}
		out.Write(s.renumber(ev, func(i int) (int, bool) {
			if s.recover[i] {
				return 0, false
			}
			return i + s.shift - below(s.recover, i), true
		}))
	}
	s.held = nil
	return out.Bytes()
}

func (s *openAIStream) next() {
	s.shift += s.sent
	s.round++
	s.holding, s.held, s.sent, s.content, s.order, s.host = false, nil, 0, nil, nil, 0
	s.byIndex, s.recover = map[int]*openAICall{}, map[int]bool{}
}
