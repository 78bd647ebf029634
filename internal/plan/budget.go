package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The budget ladder's steps, in order, as they are recorded in a run's
// passes. Each runs only while the conversation is over the ladder's goal.
const (
	// LadderOffload offloads the remaining large results, largest first,
	// wherever they are (the newest result included).
	LadderOffload = "budget/offload"
	// LadderHistory summarizes the history with a smaller tail (an LLM
	// pass, run by the workflow; never for a ReAct trajectory).
	LadderHistory = "budget/history"
	// LadderTruncate cuts the largest results to their head and tail,
	// naming the archive that holds them whole.
	LadderTruncate = "budget/truncate"
)

// truncateFloorChars is the least a truncated result keeps: enough of its
// head and tail for the agent to see what it was.
const truncateFloorChars = 1000

// Over reports whether size exceeds the limit.
func (b Budget) Over(size int) bool {
	return size > b.Limit
}

// LadderGoal is the size the ladder aims for: the preset's share of the
// limit, so that the agent's next turn still fits.
func LadderGoal(p policy.Preset, b Budget) int {
	share := p.Budget.TargetUsage
	if share <= 0 || share > 1 {
		share = 1
	}
	return int(float64(b.Limit) * share)
}

// LadderHistoryPreset is the preset the ladder's history summary runs
// with: the preset's own summary settings (the base's when the preset has
// none), forced, with the ladder's smaller summary target. The system
// prompt, the task and pinned constraints stay protected; the recent
// turns are kept as far as the largest tail that fits (HistoryTail), at
// least the ladder's KeepLast.
func LadderHistoryPreset(p policy.Preset, b Budget) policy.Preset {
	out := p
	if !out.History.Enabled {
		// policy.Resolve recorded the summary settings to use.
		if p.Budget.History != nil {
			out.History = *p.Budget.History
		}
		out.History.Enabled = true
	}
	out.History.KeepLast = min(out.History.KeepLast, p.Budget.KeepLast)
	out.Protection.LastN = min(out.Protection.LastN, p.Budget.KeepLast)
	// The user's words survive every preset: the task statement and the
	// pinned constraints stay verbatim beside the ladder's summary, also
	// for presets whose own rules do not protect them.
	out.Protection.FirstUser = true
	if len(out.Protection.PinMarkers) == 0 {
		out.Protection.PinMarkers = policy.DefaultPinMarkers()
	}
	// The ladder removes no more than it needs: its summary keeps the
	// largest recent tail that fits (see HistoryTail), not only KeepLast.
	out.StopAtTarget = true
	out.History.TriggerUsage = 0
	out.History.MaxFreedTokens = 0
	target := min(out.History.TargetTokens, max(p.Budget.TargetTokens, 50))
	// The summary itself must leave room under the goal.
	out.History.TargetTokens = max(50, min(target, LadderGoal(p, b)/4))
	out.History.OnFailure = "extractive"
	return out
}

// Floor is the size of what no ladder step may cut: for every message the
// ladder's history step keeps (system prompt, the task, pinned constraints,
// its smaller tail; every turn of a ReAct trajectory), its text, thinking
// and tool inputs. Tool results are not counted: they can be offloaded or
// cut. A floor over the limit means the run cannot fit, whatever it does.
func Floor(conv conversation.Conversation, p policy.Preset, b Budget) int {
	keep := strategy.Protected(conv, Protection(LadderHistoryPreset(p, b)))
	floor := b.Overhead
	for i, m := range conv.Messages {
		if !keep[i] && conv.Format != conversation.FormatReAct {
			continue
		}
		for _, blk := range m.Blocks {
			if blk.Kind != conversation.KindToolResult {
				floor += b.Counter.Count(blk.Text) + b.Counter.Count(blk.Input)
			}
		}
	}
	return floor
}

// FitOffload is the ladder's first step: while the conversation is over
// the goal, offload the remaining tool results larger than the rule's
// minimum, largest first, wherever they are (also in protected messages:
// protection keeps the structure of recent turns, not an oversized body).
// Each reference stays in its block, paired with its call.
func FitOffload(conv conversation.Conversation, p policy.Preset, b Budget, offloadKey func(string) string) (conversation.Conversation, Pass, []Offload, error) {
	return fitOffload(conv, p, b, offloadKey, func(x, y strategy.OffloadCandidate) int { return cmp.Compare(y.Tokens, x.Tokens) }, nil)
}

// fitOffload offloads candidates in the given order until the
// conversation is under the goal, each reference with the preview
// preview makes of its text (nil: the preset's first lines).
func fitOffload(conv conversation.Conversation, p policy.Preset, b Budget, offloadKey func(string) string,
	order func(x, y strategy.OffloadCandidate) int, preview func(text string) string) (conversation.Conversation, Pass, []Offload, error) {
	if preview == nil {
		preview = func(text string) string {
			return strategy.PreviewN(text, p.Offload.PreviewLines, p.Offload.PreviewChars)
		}
	}
	pass := Pass{Name: LadderOffload}
	size, goal := b.Measure(conv), LadderGoal(p, b)
	if size <= goal {
		pass.Note = "under the goal: nothing to do"
		return conv, pass, nil, nil
	}
	cands := strategy.PlanOffloadWith(conv, b.Counter, strategy.OffloadOptions{
		MinTokens: p.Budget.OffloadMinTokens, IncludeErrors: true,
		PreviewLines: p.Offload.PreviewLines, PreviewChars: p.Offload.PreviewChars,
	})
	slices.SortStableFunc(cands, order)
	excess := size - goal
	var placed []strategy.Placed
	var offloads []Offload
	for _, c := range cands {
		if excess <= 0 {
			break
		}
		text := conv.Messages[c.Msg].Blocks[c.Block].Text
		key := offloadKey(text)
		shown := preview(text)
		ref := strategy.Reference(strategy.OffloadRef{Key: key, ToolName: c.ToolName, TokensSaved: c.Tokens, Preview: shown})
		excess -= c.Tokens - b.Counter.Count(ref)
		placed = append(placed, strategy.Placed{OffloadCandidate: c, Key: key, Preview: shown})
		offloads = append(offloads, Offload{Key: key, ToolID: c.ToolID, ToolName: c.ToolName, Tokens: c.Tokens, Text: text})
	}
	if len(placed) == 0 {
		pass.Note = fmt.Sprintf("no result above %d to offload", p.Budget.OffloadMinTokens)
		return conv, pass, nil, nil
	}
	out, err := strategy.ApplyOffload(conv, placed)
	if err != nil {
		return conversation.Conversation{}, pass, nil, fmt.Errorf("%s: %w", LadderOffload, err)
	}
	after := b.Measure(out)
	pass.Applied, pass.Count, pass.TokensSaved = true, len(placed), size-after
	pass.Note = fmt.Sprintf("offloaded %d results: %d → %d of limit %d", len(placed), size, after, b.Limit)
	return out, pass, offloads, nil
}

// FitTruncate is the ladder's last step: while the conversation is over
// the goal, cut the largest tool result to its head and tail with a note
// naming the archived original, down to truncateFloorChars each. Only
// tool results are cut: what the user and the assistant wrote never is.
func FitTruncate(conv conversation.Conversation, p policy.Preset, b Budget, archiveKey string) (conversation.Conversation, Pass, error) {
	return FitTruncateWith(conv, p, b, archiveKey, nil)
}

// FitTruncateWith is FitTruncate whose notes also name, when recoverID
// gives one, the id recover_context reads the whole result back with
// (recoverID(msg, block) for the result at that position of conv).
func FitTruncateWith(conv conversation.Conversation, p policy.Preset, b Budget, archiveKey string, recoverID func(msg, block int) string) (conversation.Conversation, Pass, error) {
	pass := Pass{Name: LadderTruncate}
	size, goal := b.Measure(conv), LadderGoal(p, b)
	if size <= goal {
		pass.Note = "under the goal: nothing to do"
		return conv, pass, nil
	}
	before := size
	out := conv.Clone()
	// Each cut strictly shortens a result that is above twice the floor,
	// so the loop ends; the bound is a guard.
	for iter := 0; iter < 256 && size > goal; iter++ {
		msg, block, chars := largestResult(out)
		if chars <= 2*truncateFloorChars {
			break
		}
		blk := &out.Messages[msg].Blocks[block]
		units := max(b.Counter.Count(blk.Text), 1)
		excessChars := int(float64(size-goal)*float64(chars)/float64(units)) + 1
		keep := max(truncateFloorChars, chars-excessChars-200)
		id := ""
		if recoverID != nil {
			id = recoverID(msg, block)
		}
		cut := truncateMiddle(blk.Text, keep, archiveKey, id)
		if utf8.RuneCountInString(cut) >= chars {
			break
		}
		blk.ReplaceResult(cut)
		pass.Count++
		size = b.Measure(out)
	}
	if pass.Count == 0 {
		pass.Note = "no result large enough to cut"
		return conv, pass, nil
	}
	pass.Applied, pass.TokensSaved = true, before-size
	pass.Note = fmt.Sprintf("cut %d results to head and tail (full text in %s): %d → %d of limit %d", pass.Count, archiveKey, before, size, b.Limit)
	return out, pass, nil
}

// largestResult finds the longest tool result in characters.
func largestResult(c conversation.Conversation) (msg, block, chars int) {
	msg, block = -1, -1
	for i, m := range c.Messages {
		for j, blk := range m.Blocks {
			if blk.Kind != conversation.KindToolResult {
				continue
			}
			if n := utf8.RuneCountInString(blk.Text); n > chars {
				msg, block, chars = i, j, n
			}
		}
	}
	return msg, block, chars
}

// truncateMiddle keeps about keep characters of text, two thirds from the
// head and one third from the tail, with a note in between naming the
// archive and, when there is one, the recover id of the whole result.
func truncateMiddle(text string, keep int, archiveKey, id string) string {
	runes := []rune(text)
	if len(runes) <= keep {
		return text
	}
	head := keep * 2 / 3
	tail := keep - head
	note := fmt.Sprintf("\n\n[… %d characters cut by the budget check; the whole result is in the archived conversation %s]\n\n", len(runes)-keep, archiveKey)
	if id != "" {
		note = fmt.Sprintf("\n\n[… %d characters cut by the budget check; recover the whole result with the %s tool, id: %s (archived conversation %s)]\n\n",
			len(runes)-keep, strategy.RecoverTool, id, archiveKey)
	}
	return string(runes[:head]) + note + string(runes[len(runes)-tail:])
}

// OverLimitReason says why a conversation is still over its limit after
// every step that applies: the largest messages and what they are, since
// those are what no step may cut. A message is named by its position in
// the messages[] the caller gets (conversation.CallerIndexes): "message
// 3", "turn 3" for a ReAct trajectory, "system" for the Anthropic system
// prompt, which is no element of messages[].
//
// historyFailed says the preset's history summary failed and the preset
// keeps the history unchanged then (history.on_failure=unchanged).
func OverLimitReason(conv conversation.Conversation, p policy.Preset, b Budget, ladder, historyFailed bool) string {
	size := b.Measure(conv)
	var why string
	switch {
	case p.Debug:
		why = "debug verbosity: compression disabled"
	case !ladder:
		why = "the budget check is turned off for this preset (budget.enabled=false)"
	case historyFailed && p.History.OnFailure == "unchanged":
		why = "the history summary failed and the preset keeps the history unchanged then (history.on_failure=unchanged); replay the run once the summarizer is back"
	default:
		why = "what remains is content no step may cut"
	}
	return fmt.Sprintf("%d of limit %d (%s) after every step: %s; largest: %s",
		size, b.Limit, b.CounterName(), why, largestMessages(conv, b))
}

// largestMessages names the three largest messages with their sizes, each
// by its position in the messages[] the caller gets
// (conversation.CallerIndexes): "message 3", "turn 3" for a ReAct
// trajectory, "system" for the Anthropic system prompt, which is no
// element of messages[].
func largestMessages(conv conversation.Conversation, b Budget) string {
	per := make([]int, len(conv.Messages))
	order := make([]int, len(conv.Messages))
	for i, m := range conv.Messages {
		per[i] = b.Counter.Count(messageText(m))
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(per[y], per[x]) })
	pos := conv.CallerIndexes()
	var parts []string
	for _, i := range order[:min(3, len(order))] {
		where := "system"
		switch {
		case pos[i] >= 0 && conv.Format == conversation.FormatReAct:
			where = fmt.Sprintf("turn %d", pos[i])
		case pos[i] >= 0:
			where = fmt.Sprintf("message %d", pos[i])
		}
		parts = append(parts, fmt.Sprintf("%s (%s) %d", where, describe(conv.Messages[i]), per[i]))
	}
	return strings.Join(parts, ", ")
}

// describe names what a message is, for an over-limit reason.
func describe(m conversation.Message) string {
	for _, blk := range m.Blocks {
		if blk.Kind == conversation.KindToolResult {
			return string(m.Role) + " tool result"
		}
	}
	return string(m.Role) + " text"
}

func messageText(m conversation.Message) string {
	var sb strings.Builder
	for _, blk := range m.Blocks {
		sb.WriteString(blk.Text)
		sb.WriteString(blk.Input)
	}
	return sb.String()
}
