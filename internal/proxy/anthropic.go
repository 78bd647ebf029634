package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

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

func (anthropicProtocol) counted(body []byte) ([]byte, error) { return body, nil }

func (anthropicProtocol) messages(msgs []json.RawMessage) (json.RawMessage, error) {
	return array(msgs), nil
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

func (anthropicProtocol) reply() reply { return anthropicReply{} }

// anthropicReply reads Messages answers for the recover flow.
type anthropicReply struct{}

// offer adds the tool in the Messages shape (withTool).
func (anthropicReply) offer(body []byte) ([]byte, bool) {
	return withTool(body, recoverDefinition, func(tool json.RawMessage) (string, error) {
		var t struct {
			Name string `json:"name"`
		}
		err := json.Unmarshal(tool, &t)
		return t.Name, err
	})
}

// anthropicBlock is the part of a content block the flow reads.
type anthropicBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

func (anthropicReply) calls(resp []byte) ([]recoverCall, int, error) {
	var v struct {
		Content []anthropicBlock `json:"content"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, 0, err
	}
	var calls []recoverCall
	host := 0
	for _, b := range v.Content {
		switch {
		case b.Type == "tool_use" && b.Name == RecoverTool:
			calls = append(calls, recoverCall{id: b.ID, input: b.Input})
		case b.Type == "tool_use":
			host++
		}
	}
	return calls, host, nil
}

func (anthropicReply) message(resp []byte) ([]json.RawMessage, error) {
	var v struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(v.Content))
	for _, raw := range v.Content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &b) == nil && blankText(b.Type, b.Text) {
			continue
		}
		kept = append(kept, raw)
	}
	return []json.RawMessage{json.RawMessage(`{"role":"assistant","content":` + string(array(kept)) + `}`)}, nil
}

// blankText says whether a block is a text block of white space only,
// which a model may answer before a call but the Messages API refuses in
// a request.
func blankText(typ, text string) bool {
	return typ == "text" && strings.TrimSpace(text) == ""
}

func (anthropicReply) strip(resp []byte) ([]byte, error) {
	var v struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(v.Content))
	calls := 0
	for _, raw := range v.Content {
		var b anthropicBlock
		if json.Unmarshal(raw, &b) == nil && b.Type == "tool_use" {
			if b.Name == RecoverTool {
				continue
			}
			calls++
		}
		kept = append(kept, raw)
	}
	set := map[string]json.RawMessage{"content": array(kept)}
	if calls == 0 {
		// No call left for the host to answer: the turn ended.
		set["stop_reason"] = json.RawMessage(`"end_turn"`)
	}
	return setFields(resp, set)
}

// withoutOffer: a Messages answer does not echo the request's tools.
func (anthropicReply) withoutOffer(resp []byte) []byte { return resp }

// answers are one user message of tool_result blocks.
func (anthropicReply) answers(as []recoverAnswer) []json.RawMessage {
	blocks := make([]json.RawMessage, len(as))
	for i, a := range as {
		blocks[i] = errorJSON(map[string]any{"type": "tool_result", "tool_use_id": a.callID, "content": a.text, "is_error": a.isErr})
	}
	return []json.RawMessage{json.RawMessage(`{"role":"user","content":` + string(array(blocks)) + `}`)}
}

// extend appends to the request's messages.
func (anthropicReply) extend(body []byte, msgs []json.RawMessage) ([]byte, error) {
	return withRecovery(body, msgs)
}

func (anthropicReply) stream() streamReply { return &anthropicStream{recover: map[int]bool{}} }

// anthropicStream reads a Messages stream: message_start, then each
// content block (content_block_start, its deltas, content_block_stop)
// by index, then message_delta and message_stop. A follow-up's blocks
// are numbered on from the blocks the host has (shift), and its
// message_start is dropped: the host reads one message.
type anthropicStream struct {
	round   int
	shift   int // the host's index of this round's block 0
	holding bool
	held    []sseEvent
	sent    int // blocks of this round sent to the host
	blocks  []*streamBlock
	recover map[int]bool
	host    int
	// failed says the provider sent an error event.
	failed bool
}

// streamBlock is one content block as its events build it.
type streamBlock struct {
	index   int
	start   map[string]any
	text    map[string]*strings.Builder // text, thinking, signature
	partial strings.Builder             // a tool call's input, as JSON
	extra   []any                       // citations
}

func (s *anthropicStream) event(ev sseEvent) []byte {
	var v struct {
		Type         string          `json:"type"`
		Index        *int            `json:"index"`
		ContentBlock json.RawMessage `json:"content_block"`
		Delta        json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(ev.data, &v) != nil {
		return s.pass(ev)
	}
	switch v.Type {
	case "message_start":
		if s.round > 0 {
			return nil
		}
	case "ping":
		// A ping keeps the host's stream alive, held round or not.
		return ev.raw
	case "error":
		// The provider ended the stream: no follow-up comes after it.
		s.failed = true
		return ev.raw
	case "content_block_start":
		if v.Index == nil {
			break
		}
		b := &streamBlock{index: *v.Index, text: map[string]*strings.Builder{}}
		dec := json.NewDecoder(bytes.NewReader(v.ContentBlock))
		dec.UseNumber()
		_ = dec.Decode(&b.start)
		s.blocks = append(s.blocks, b)
		if b.start["type"] == "tool_use" {
			if b.start["name"] == RecoverTool {
				s.recover[b.index] = true
				s.holding = true
			} else {
				s.host++
			}
		}
		if !s.holding {
			s.sent++
		}
	case "content_block_delta":
		if b := s.block(v.Index); b != nil {
			b.add(v.Delta)
		}
	}
	if v.Index != nil && !s.holding && s.shift != 0 {
		return reindex(ev, *v.Index+s.shift)
	}
	return s.pass(ev)
}

// pass sends ev on, or holds it once a recover call has begun.
func (s *anthropicStream) pass(ev sseEvent) []byte {
	if s.holding {
		s.held = append(s.held, ev)
		return nil
	}
	return ev.raw
}

func (s *anthropicStream) block(index *int) *streamBlock {
	if index == nil {
		return nil
	}
	for _, b := range s.blocks {
		if b.index == *index {
			return b
		}
	}
	return nil
}

// add applies one content_block_delta.
func (b *streamBlock) add(delta json.RawMessage) {
	var d map[string]any
	dec := json.NewDecoder(bytes.NewReader(delta))
	dec.UseNumber()
	if dec.Decode(&d) != nil {
		return
	}
	field := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}
	switch t, _ := d["type"].(string); t {
	case "input_json_delta":
		s, _ := d["partial_json"].(string)
		b.partial.WriteString(s)
	case "citations_delta":
		b.extra = append(b.extra, d["citation"])
	default:
		f, ok := field[t]
		if !ok {
			return
		}
		s, _ := d[f].(string)
		if b.text[f] == nil {
			b.text[f] = &strings.Builder{}
		}
		b.text[f].WriteString(s)
	}
}

func (s *anthropicStream) calls() ([]recoverCall, int) {
	if s.failed {
		return nil, s.host
	}
	var calls []recoverCall
	for _, b := range s.blocks {
		if s.recover[b.index] {
			id, _ := b.start["id"].(string)
			calls = append(calls, recoverCall{id: id, input: json.RawMessage(b.partial.String())})
		}
	}
	return calls, s.host
}

// message rebuilds the round's content blocks, thinking signatures
// included, as the model must be sent them back.
func (s *anthropicStream) message() ([]json.RawMessage, error) {
	content := make([]any, 0, len(s.blocks))
	for _, b := range s.blocks {
		blk := b.start
		if blk == nil {
			return nil, fmt.Errorf("content block %d did not read", b.index)
		}
		for f, sb := range b.text {
			blk[f] = sb.String()
		}
		if typ, _ := blk["type"].(string); typ == "text" {
			if text, _ := blk["text"].(string); blankText(typ, text) {
				continue
			}
		}
		if b.partial.Len() > 0 {
			blk["input"] = json.RawMessage(b.partial.String())
		}
		if len(b.extra) > 0 {
			cites, _ := blk["citations"].([]any)
			blk["citations"] = append(cites, b.extra...)
		}
		content = append(content, blk)
	}
	out, err := json.Marshal(map[string]any{"role": "assistant", "content": content})
	if err != nil {
		return nil, err
	}
	return []json.RawMessage{out}, nil
}

// release is the held events without the recover blocks, the later
// blocks numbered down past them.
func (s *anthropicStream) release() []byte {
	var out bytes.Buffer
	for _, ev := range s.held {
		var v struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(ev.data, &v) != nil || v.Index == nil {
			out.Write(s.ended(ev))
			continue
		}
		if s.recover[*v.Index] {
			continue
		}
		out.Write(reindex(ev, *v.Index+s.shift-below(s.recover, *v.Index)))
	}
	s.held = nil
	return out.Bytes()
}

// ended is ev, a held event without an index, with a tool_use stop
// reason made end_turn when the host has no call of its own to answer.
func (s *anthropicStream) ended(ev sseEvent) []byte {
	if s.host > 0 || !bytes.Contains(ev.data, []byte(`"tool_use"`)) {
		return ev.raw
	}
	var v struct {
		Type  string          `json:"type"`
		Delta json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(ev.data, &v) != nil || v.Type != "message_delta" {
		return ev.raw
	}
	delta, err := setFields(v.Delta, map[string]json.RawMessage{"stop_reason": json.RawMessage(`"end_turn"`)})
	if err != nil {
		return ev.raw
	}
	data, err := setFields(ev.data, map[string]json.RawMessage{"delta": delta})
	if err != nil {
		return ev.raw
	}
	return rawEvent(ev.name, data)
}

func (s *anthropicStream) next() {
	s.shift += s.sent
	s.round++
	s.holding, s.held, s.sent, s.blocks, s.host = false, nil, 0, nil, 0
	s.recover = map[int]bool{}
}

// reindex is ev with its data's index set to n.
func reindex(ev sseEvent, n int) []byte {
	data, err := setFields(ev.data, map[string]json.RawMessage{"index": json.RawMessage(fmt.Sprint(n))})
	if err != nil {
		return ev.raw
	}
	return rawEvent(ev.name, data)
}

// rawEvent writes an SSE event.
func rawEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}
