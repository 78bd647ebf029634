package conversation

// Positions in the caller's document.
//
// Message indices shown to a caller (an over-limit reason, a diff) must
// name a position in the list the caller's document holds, not in
// Conversation.Messages, which differs in three ways: the Anthropic system
// prompt is the top-level system field but Messages[0] here; Render merges
// consecutive same-role Anthropic messages into one; and a ReAct turn is
// two messages here (the thought and action, then the result) but one
// element of the turn list.

// CallerIndexes maps every message to its position in the caller's list,
// as Render writes c: the messages[] array for OpenAI and Anthropic, the
// turn list (execution.tool_calls, or the bare array) for ReAct. The
// result has one entry per message of c.Messages, -1 for a message with
// no position there: the Anthropic system prompt, which is the top-level
// system field. Messages Render merges share a position, and so do the
// two messages of a ReAct turn.
//
// For a conversation parsed from a document, these are the positions in
// that document, unless it is an Anthropic one with same-role neighbours
// (which Render merges): then they are the positions in the rendering.
func (c Conversation) CallerIndexes() []int {
	msgs := c.Messages
	out := make([]int, len(msgs))
	switch c.Format {
	case FormatAnthropic:
		start := 0
		if !hasShape(c.Shape, shapeArray) && len(msgs) > 0 && msgs[0].Role == RoleSystem {
			out[0] = -1 // the top-level system field
			start = 1
		}
		for i, pos := start, 0; i < len(msgs); pos++ {
			end := anthropicTurnEnd(msgs, i)
			for ; i < end; i++ {
				out[i] = pos
			}
		}
	case FormatReAct:
		// As renderReActTurns groups them: a turn is a message and the
		// tool result message right after it, if any.
		for i, t := 0, 0; i < len(msgs); t++ {
			out[i] = t
			if i+1 < len(msgs) && msgs[i+1].Role == RoleTool {
				out[i+1] = t
				i++
			}
			i++
		}
	default:
		// OpenAI: one element of messages[] per message, the system
		// prompt included.
		for i := range out {
			out[i] = i
		}
	}
	return out
}

// CallerIndex is CallerIndexes for one message: the position of
// Messages[i] in the caller's list, and false when it has none there (the
// Anthropic system prompt, or an i out of range). It walks the
// conversation: for many messages, call CallerIndexes once.
func (c Conversation) CallerIndex(i int) (int, bool) {
	if i < 0 || i >= len(c.Messages) {
		return -1, false
	}
	if c.Format != FormatAnthropic && c.Format != FormatReAct {
		return i, true
	}
	pos := c.CallerIndexes()[i]
	return pos, pos >= 0
}
