package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The recover flow on OpenAI's Responses API (recover.go). Codex and the
// other stateless hosts send their whole input each turn, usually
// streamed, without storage (store: false), with the model's reasoning
// as encrypted items. The tool is a flat function tool; the model's call
// is a function_call output item, and its answer a function_call_output
// input item. A follow-up sends the request again with the round's
// output items appended to its input as the model produced them
// (reasoning with its encrypted_content, messages, calls), then one
// function_call_output per recover call.

// recoverFunction is the recover tool as a Responses function tool: its
// name at the top level, not under "function" as in a chat request.
var recoverFunction = `{"type":"function","name":"` + RecoverTool + `","description":` +
	string(errorJSON(recoverDescription)) + `,"parameters":` + recoverSchema + `}`

// responsesReply reads Responses answers for the recover flow, so that a
// Responses host that only changed its base URL can follow the
// references a compaction left, as on the Messages and chat routes.
type responsesReply struct{}

// offer adds the tool at the end of tools (withTool). Built-in tools
// (web_search, file_search…) have no name and are the host's to keep. A
// request that keeps its conversation at the provider (previous_response_id,
// conversation) is not offered the tool: a follow-up that repeats its
// input would repeat what the provider has stored.
func (responsesReply) offer(body []byte) ([]byte, bool) {
	var v struct {
		PreviousResponseID string          `json:"previous_response_id"`
		Conversation       json.RawMessage `json:"conversation"`
	}
	if json.Unmarshal(body, &v) != nil || v.PreviousResponseID != "" ||
		(len(v.Conversation) > 0 && string(v.Conversation) != "null") {
		return body, false
	}
	return withTool(body, recoverFunction, func(tool json.RawMessage) (string, error) {
		var t struct {
			Name string `json:"name"`
		}
		err := json.Unmarshal(tool, &t)
		return t.Name, err
	})
}

// outputItem is the part of an output item the flow reads.
type outputItem struct {
	Type             string  `json:"type"`
	Name             string  `json:"name"`
	CallID           string  `json:"call_id"`
	Arguments        string  `json:"arguments"`
	EncryptedContent *string `json:"encrypted_content"`
}

// recovers says whether the item is a call of the recover tool.
func (it outputItem) recovers() bool { return it.Type == "function_call" && it.Name == RecoverTool }

// providerCalls are the output items of the provider's own built-in
// tools: the provider ran them, and the host has nothing to answer.
var providerCalls = map[string]bool{
	"web_search_call":       true,
	"file_search_call":      true,
	"code_interpreter_call": true,
	"image_generation_call": true,
	"mcp_call":              true,
}

// hostCall says whether an output item of type typ is one the host must
// answer: a function or custom tool call, a local shell, computer or
// patch call, an MCP approval request. A call type the proxy does not
// know is taken as the host's: leaving a recover call out is safe, a
// follow-up that leaves the host's call unanswered is not.
func hostCall(typ string) bool {
	switch typ {
	case "function_call", "custom_tool_call", "mcp_approval_request":
		return true
	}
	return strings.HasSuffix(typ, "_call") && !providerCalls[typ]
}

// responsesOutput is a whole answer's output items.
func responsesOutput(resp []byte) ([]json.RawMessage, error) {
	var v struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, fmt.Errorf("read the response's output: %w", err)
	}
	return v.Output, nil
}

// calls reads the output's recover function_call items (the call_id
// their answer names, the arguments string as the input) and counts the
// calls the host must answer.
func (responsesReply) calls(resp []byte) ([]recoverCall, int, error) {
	out, err := responsesOutput(resp)
	if err != nil {
		return nil, 0, err
	}
	var calls []recoverCall
	host := 0
	for i, raw := range out {
		var it outputItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, 0, fmt.Errorf("output item %d: %w", i, err)
		}
		switch {
		case it.recovers():
			calls = append(calls, recoverCall{id: it.CallID, input: json.RawMessage(it.Arguments)})
		case hostCall(it.Type):
			host++
		}
	}
	return calls, host, nil
}

// message is the answer's output items, every one as the model produced
// it: the reasoning items go back with their encrypted content, the
// calls with their call ids.
func (responsesReply) message(resp []byte) ([]json.RawMessage, error) {
	return responsesOutput(resp)
}

// strip is the answer without its recover calls, nor the offered tool
// the provider echoes in the response's tools.
func (r responsesReply) strip(resp []byte) ([]byte, error) {
	out, err := responsesOutput(resp)
	if err != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(out))
	for _, raw := range out {
		var it outputItem
		if json.Unmarshal(raw, &it) == nil && it.recovers() {
			continue
		}
		kept = append(kept, raw)
	}
	set := map[string]json.RawMessage{"output": array(kept)}
	if tools := unoffered(resp); tools != nil {
		set["tools"] = tools
	}
	return setFields(resp, set)
}

// withoutOffer is the answer without the offered tool the provider
// echoes in the response's tools.
func (responsesReply) withoutOffer(resp []byte) []byte {
	if out := unofferedResponse(resp); out != nil {
		return out
	}
	return resp
}

// unoffered is a response object's tools without the recover tool, or
// nil when it lists none of that name. The tool was offered only to a
// request that had none of that name, so a tool of that name in the
// answer is the proxy's.
func unoffered(response []byte) json.RawMessage {
	var v struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(response, &v) != nil {
		return nil
	}
	kept := make([]json.RawMessage, 0, len(v.Tools))
	for _, t := range v.Tools {
		var tool struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &tool) == nil && tool.Name == RecoverTool {
			continue
		}
		kept = append(kept, t)
	}
	if len(kept) == len(v.Tools) {
		return nil
	}
	return array(kept)
}

// answers are one function_call_output item per call. The Responses API
// has no error flag: an error answer says so in its text, which starts
// with the tool's name and what is wrong.
func (responsesReply) answers(as []recoverAnswer) []json.RawMessage {
	out := make([]json.RawMessage, len(as))
	for i, a := range as {
		out[i] = errorJSON(map[string]any{"type": "function_call_output", "call_id": a.callID, "output": a.text})
	}
	return out
}

// extend appends items to the request's input (a text input becomes the
// user message it stands for). A request that is not stored (store:
// false) cannot name an item by id alone: a reasoning item without its
// encrypted content (the host did not ask for it) is left out, as the
// provider could not find it.
func (responsesReply) extend(body []byte, items []json.RawMessage) ([]byte, error) {
	var v struct {
		Input json.RawMessage `json:"input"`
		Store *bool           `json:"store"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("read the request's input: %w", err)
	}
	var input []json.RawMessage
	if err := json.Unmarshal(v.Input, &input); err != nil {
		var text string
		if json.Unmarshal(v.Input, &text) != nil {
			return nil, errors.New("read the request's input: it is neither a list of items nor a text")
		}
		input = []json.RawMessage{errorJSON(map[string]any{"type": "message", "role": "user", "content": text})}
	}
	stateless := v.Store != nil && !*v.Store
	for _, raw := range items {
		var it outputItem
		if stateless && json.Unmarshal(raw, &it) == nil && it.Type == "reasoning" && it.EncryptedContent == nil {
			continue
		}
		input = append(input, raw)
	}
	return setFields(body, map[string]json.RawMessage{"input": array(input)})
}

func (responsesReply) stream() streamReply {
	return &responsesStream{items: map[int]*streamItem{}, recover: map[int]bool{}}
}

// responsesStream reads a Responses stream across the rounds of one
// request, so that the host reads one response: every event goes to the
// host as it arrives but for the events of recover calls, which are
// dropped, and the terminal event (response.completed, .incomplete or
// .failed), which is held until the round's end says whether a
// follow-up comes. A follow-up's response.created and .in_progress are
// dropped (the host has them), its items are numbered on from the items
// the host has (output_index), every event's sequence_number follows on
// from the last one the host got, and the final terminal event's
// response lists every item the host got, across the rounds.
//
// Items after a recover call are passed on too, not held: the host and
// the model then have the same items, and the numbering of a later item
// is known once the recover calls before it have begun.
type responsesStream struct {
	round int
	// seq is the sequence_number of the host's next event, once the
	// first event has said where the stream starts (seqKnown).
	seq      int
	seqKnown bool
	// given are the items the host got in the rounds before this one,
	// as they ended: this round's item 0 is the host's len(given).
	given []json.RawMessage

	// This round's items, by output_index, and the recover calls and
	// host calls among them.
	items   map[int]*streamItem
	recover map[int]bool
	host    int
	// terminal is the round's held terminal event, and output its
	// response's output items; done is a [DONE] line after it, which
	// some compatible providers send.
	terminal *sseEvent
	output   []json.RawMessage
	done     *sseEvent
	// failed says the provider ended the answer with an error (an error
	// event, response.failed): no follow-up comes after it. cut says
	// the stream ended without a terminal event (calls saw it), which
	// release tells the host.
	failed bool
	cut    bool
}

// streamItem is one output item as a stream announces and ends it.
type streamItem struct {
	added, done json.RawMessage
	args        strings.Builder // a recover call's arguments, as they came
}

// responsesEvent is the part of a Responses stream event the flow reads.
type responsesEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int            `json:"sequence_number"`
	OutputIndex    *int            `json:"output_index"`
	Item           json.RawMessage `json:"item"`
	Delta          json.RawMessage `json:"delta"`
	Response       json.RawMessage `json:"response"`
}

func (s *responsesStream) event(ev sseEvent) []byte {
	data := bytes.TrimSpace(ev.data)
	if string(data) == "[DONE]" {
		s.done = &ev
		return nil
	}
	var v responsesEvent
	if len(data) == 0 || json.Unmarshal(data, &v) != nil {
		// A keep-alive comment, or what does not read: as it came.
		return ev.raw
	}
	if !s.seqKnown && v.SequenceNumber != nil {
		s.seq, s.seqKnown = *v.SequenceNumber, true
	}
	switch v.Type {
	case "response.created", "response.in_progress", "response.queued":
		if s.round > 0 {
			return nil // the host has the response's start
		}
		return s.emit(ev, v, nil, unofferedResponse(v.Response))
	case "response.completed", "response.incomplete", "response.failed":
		s.terminal = &ev
		s.failed = v.Type == "response.failed"
		if out, err := responsesOutput(v.Response); err == nil {
			s.output = out
		}
		return nil
	case "error":
		s.failed = true
		return s.emit(ev, v, nil, nil)
	}
	if v.OutputIndex == nil {
		return s.emit(ev, v, nil, nil)
	}
	i := *v.OutputIndex
	it := s.items[i]
	if it == nil {
		it = &streamItem{}
		s.items[i] = it
	}
	if len(v.Item) > 0 && it.added == nil && it.done == nil {
		// The first event that shows the item (its output_item.added)
		// says what it is.
		var item outputItem
		if json.Unmarshal(v.Item, &item) == nil {
			switch {
			case item.recovers():
				s.recover[i] = true
			case hostCall(item.Type):
				s.host++
			}
		}
	}
	switch v.Type {
	case "response.output_item.added":
		it.added = v.Item
	case "response.output_item.done":
		it.done = v.Item
	case "response.function_call_arguments.delta":
		var d string
		if s.recover[i] && json.Unmarshal(v.Delta, &d) == nil {
			it.args.WriteString(d)
		}
	}
	if s.recover[i] {
		return nil
	}
	n := len(s.given) + i - below(s.recover, i)
	return s.emit(ev, v, &n, nil)
}

// emit is ev as the host gets it: its sequence_number the host's next,
// its output_index index (nil: as it is), its response response (nil:
// as it is); the bytes as they came when nothing changes.
func (s *responsesStream) emit(ev sseEvent, v responsesEvent, index *int, response json.RawMessage) []byte {
	set := map[string]json.RawMessage{}
	if v.SequenceNumber != nil {
		if *v.SequenceNumber != s.seq {
			set["sequence_number"] = json.RawMessage(fmt.Sprint(s.seq))
		}
		s.seq++
	}
	if index != nil && v.OutputIndex != nil && *index != *v.OutputIndex {
		set["output_index"] = json.RawMessage(fmt.Sprint(*index))
	}
	if response != nil {
		set["response"] = response
	}
	return withEventFields(ev, set)
}

// unofferedResponse is a response object without the offered tool in
// its tools, or nil when it lists none.
func unofferedResponse(response json.RawMessage) json.RawMessage {
	tools := unoffered(response)
	if tools == nil {
		return nil
	}
	out, err := setFields(response, map[string]json.RawMessage{"tools": tools})
	if err != nil {
		return nil
	}
	return out
}

// indexes are this round's output indexes, in order.
func (s *responsesStream) indexes() []int {
	out := make([]int, 0, len(s.items)+len(s.output))
	for i := range s.items {
		out = append(out, i)
	}
	for i := range s.output {
		if s.items[i] == nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// item is this round's item i as it ended: from the terminal event's
// response, else its output_item.done, else as it was announced.
func (s *responsesStream) item(i int) json.RawMessage {
	if i < len(s.output) {
		return s.output[i]
	}
	if it := s.items[i]; it != nil {
		if it.done != nil {
			return it.done
		}
		return it.added
	}
	return nil
}

// calls are the round's recover calls, once the round ended with the
// provider's answer (completed, or incomplete: the calls in it are
// whole items). After an error, or a stream that ended without its
// terminal event, there are none to answer.
func (s *responsesStream) calls() ([]recoverCall, int) {
	if s.terminal == nil && !s.failed {
		s.cut = true
	}
	if s.terminal == nil || s.failed {
		return nil, s.host
	}
	var calls []recoverCall
	for _, i := range s.indexes() {
		if !s.recover[i] {
			continue
		}
		var it outputItem
		_ = json.Unmarshal(s.item(i), &it)
		args := it.Arguments
		if args == "" && s.items[i] != nil {
			args = s.items[i].args.String()
		}
		calls = append(calls, recoverCall{id: it.CallID, input: json.RawMessage(args)})
	}
	return calls, s.host
}

// message is the round's output items, recover calls included, as the
// model produced them.
func (s *responsesStream) message() ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, i := range s.indexes() {
		it := s.item(i)
		if it == nil {
			return nil, fmt.Errorf("output item %d did not read", i)
		}
		out = append(out, it)
	}
	return out, nil
}

// kept are the round's items the host got: all but the recover calls.
func (s *responsesStream) kept() []json.RawMessage {
	var out []json.RawMessage
	for _, i := range s.indexes() {
		if it := s.item(i); it != nil && !s.recover[i] {
			out = append(out, it)
		}
	}
	return out
}

// release is the held terminal event, as the host's end: its response
// lists the items the host got across the rounds, the recover calls
// left out. A stream that ended without one ends with the provider's
// error instead, not as if it were whole.
func (s *responsesStream) release() []byte {
	var out bytes.Buffer
	switch {
	case s.terminal != nil:
		out.Write(s.ended())
	case s.cut:
		out.WriteString(responsesProtocol{}.streamError([]byte("the upstream's stream ended before its response did")))
	}
	if s.done != nil {
		out.Write(s.done.raw)
	}
	return out.Bytes()
}

// ended is the terminal event as the host gets it. Its sequence_number
// is the host's next, but not taken: a terminal released before a
// follow-up is sent only if the follow-up fails. Its response is the
// last round's, whose id is the provider's response that holds the
// whole exchange.
func (s *responsesStream) ended() []byte {
	ev := *s.terminal
	var v responsesEvent
	if json.Unmarshal(ev.data, &v) != nil {
		return ev.raw
	}
	set := map[string]json.RawMessage{}
	if v.SequenceNumber != nil && *v.SequenceNumber != s.seq {
		set["sequence_number"] = json.RawMessage(fmt.Sprint(s.seq))
	}
	response := v.Response
	if s.round > 0 || len(s.recover) > 0 {
		var err error
		if response, err = setFields(response, map[string]json.RawMessage{"output": array(append(slices.Clone(s.given), s.kept()...))}); err != nil {
			return ev.raw
		}
		set["response"] = response
	}
	if r := unofferedResponse(response); r != nil {
		set["response"] = r
	}
	return withEventFields(ev, set)
}

// next starts the follow-up's round: the items the host got are given.
func (s *responsesStream) next() {
	s.given = append(s.given, s.kept()...)
	s.round++
	s.items, s.recover, s.host = map[int]*streamItem{}, map[int]bool{}, 0
	s.terminal, s.output, s.done, s.failed, s.cut = nil, nil, nil, false, false
}

// withEventFields is ev with its data's fields set replaced (ev as it
// came when there is none, or its data does not read).
func withEventFields(ev sseEvent, set map[string]json.RawMessage) []byte {
	if len(set) == 0 {
		return ev.raw
	}
	data, err := setFields(ev.data, set)
	if err != nil {
		return ev.raw
	}
	return rawEvent(ev.name, data)
}
