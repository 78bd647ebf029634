package strategy

import (
	"fmt"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/textcut"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// PostStats reports what PostProcessResults did.
type PostStats struct {
	// Changed is the number of results that were reduced.
	Changed int
	// TokensSaved is the drop in result size, in the counter's unit.
	TokensSaved int
	// ByKind counts the examined results by the digest rule that decided
	// them (textcut.PostFile, textcut.PostKeptError, …), kept ones included,
	// so the post-processing table's effect can be reported.
	ByKind map[string]int
}

// PostProcessResults applies the selective tool post-processing table of
// auto-summarize (textcut.PostProcess) to every tool result of a non-protected message:
// search results, long file reads, big tables and API responses shrink;
// errors, small results and small structured data stay. Offload references
// are left alone. Only the result text changes, so ReAct trajectories keep
// their shape. A nil counter measures in characters.
func PostProcessResults(c conversation.Conversation, count tokens.Counter, rules textcut.PostRules, protected []bool) (conversation.Conversation, PostStats, error) {
	if err := checkMask(c, protected); err != nil {
		return conversation.Conversation{}, PostStats{}, fmt.Errorf("post-process tool results: %w", err)
	}
	var countFn func(string) int
	if count != nil {
		countFn = count.Count
	}
	idx := indexTools(c)
	mask := closePairs(c, idx, protected)
	out := c.Clone()
	stats := PostStats{ByKind: map[string]int{}}
	for i := range out.Messages {
		if mask[i] {
			continue
		}
		for j := range out.Messages[i].Blocks {
			b := &out.Messages[i].Blocks[j]
			if b.Kind != conversation.KindToolResult {
				continue
			}
			if _, isRef := ParseReference(b.Text); isRef {
				continue
			}
			name := idx.toolName(conversation.Pos{Msg: i, Block: j})
			reduced, kind, changed := textcut.PostProcess(name, b.Text, b.IsError, countFn, rules)
			stats.ByKind[kind]++
			if !changed {
				continue
			}
			saved := size(countFn, b.Text) - size(countFn, reduced)
			b.ReplaceResult(reduced)
			stats.Changed++
			stats.TokensSaved += saved
		}
	}
	return out, stats, nil
}

// size measures s with count, or in characters when count is nil.
func size(count func(string) int, s string) int {
	if count == nil {
		return utf8.RuneCountInString(s)
	}
	return count(s)
}
