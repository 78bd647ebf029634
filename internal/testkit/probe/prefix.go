package probe

import (
	"fmt"
	"strings"

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

// Region measures the compacted region of a compaction: the messages of
// the input that are not in the output verbatim (before) and the
// messages of the output that are not in the input verbatim (after:
// summaries, references, cut results), each by size. before/after is the
// compression of what was compacted, whatever was kept around it.
func Region(in, out conversation.Conversation, size func(conversation.Message) int) (before, after int) {
	return unmatched(in, out, size), unmatched(out, in, size)
}

// unmatched is the size of the messages of a that b does not hold
// verbatim, each of b's messages matching at most one of a's.
func unmatched(a, b conversation.Conversation, size func(conversation.Message) int) int {
	held := map[string]int{}
	for _, m := range b.Messages {
		held[fingerprint(m)]++
	}
	n := 0
	for _, m := range a.Messages {
		f := fingerprint(m)
		if held[f] > 0 {
			held[f]--
			continue
		}
		n += size(m)
	}
	return n
}

// fingerprint identifies a message by what sameMessage compares.
func fingerprint(m conversation.Message) string {
	var sb strings.Builder
	sb.WriteString(string(m.Role))
	for _, b := range m.Blocks {
		fmt.Fprintf(&sb, "\x00%s\x00%d:%s\x00%s\x00%s\x00%s\x00%t", b.Kind, len(b.Text), b.Text, b.ToolID, b.ToolName, b.Input, b.IsError)
	}
	return sb.String()
}
