package plan

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// LadderRelieve is the budget check's step for a run that fits its goal
// but would end RED or above: it offloads the remaining large results,
// largest first, wherever they are, until the conversation is under RED.
// Offloading touches no protected structure (the reference stays paired
// with its call), so a run never ends RED when it could have done it.
const LadderRelieve = "budget/relieve"

// RedUsage is where the RED level starts (compress.LevelFor).
const RedUsage = 0.75

// reliefShare is where the relief step aims: just under RED.
const reliefShare = 0.74

// NeedsRelief reports whether a run of size ends RED or above.
func NeedsRelief(p policy.Preset, b Budget, size int) bool {
	return p.Budget.Enabled && !p.Debug && b.Usage(size) >= RedUsage
}

// FitRelieve is LadderRelieve: FitOffload aiming just under RED.
func FitRelieve(conv conversation.Conversation, p policy.Preset, b Budget, offloadKey func(string) string) (conversation.Conversation, Pass, []Offload, error) {
	q := p
	q.Budget.TargetUsage = min(p.Budget.TargetUsage, reliefShare)
	out, pass, offloads, err := FitOffload(conv, q, b, offloadKey)
	pass.Name = LadderRelieve
	if err != nil {
		return out, pass, offloads, fmt.Errorf("%s: %w", LadderRelieve, err)
	}
	return out, pass, offloads, nil
}

// LevelReason says why a conversation ends RED or above after every step
// that applies ("" under RED): what is left is what no step may reduce
// without touching protected structure or dropping a turn.
func LevelReason(conv conversation.Conversation, p policy.Preset, b Budget) string {
	size := b.Measure(conv)
	if b.Usage(size) < RedUsage {
		return ""
	}
	var why []string
	switch {
	case p.Debug:
		why = append(why, "debug verbosity: compression disabled")
	case !p.Budget.Enabled:
		why = append(why, "the budget check is turned off (budget.enabled=false)")
	default:
		if conv.Format == conversation.FormatReAct {
			why = append(why, "a ReAct trajectory never drops a turn")
		}
		largest := 0
		for _, m := range conv.Messages {
			for _, blk := range m.Blocks {
				if blk.Kind == conversation.KindToolResult {
					largest = max(largest, b.Counter.Count(blk.Text))
				}
			}
		}
		why = append(why, fmt.Sprintf("no tool result above %d left to offload (largest %d)", p.Budget.OffloadMinTokens, largest))
		if size <= LadderGoal(p, b) {
			why = append(why, fmt.Sprintf("under the budget goal of %d, so no turn was summarized", LadderGoal(p, b)))
		}
	}
	return fmt.Sprintf("%.0f%% of limit %d (%s) after every step: %s; largest: %s",
		100*b.Usage(size), b.Limit, b.CounterName(), strings.Join(why, "; "), largestMessages(conv, b))
}
