package strategy

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// toolIndex pairs the tool calls of a conversation with their results,
// using the conversation package's positional rule (ids may be reused once
// a call has its result, as tau-bench's OpenAI ids are), so that strategies
// keep or drop both halves together.
type toolIndex struct {
	c conversation.Conversation
	x conversation.ToolIndex
}

func indexTools(c conversation.Conversation) toolIndex {
	return toolIndex{c: c, x: c.ToolIndex()}
}

// other returns the position of the other half of the tool block at p.
func (idx toolIndex) other(p conversation.Pos) (conversation.Pos, bool) {
	pair, ok := idx.x.Pair(p)
	if !ok {
		return conversation.NoPos, false
	}
	o := pair.Result
	if p == pair.Result {
		o = pair.Use
	}
	return o, o.Valid()
}

// partners returns the messages holding the other halves of the tool
// blocks of message i.
func (idx toolIndex) partners(i int) []int {
	var out []int
	for j, b := range idx.c.Messages[i].Blocks {
		if b.Kind != conversation.KindToolUse && b.Kind != conversation.KindToolResult {
			continue
		}
		if o, ok := idx.other(conversation.Pos{Msg: i, Block: j}); ok {
			out = append(out, o.Msg)
		}
	}
	return out
}

// toolName gives the name of the tool the result at p answers: OpenAI
// tool messages usually do not carry it, so it comes from the call.
func (idx toolIndex) toolName(p conversation.Pos) string {
	b := idx.c.Messages[p.Msg].Blocks[p.Block]
	if b.ToolName != "" {
		return b.ToolName
	}
	if o, ok := idx.other(p); ok {
		return idx.c.Messages[o.Msg].Blocks[o.Block].ToolName
	}
	return ""
}

// isProtected reads a protection mask. A nil mask protects nothing; any
// other mask that is too short protects the messages it does not cover, so
// that a stale mask can only make a strategy do less, never more.
func isProtected(mask []bool, i int) bool {
	if mask == nil {
		return false
	}
	if i >= len(mask) {
		return true
	}
	return mask[i]
}

// checkMask rejects a non-nil mask whose length is not the message count.
func checkMask(c conversation.Conversation, mask []bool) error {
	if mask != nil && len(mask) != len(c.Messages) {
		return fmt.Errorf("protection mask has %d entries for %d messages", len(mask), len(c.Messages))
	}
	return nil
}

// closePairs returns a copy of mask (normalised to the message count) in
// which every protected message also protects the other half of each tool
// call it holds, transitively, so that later strategies can never orphan a
// call or a result by keeping only one side.
func closePairs(c conversation.Conversation, idx toolIndex, mask []bool) []bool {
	n := len(c.Messages)
	out := make([]bool, n)
	var work []int
	for i := range n {
		if isProtected(mask, i) {
			out[i] = true
			work = append(work, i)
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		for _, j := range idx.partners(i) {
			if !out[j] {
				out[j] = true
				work = append(work, j)
			}
		}
	}
	return out
}

// headEnd is the index of the first non-system message: the system
// messages at the head are never summarized or dropped.
func headEnd(c conversation.Conversation) int {
	for i, m := range c.Messages {
		if m.Role != conversation.RoleSystem {
			return i
		}
	}
	return len(c.Messages)
}

// textOf joins the text and thinking blocks of a message.
func textOf(m conversation.Message, withThinking bool) string {
	var s string
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindText || (withThinking && b.Kind == conversation.KindThinking) {
			if s != "" && b.Text != "" {
				s += "\n"
			}
			s += b.Text
		}
	}
	return s
}
