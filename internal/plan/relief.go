package plan

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/textcut"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// LadderRelieve is the budget check's step for a run that fits its goal
// but would end RED or above: it offloads the remaining large results,
// largest first, wherever they are, until the conversation is under RED.
// Offloading touches no protected structure (the reference stays paired
// with its call), so a run never ends RED when it could have done it.
const LadderRelieve = "budget/relieve"

// RedUsage is where the RED level starts (strategy.LevelFor).
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

// LadderOffloadSmall is the ladder's last step, for what is still over
// the goal after truncation (a ReAct trajectory of many small results,
// whose turns are never dropped): it offloads the remaining results
// above smallOffloadTokens, oldest first and errors last (the recent
// results and the failures are what the agent acts on next), each
// replaced by a reference with a two-line preview, until the
// conversation is under the goal. When even all of them would leave it
// over the limit, it does nothing: the run ends over_limit either way,
// and the agent keeps what it had.
const LadderOffloadSmall = "budget/offload-small"

// smallOffloadTokens is the least result the last step offloads (in the
// preset's unit; four times as many for characters): below it a
// reference saves next to nothing.
const smallOffloadTokens = 60

// FitOffloadSmall is LadderOffloadSmall.
func FitOffloadSmall(conv conversation.Conversation, p policy.Preset, b Budget, offloadKey func(string) string) (conversation.Conversation, Pass, []Offload, error) {
	q := p
	q.Budget.OffloadMinTokens = smallOffloadTokens
	if b.Counter.Name() == tokens.Chars {
		q.Budget.OffloadMinTokens = 4 * smallOffloadTokens
	}
	q.Offload.PreviewLines, q.Offload.PreviewChars = 2, 160
	failed := func(c strategy.OffloadCandidate) int {
		if textcut.LooksLikeError(conv.Messages[c.Msg].Blocks[c.Block].Text) {
			return 1
		}
		return 0
	}
	order := func(x, y strategy.OffloadCandidate) int {
		return cmp.Or(cmp.Compare(failed(x), failed(y)), cmp.Compare(x.Msg, y.Msg), cmp.Compare(x.Block, y.Block))
	}
	// A result that already names a recovery id (cut by the truncation
	// before, reduced, summarized) shows that pointer as its preview: the
	// agent reaches the original in one call.
	preview := func(text string) string {
		var pointers []string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, strategy.RecoverTool) {
				pointers = append(pointers, strings.TrimSpace(l))
			}
		}
		if len(pointers) > 0 {
			return strings.Join(pointers, "\n")
		}
		return strategy.PreviewN(text, q.Offload.PreviewLines, q.Offload.PreviewChars)
	}
	out, pass, offloads, err := fitOffload(conv, q, b, offloadKey, order, preview)
	pass.Name = LadderOffloadSmall
	if err != nil {
		return out, pass, offloads, fmt.Errorf("%s: %w", LadderOffloadSmall, err)
	}
	if size := b.Measure(out); pass.Applied && b.Over(size) {
		return conv, Pass{Name: LadderOffloadSmall, Note: fmt.Sprintf(
			"not done: offloading the %d small results would still leave %d of limit %d", len(offloads), size, b.Limit)}, nil, nil
	}
	return out, pass, offloads, nil
}
