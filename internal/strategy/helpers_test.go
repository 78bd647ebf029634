package strategy

import (
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Builders for canonical messages in tests.

func sysMsg(text string) conversation.Message {
	return conversation.Message{Role: conversation.RoleSystem, Blocks: []conversation.Block{textBlock(text)}}
}

func userMsg(text string) conversation.Message {
	return conversation.Message{Role: conversation.RoleUser, Blocks: []conversation.Block{textBlock(text)}}
}

func asstMsg(text string, uses ...conversation.Block) conversation.Message {
	m := conversation.Message{Role: conversation.RoleAssistant}
	if text != "" {
		m.Blocks = append(m.Blocks, textBlock(text))
	}
	m.Blocks = append(m.Blocks, uses...)
	return m
}

// toolMsg is an OpenAI role "tool" message answering one call.
func toolMsg(id, text string) conversation.Message {
	return conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{result(id, text)}}
}

// userResults is an Anthropic user message of tool_result blocks.
func userResults(blocks ...conversation.Block) conversation.Message {
	return conversation.Message{Role: conversation.RoleUser, Blocks: blocks}
}

func textBlock(text string) conversation.Block {
	return conversation.Block{Kind: conversation.KindText, Text: text}
}

func use(id, name, input string) conversation.Block {
	return conversation.Block{Kind: conversation.KindToolUse, ToolID: id, ToolName: name, Input: input}
}

func result(id, text string) conversation.Block {
	return conversation.Block{Kind: conversation.KindToolResult, ToolID: id, Text: text}
}

func errResult(id, text string) conversation.Block {
	b := result(id, text)
	b.IsError = true
	return b
}

func conv(f conversation.Format, msgs ...conversation.Message) conversation.Conversation {
	return conversation.Conversation{Format: f, Messages: msgs}
}

// charCounter counts characters; tests use it where the unit does not
// matter, so that they do not depend on an encoding's vocabulary.
type charCounter struct{}

func (charCounter) Count(s string) int { return utf8.RuneCountInString(s) }
func (charCounter) Name() string       { return "chars" }

// convSize is the size of everything a model would read: texts, tool
// inputs and names.
func convSize(c conversation.Conversation) int {
	n := 0
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			n += utf8.RuneCountInString(b.Text) + utf8.RuneCountInString(b.Input) + utf8.RuneCountInString(b.ToolName)
		}
	}
	return n
}

// checkPairing is the invariant every output must keep (the conversation
// package owns the rule: each result answers an earlier call, each call has
// its result unless it is pending in the last message).
func checkPairing(c conversation.Conversation) error {
	return conversation.CheckPairing(c)
}

// checkProtectedKept asserts that the protected messages of in appear in
// out verbatim and in order.
func checkProtectedKept(in, out conversation.Conversation, protected []bool) error {
	j := 0
	for i, m := range in.Messages {
		if !protected[i] {
			continue
		}
		for j < len(out.Messages) && !reflect.DeepEqual(out.Messages[j], m) {
			j++
		}
		if j == len(out.Messages) {
			return fmt.Errorf("protected message %d (%s) missing or changed", i, m.Role)
		}
		j++
	}
	return nil
}

// checkProtectedSameIndex asserts that protected messages are unchanged
// at the same index (strategies that never drop messages).
func checkProtectedSameIndex(in, out conversation.Conversation, protected []bool) error {
	if len(in.Messages) != len(out.Messages) {
		return fmt.Errorf("message count changed: %d → %d", len(in.Messages), len(out.Messages))
	}
	for i := range in.Messages {
		if protected[i] && !reflect.DeepEqual(in.Messages[i], out.Messages[i]) {
			return fmt.Errorf("protected message %d changed", i)
		}
	}
	return nil
}
