package plan

import (
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TailAim is the size a tail-filling history summary aims for (presets
// with StopAtTarget, and the budget ladder's summary): the preset's target
// usage of the limit, never above the ladder's goal when the budget check
// is on. Zero means the preset does not fill its tail.
func TailAim(p policy.Preset, b Budget) int {
	if !p.StopAtTarget || p.TargetUsage <= 0 {
		return 0
	}
	aim := int(float64(b.Limit) * p.TargetUsage)
	if p.Budget.Enabled {
		aim = min(aim, LadderGoal(p, b))
	}
	return aim
}

// TailChoice is the split a history summary keeps, and why.
type TailChoice struct {
	// Split is the first kept message: messages[Split:] stay verbatim.
	Split int
	// Estimate is the output's size with the summary at its target: an
	// upper bound of what the summary leaves.
	Estimate int
	// Note says how the tail was chosen, for the pass's record.
	Note string
}

// HistoryTail chooses the split of a history summary. A preset that
// fills its tail (TailAim > 0) keeps the largest recent tail, in whole
// messages with every call and its result on the same side and a pending
// call kept, such that the protected messages before it, the summary at
// its target and the tail fit under the aim (the smallest tail when even
// that does not fit the aim). Every other preset keeps the fixed tail
// of its design, History.KeepLast, and the note says when that leaves the
// output below half the preset's target usage, since its keep_last rule and
// not the budget made it so.
func HistoryTail(conv conversation.Conversation, p policy.Preset, b Budget, protected []bool) TailChoice {
	keep := max(p.History.KeepLast, 0)
	minSplit := strategy.SplitPoint(conv, keep, protected)
	sizes := make([]int, len(conv.Messages))
	for i, m := range conv.Messages {
		sizes[i] = tokens.Message(b.Counter, m)
	}
	fixed := b.Overhead + p.History.TargetTokens
	if b.Counter.Name() != tokens.Chars {
		fixed += tokens.ReplyPrimingTokens
	}
	estimate := func(split int) int {
		n := fixed
		for i, s := range sizes {
			if i >= split || (i < len(protected) && protected[i]) {
				n += s
			}
		}
		return n
	}
	choice := TailChoice{Split: minSplit, Estimate: estimate(minSplit)}
	aim := TailAim(p, b)
	if aim <= 0 {
		target := int(float64(b.Limit) * p.TargetUsage)
		if p.TargetUsage > 0 && choice.Estimate < target/2 {
			choice.Note = fmt.Sprintf("the preset keeps the last %d messages (history.keep_last): about %d of limit %d (%.0f%%), below half the %.0f%% target",
				keep, choice.Estimate, b.Limit, 100*b.Usage(choice.Estimate), 100*p.TargetUsage)
		}
		return choice
	}
	// The first message a summary may take: a split at or before it
	// summarizes nothing (everything before it is protected, or frozen
	// with the session log).
	first := len(conv.Messages)
	for i := range conv.Messages {
		if i >= len(protected) || !protected[i] {
			first = i
			break
		}
	}
	best := -1
	// SplitPoint moves a split earlier for pairs and pending calls, so
	// the kept tail only grows with k; stop at the first that no longer
	// fits. When not even the smallest tail fits the aim, the summary
	// keeps that smallest tail: the output is then as small as this
	// summary makes it, and the budget ladder goes on from there.
	for k := keep; k <= len(conv.Messages); k++ {
		s := strategy.SplitPoint(conv, k, protected)
		if s > minSplit {
			continue
		}
		if s <= first || estimate(s) > aim {
			break
		}
		best = s
	}
	bestAim := aim
	if best < 0 || best >= minSplit {
		choice.Note = fmt.Sprintf("kept the last %d messages: no larger tail fits under %d of limit %d", len(conv.Messages)-minSplit, aim, b.Limit)
		return choice
	}
	choice.Split, choice.Estimate = best, estimate(best)
	choice.Note = fmt.Sprintf("kept the last %d messages: the largest tail that leaves about %d of limit %d (aim %d)",
		len(conv.Messages)-best, choice.Estimate, b.Limit, bestAim)
	return choice
}
