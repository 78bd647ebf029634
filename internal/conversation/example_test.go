package conversation_test

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// ParseAny detects the wire format and gives the canonical model every
// strategy works on: roles and typed blocks, with tool calls and their
// results paired by id.
func ExampleParseAny() {
	data := []byte(`{"system": "You are a coding agent.", "messages": [
		{"role": "user", "content": "Run the tests."},
		{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "go test ./..."}}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok  \tpkg\t0.2s"}]}]}`)
	conv, err := conversation.ParseAny(data)
	if err != nil {
		panic(err)
	}
	fmt.Println(conv.Format)
	for i, m := range conv.Messages {
		for _, b := range m.Blocks {
			if b.ToolID != "" {
				fmt.Println(i, m.Role, b.Kind, b.ToolID)
			} else {
				fmt.Println(i, m.Role, b.Kind)
			}
		}
	}
	fmt.Println("pairing:", conversation.CheckPairing(conv))
	// Output:
	// anthropic
	// 0 system text
	// 1 user text
	// 2 assistant tool_use toolu_1
	// 3 user tool_result toolu_1
	// pairing: <nil>
}

// Render writes a conversation back in its own format, with the fields
// the model does not name (here the model and the message's name) kept.
func ExampleRender() {
	data := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi","name":"ana"}]}`)
	conv, err := conversation.ParseAny(data)
	if err != nil {
		panic(err)
	}
	conv.Messages[0].Blocks[0].Text = "Hello"
	out, err := conversation.Render(conv)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"messages":[{"role":"user","content":"Hello","name":"ana"}],"model":"gpt-4o"}
}

// CheckPairing finds what no strategy may leave behind: a tool result
// whose call is gone.
func ExampleCheckPairing() {
	conv, err := conversation.ParseAny([]byte(`[
		{"role": "user", "content": "Run the tests."},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "ok"}]`))
	if err != nil {
		panic(err)
	}
	conv.Messages = append(conv.Messages[:1], conv.Messages[2:]...) // drop the call, keep its result
	fmt.Println(conversation.CheckPairing(conv))
	// Output:
	// message 1: block 0: tool "call_1": tool result has no earlier tool use awaiting it
}
