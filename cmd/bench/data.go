package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The shared conversations the bench is built from (see the data README).
var (
	deepseekFiles = []string{
		"django__django-11564.json", "django__django-11742.json", "django__django-11797.json",
		"django__django-11910.json", "django__django-12125.json", "django__django-12284.json",
		"django__django-12308.json", "django__django-13265.json", "django__django-13964.json",
		"django__django-15213.json", "django__django-15388.json", "django__django-15738.json",
	}
	hugeFile = "swe-agent-gemini/psf__requests-1142.json"
)

// chatDoc is an OpenAI chat conversation with messages last, so that a
// message can be appended to its rendering without parsing it again.
type chatDoc struct {
	Model    string            `json:"model"`
	Messages []json.RawMessage `json:"messages"`
}

type chatMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

func readChat(dir, rel string) (chatDoc, error) {
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return chatDoc{}, fmt.Errorf("read shared data: %w", err)
	}
	var doc chatDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return chatDoc{}, fmt.Errorf("parse %s: %w", rel, err)
	}
	if len(doc.Messages) < 3 {
		return chatDoc{}, fmt.Errorf("%s: only %d messages", rel, len(doc.Messages))
	}
	return doc, nil
}

func renderChat(doc chatDoc) ([]byte, error) {
	if doc.Model == "" {
		doc.Model = "gpt-4o"
	}
	return json.Marshal(doc)
}

// chatFile reads one shared OpenAI conversation as it is.
func chatFile(dir, rel string) ([]byte, error) {
	doc, err := readChat(dir, rel)
	if err != nil {
		return nil, err
	}
	return renderChat(doc)
}

// sizedChat builds a real conversation of about target bytes: the system
// prompt of the first SWE-bench run, then the runs one after another
// (each from its task description on), repeated with fresh tool call ids
// when they run out. Each run is cut after its last complete turn, and the
// whole stops only where no tool call waits for its result.
func sizedChat(dir string, target int) ([]byte, error) {
	var out chatDoc
	size := 0
	for round := 0; ; round++ {
		for i, f := range deepseekFiles {
			doc, err := readChat(dir, filepath.Join("swe-agent-deepseek", f))
			if err != nil {
				return nil, err
			}
			msgs := doc.Messages[1:]
			if len(out.Messages) == 0 {
				out.Model = doc.Model
				msgs = doc.Messages
			}
			pending := map[string]bool{}
			for _, raw := range completeTurns(msgs) {
				if round > 0 {
					if raw, err = renameToolIDs(raw, fmt.Sprintf("r%d_%d_", round, i)); err != nil {
						return nil, err
					}
				}
				out.Messages = append(out.Messages, raw)
				size += len(raw)
				track(raw, pending)
				if size >= target && len(pending) == 0 {
					return renderChat(out)
				}
			}
		}
	}
}

// completeTurns is msgs up to the last point where every tool call has
// its result (the runs end with an unanswered call: their exit message was
// removed from the data).
func completeTurns(msgs []json.RawMessage) []json.RawMessage {
	pending := map[string]bool{}
	clean := 0
	for i, raw := range msgs {
		track(raw, pending)
		if len(pending) == 0 {
			clean = i + 1
		}
	}
	return msgs[:clean]
}

// track adds a message's tool calls to pending and removes the one its
// result answers.
func track(raw json.RawMessage, pending map[string]bool) {
	var m chatMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	for _, c := range m.ToolCalls {
		pending[c.ID] = true
	}
	if m.Role == "tool" {
		delete(pending, m.ToolCallID)
	}
}

// renameToolIDs prefixes the tool call ids of a message, so that a run
// repeated in one conversation does not reuse them.
func renameToolIDs(raw json.RawMessage, prefix string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parse message: %w", err)
	}
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
	return json.Marshal(m)
}

// tauChat is a tau-bench customer-service conversation near the median
// size (13K characters): a small real conversation.
func tauChat(dir string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, "tau-bench", "gpt-4o-airline.json"))
	if err != nil {
		return nil, fmt.Errorf("read shared data: %w", err)
	}
	var runs []struct {
		Traj []json.RawMessage `json:"traj"`
	}
	if err := json.Unmarshal(data, &runs); err != nil {
		return nil, fmt.Errorf("parse tau-bench: %w", err)
	}
	type cand struct {
		size int
		doc  chatDoc
	}
	var cands []cand
	for _, r := range runs {
		doc := chatDoc{Model: "gpt-4o", Messages: r.Traj}
		b, err := renderChat(doc)
		if err != nil {
			return nil, err
		}
		cands = append(cands, cand{len(b), doc})
	}
	if len(cands) == 0 {
		return nil, errors.New("tau-bench: no conversations")
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].size < cands[j].size })
	return renderChat(cands[len(cands)/2].doc)
}

// withTail appends a user message to a rendered chatDoc, so that every
// run of a session has an input of its own.
func withTail(conv []byte, text string) ([]byte, error) {
	if !bytes.HasSuffix(conv, []byte("]}")) {
		return nil, errors.New("conversation does not end with its messages")
	}
	msg, err := json.Marshal(map[string]string{"role": "user", "content": text})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(conv)+len(msg)+1)
	out = append(out, conv[:len(conv)-2]...)
	out = append(out, ',')
	out = append(out, msg...)
	return append(out, "]}"...), nil
}

// hugeText is the 868,167-character final tool output of the
// psf__requests-1142 run, the largest single text in the data.
func hugeText(dir string) (string, error) {
	doc, err := readChat(dir, hugeFile)
	if err != nil {
		return "", err
	}
	var m chatMessage
	if err := json.Unmarshal(doc.Messages[len(doc.Messages)-1], &m); err != nil {
		return "", fmt.Errorf("parse last message of %s: %w", hugeFile, err)
	}
	s, _ := m.Content.(string)
	if len(s) < 800000 {
		return "", fmt.Errorf("%s: last message has %d characters, want the 868K output", hugeFile, len(s))
	}
	return s, nil
}

// withHugeResult inserts after message at a bash call whose result is
// text: a real conversation with one huge tool result in its middle.
func withHugeResult(conv []byte, at int, text string) ([]byte, error) {
	var doc chatDoc
	if err := json.Unmarshal(conv, &doc); err != nil {
		return nil, fmt.Errorf("parse conversation: %w", err)
	}
	if at < 0 || at >= len(doc.Messages) {
		return nil, fmt.Errorf("insert after message %d of %d", at, len(doc.Messages))
	}
	call, err := json.Marshal(map[string]any{"role": "assistant", "content": "Let me look at the whole output.", "tool_calls": []any{
		map[string]any{"id": "call_huge", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"cat build.log"}`}},
	}})
	if err != nil {
		return nil, err
	}
	result, err := json.Marshal(map[string]any{"role": "tool", "tool_call_id": "call_huge", "content": text})
	if err != nil {
		return nil, err
	}
	msgs := append([]json.RawMessage{}, doc.Messages[:at+1]...)
	msgs = append(msgs, call, result)
	doc.Messages = append(msgs, doc.Messages[at+1:]...)
	return renderChat(doc)
}

// reactFromChat turns an OpenAI conversation into the ReAct two-layer design's ReAct
// trajectory: one turn per tool call, the assistant's text as the thought.
func reactFromChat(conv []byte, query string) ([]byte, error) {
	var doc chatDoc
	if err := json.Unmarshal(conv, &doc); err != nil {
		return nil, fmt.Errorf("parse conversation: %w", err)
	}
	type turn struct {
		Thought string         `json:"thought"`
		Action  map[string]any `json:"action"`
		Result  string         `json:"result"`
	}
	var turns []turn
	pending := map[string]int{}
	for i, raw := range doc.Messages {
		var m chatMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		switch m.Role {
		case "assistant":
			thought, _ := m.Content.(string)
			for _, c := range m.ToolCalls {
				pending[c.ID] = len(turns)
				turns = append(turns, turn{Thought: thought, Action: map[string]any{"tool": c.Function.Name, "arguments": c.Function.Arguments}})
			}
		case "tool":
			if j, ok := pending[m.ToolCallID]; ok {
				turns[j].Result, _ = m.Content.(string)
			}
		}
	}
	return json.Marshal(map[string]any{
		"metadata":        map[string]any{"query": query, "agent": "react"},
		"reasoning_trace": []any{},
		"execution":       map[string]any{"final_response": "done", "tool_calls": turns},
	})
}

// humanBytes prints a size as 100 KB, 1.0 MB.
func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// shortName is a data file's name without folder and extension.
func shortName(rel string) string {
	return strings.TrimSuffix(filepath.Base(rel), ".json")
}

// startsTurn reports whether a message can follow a complete turn: it is
// not a tool result.
func startsTurn(raw json.RawMessage) bool {
	var m struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Role != "tool"
}
