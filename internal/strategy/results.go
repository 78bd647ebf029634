package strategy

import (
	"fmt"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// ResultLoc locates a tool result and what an LLM needs to compress it.
type ResultLoc struct {
	// Msg and Block locate the tool_result block.
	Msg, Block int
	// ToolID is the call id the result answers.
	ToolID string
	// ToolName is the called tool's name (from the call when the result
	// does not carry it).
	ToolName string
	// Chars is the result text's length in characters (code points, as
	// the ReAct two-layer design's len() counts).
	Chars int
	// Context is what the call said: for ReAct, the turn's thought and
	// action (layer 2 of the ReAct two-layer design passes them to
	// the summarizer); for other
	// formats, the text of the assistant message holding the call.
	Context string
}

// ToolResults lists every tool result in conversation order.
func ToolResults(c conversation.Conversation) []ResultLoc {
	idx := indexTools(c)
	var out []ResultLoc
	for i, m := range c.Messages {
		for j, b := range m.Blocks {
			if b.Kind != conversation.KindToolResult {
				continue
			}
			out = append(out, ResultLoc{
				Msg:      i,
				Block:    j,
				ToolID:   b.ToolID,
				ToolName: idx.toolName(conversation.Pos{Msg: i, Block: j}),
				Chars:    utf8.RuneCountInString(b.Text),
				Context:  callContext(c, idx, conversation.Pos{Msg: i, Block: j}),
			})
		}
	}
	return out
}

// callContext describes the call the result at p answers.
func callContext(c conversation.Conversation, idx toolIndex, p conversation.Pos) string {
	u, ok := idx.other(p)
	if !ok {
		return ""
	}
	m := c.Messages[u.Msg]
	if c.Format != conversation.FormatReAct {
		return textOf(m, false)
	}
	call := m.Blocks[u.Block]
	return "Thought: " + textOf(m, true) + "\nAction: " + call.Input
}

// ReplaceToolResult returns a copy of c in which the tool_result block at
// (msg, block) holds text instead (the ReAct two-layer design's layers 1 and 2, and the
// output of a map-reduce). The call id and error flag are kept; how the old
// content was encoded (a list of parts) is dropped with it, see
// conversation.Block.ReplaceResult.
func ReplaceToolResult(c conversation.Conversation, msg, block int, text string) (conversation.Conversation, error) {
	out := c.Clone()
	b, err := resultBlock(out, msg, block)
	if err != nil {
		return conversation.Conversation{}, fmt.Errorf("replace tool result: %w", err)
	}
	b.ReplaceResult(text)
	return out, nil
}
