package strategy

import "github.com/ctxcompact/orchestrator/internal/conversation"

// SummarizedMessages lists the messages Compact(c, split, …, protected)
// replaces with its summary, in order: the messages of [head, split) that
// neither protection nor a protected message's tool pairs keep. Nil when
// there is none, or when split is outside the conversation.
func SummarizedMessages(c conversation.Conversation, split int, protected []bool) []int {
	if checkMask(c, protected) != nil {
		return nil
	}
	head := headEnd(c)
	if split < head || split > len(c.Messages) {
		return nil
	}
	mask := closePairs(c, indexTools(c), protected)
	var out []int
	for i := head; i < split; i++ {
		if !mask[i] {
			out = append(out, i)
		}
	}
	return out
}
