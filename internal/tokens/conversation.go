package tokens

import (
	"encoding/json"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Chat framing costs, from OpenAI's "How to count tokens with tiktoken"
// (cookbook), which the API's prompt_tokens matched for gpt-3.5-turbo,
// gpt-4, gpt-4o and gpt-4o-mini: every message is wrapped as
// <|start|>{role}\n{content}<|end|>\n, a name adds one token, and the reply
// is primed with <|start|>assistant<|message|>.
const (
	// MessageOverheadTokens is added once per message, besides its role.
	MessageOverheadTokens = 3
	// NameTokens is added when a message carries a "name" field.
	NameTokens = 1
	// ReplyPrimingTokens is added once per conversation.
	ReplyPrimingTokens = 3
)

// Message returns the size of one message as c counts it.
//
// It adds up the text of every block: text and thinking blocks, the text of
// tool results, and the tool name plus the JSON arguments of tool calls.
// Images and blocks of unknown kinds add nothing (their cost is not text).
// With a token encoding it also adds the chat framing OpenAI documents:
// MessageOverheadTokens, the role, and the "name" field (plus NameTokens)
// when the message has one.
//
// This is an estimate, not the provider's bill: tool calls and tool ids are
// framed in a way OpenAI does not document, tool definitions in the request
// are not part of a conversation, and models other than OpenAI's tokenize
// differently (see EncodingForModel). With the "chars" counter nothing is
// added: the ReAct two-layer design sizes the text alone, as Python's len() does.
func Message(c Counter, m conversation.Message) int {
	n := 0
	for _, b := range m.Blocks {
		switch b.Kind {
		case conversation.KindText, conversation.KindThinking, conversation.KindToolResult:
			n += c.Count(b.Text)
		case conversation.KindToolUse:
			n += c.Count(b.ToolName) + c.Count(b.Input)
		}
	}
	if c.Name() == Chars {
		return n
	}
	n += MessageOverheadTokens + c.Count(string(m.Role))
	if name, ok := messageName(m); ok {
		n += c.Count(name) + NameTokens
	}
	return n
}

// messageName returns the OpenAI "name" field of a message, which the
// canonical model keeps in Extra.
func messageName(m conversation.Message) (string, bool) {
	raw, ok := m.Extra["name"]
	if !ok {
		return "", false
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil || name == "" {
		return "", false
	}
	return name, true
}

// PerMessage returns Message for every message of conv, in order.
func PerMessage(c Counter, conv conversation.Conversation) []int {
	out := make([]int, len(conv.Messages))
	for i, m := range conv.Messages {
		out[i] = Message(c, m)
	}
	return out
}

// Conversation returns the size of a whole conversation: the sum of
// PerMessage plus, with a token encoding, ReplyPrimingTokens, so that it
// estimates the prompt_tokens of a request that sends conv. With the
// "chars" counter, or no messages, it is exactly the sum of PerMessage.
func Conversation(c Counter, conv conversation.Conversation) int {
	if len(conv.Messages) == 0 {
		return 0
	}
	n := 0
	for _, m := range conv.Messages {
		n += Message(c, m)
	}
	if c.Name() != Chars {
		n += ReplyPrimingTokens
	}
	return n
}
