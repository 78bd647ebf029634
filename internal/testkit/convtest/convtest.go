// Package convtest builds test conversations from real ones: it appends
// a new assistant turn whose tool results are given, at the JSON level of
// each wire format, so that a test sees exactly what an agent platform
// would send when a fresh result overflows the context. Read and Load give
// the real ones of testdata/conversations to the tests of every package.
package convtest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// AppendResults returns data (a conversation in any supported format) with
// one more assistant turn calling a tool once per text, answered by those
// texts as tool results: parallel calls of one turn for OpenAI and
// Anthropic, one turn per text for a ReAct trajectory (which has no
// parallel calls). Call ids are "call_big_<i>" (OpenAI), "toolu_big_<i>"
// (Anthropic).
func AppendResults(data []byte, texts ...string) ([]byte, error) {
	format, err := conversation.Detect(data)
	if err != nil {
		return nil, fmt.Errorf("append results: %w", err)
	}
	switch format {
	case conversation.FormatOpenAI:
		calls := make([]any, len(texts))
		msgs := []any{map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}}
		for i, t := range texts {
			id := fmt.Sprintf("call_big_%d", i)
			calls[i] = map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"git log -p # %d"}`, i)}}
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": t})
		}
		return appendMessages(data, "messages", append(answerPending(data, format), msgs...))
	case conversation.FormatAnthropic:
		uses := make([]any, len(texts))
		results := make([]any, len(texts))
		for i, t := range texts {
			id := fmt.Sprintf("toolu_big_%d", i)
			uses[i] = map[string]any{"type": "tool_use", "id": id, "name": "bash", "input": map[string]any{"command": fmt.Sprintf("git log -p # %d", i)}}
			results[i] = map[string]any{"type": "tool_result", "tool_use_id": id, "content": t}
		}
		msgs := append(answerPending(data, format),
			map[string]any{"role": "assistant", "content": uses},
			map[string]any{"role": "user", "content": results})
		return appendMessages(data, "messages", msgs)
	case conversation.FormatReAct:
		var turns []any
		for i, t := range texts {
			turns = append(turns, map[string]any{"thought": fmt.Sprintf("Read the whole log (%d).", i),
				"action": map[string]any{"tool": "shell", "command": "git log -p"}, "result": t})
		}
		if strings.HasPrefix(strings.TrimSpace(string(data)), "[") {
			return appendArray(data, turns)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			return nil, fmt.Errorf("append results: %w", err)
		}
		exec, err := appendMessages(top["execution"], "tool_calls", turns)
		if err != nil {
			return nil, err
		}
		top["execution"] = exec
		return json.Marshal(top)
	}
	return nil, fmt.Errorf("append results: format %s not supported", format)
}

// answerPending answers the calls of a conversation that ends waiting for
// them (its last message is an assistant's tool calls) with short results,
// so that the new turn follows a complete one.
func answerPending(data []byte, format conversation.Format) []any {
	c, err := conversation.ParseAny(data)
	if err != nil || len(c.Messages) == 0 {
		return nil
	}
	last := c.Messages[len(c.Messages)-1]
	if last.Role != conversation.RoleAssistant {
		return nil
	}
	var out []any
	var results []any
	for _, b := range last.Blocks {
		if b.Kind != conversation.KindToolUse {
			continue
		}
		switch format {
		case conversation.FormatOpenAI:
			out = append(out, map[string]any{"role": "tool", "tool_call_id": b.ToolID, "content": "done"})
		case conversation.FormatAnthropic:
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b.ToolID, "content": "done"})
		}
	}
	if len(results) > 0 {
		out = append(out, map[string]any{"role": "user", "content": results})
	}
	return out
}

// appendMessages appends items to the array at field of a JSON object, or
// to a JSON array itself.
func appendMessages(data []byte, field string, items []any) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(string(data)), "[") {
		return appendArray(data, items)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("append results: %w", err)
	}
	arr, err := appendArray(top[field], items)
	if err != nil {
		return nil, fmt.Errorf("append results: %s: %w", field, err)
	}
	top[field] = arr
	return json.Marshal(top)
}

func appendArray(data []byte, items []any) ([]byte, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal(data, &arr); err != nil {
		return nil, err
	}
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		arr = append(arr, raw)
	}
	return json.Marshal(arr)
}

// SingleLine is a single-line text of n bytes that tokenizes like a
// minified JSON payload (a real agent's worst case: no line breaks).
func SingleLine(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, `{"id":%d,"sha":"%08x","path":"src/pkg/file_%d.go","ok":true},`, i, i*2654435761, i%97)
	}
	return sb.String()[:n]
}

// MultiLine is a text of about n bytes in lines, like a `git log -p`.
func MultiLine(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "commit %040x\nAuthor: dev%d <dev%d@example.com>\n+\tfunc handler%d(w http.ResponseWriter) { w.WriteHeader(%d) }\n", i*7919, i%13, i%13, i, 200+i%300)
	}
	return sb.String()
}
