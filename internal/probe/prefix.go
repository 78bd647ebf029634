package probe

import (
	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// SharedPrefix is how many leading messages of b are identical to a's
// (role and every block), and their size by size: what a provider's
// prompt cache still hits when b follows a. A compaction that keeps the
// system prompt and the task in place keeps that much of the cache.
func SharedPrefix(a, b conversation.Conversation, size func(conversation.Message) int) (msgs, units int) {
	for i := 0; i < len(a.Messages) && i < len(b.Messages); i++ {
		if !sameMessage(a.Messages[i], b.Messages[i]) {
			break
		}
		msgs++
		units += size(b.Messages[i])
	}
	return msgs, units
}

func sameMessage(x, y conversation.Message) bool {
	if x.Role != y.Role || len(x.Blocks) != len(y.Blocks) {
		return false
	}
	for i := range x.Blocks {
		p, q := x.Blocks[i], y.Blocks[i]
		if p.Kind != q.Kind || p.Text != q.Text || p.ToolID != q.ToolID || p.ToolName != q.ToolName ||
			p.Input != q.Input || p.IsError != q.IsError {
			return false
		}
	}
	return true
}
