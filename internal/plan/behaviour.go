package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The three-tier design's post-compression check is about the agent, not
// the summary: after a compaction, is it still working on its task? It
// names three signs, read here from what the agent did since the
// previous output, with deterministic rules only.
const (
	// SignalClarification: the agent's first message after the
	// compaction asks the user a question while the summary lists work
	// still pending (it lost track and asks instead of continuing).
	SignalClarification = "clarification"
	// SignalCompletion: the agent declares the task done (its words, or a
	// submit/finish call) while the summary lists pending work or errors
	// still open.
	SignalCompletion = "premature-completion"
	// SignalOffTarget: the agent's new tool calls touch only files that
	// appear nowhere in the task, the summary log or the kept turns.
	SignalOffTarget = "off-target"
)

// BehaviourSignal is one sign that the agent drifted after a compaction.
type BehaviourSignal struct {
	Name string
	// Message is the index, in the conversation checked, of the message
	// that shows it.
	Message int
	// Note says what was seen, in the service's words.
	Note string
}

// Behaviour looks at what the agent did since the previous output prev:
// the messages of cur after prev's, when cur continues prev (its first
// messages are prev's) and prev holds a summary (a compaction happened).
// The summary's pending work and open errors are what the agent's new
// messages and calls are checked against. No signal when cur does not
// continue prev, or nothing new was said.
func Behaviour(prev, cur conversation.Conversation) []BehaviourSignal {
	if prev.Format == conversation.FormatReAct || !continues(prev, cur) {
		return nil
	}
	summary := lastSummary(prev)
	if summary == "" {
		return nil
	}
	pending, openErrors := pendingWork(summary)
	known := strings.ToLower(conversationText(prev))
	var out []BehaviourSignal
	firstSaid := true
	var paths []string
	pathAt := -1
	for i := len(prev.Messages); i < len(cur.Messages); i++ {
		m := cur.Messages[i]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for _, b := range m.Blocks {
			switch b.Kind {
			case conversation.KindText:
				if strings.TrimSpace(b.Text) == "" {
					continue
				}
				for _, l := range strings.Split(b.Text, "\n") {
					l = strings.TrimSpace(l)
					if firstSaid && len(pending) > 0 && drift.IsQuestionToUser(l) && !has(out, SignalClarification) {
						out = append(out, BehaviourSignal{Name: SignalClarification, Message: i,
							Note: fmt.Sprintf("the agent's first message after the compaction asks the user a question while %d pending item(s) are listed", len(pending))})
					}
					if reDone.MatchString(l) && (len(pending) > 0 || openErrors > 0) && !has(out, SignalCompletion) {
						out = append(out, BehaviourSignal{Name: SignalCompletion, Message: i, Note: completionNote("declares the task done", pending, openErrors)})
					}
				}
				firstSaid = false
			case conversation.KindToolUse:
				if isFinishCall(b) && (len(pending) > 0 || openErrors > 0) && !has(out, SignalCompletion) {
					out = append(out, BehaviourSignal{Name: SignalCompletion, Message: i, Note: completionNote("calls "+b.ToolName+" to finish", pending, openErrors)})
				}
				for _, id := range drift.Identifiers(b.Input) {
					if id.Kind == drift.KindPath && !slices.Contains(paths, id.Value) {
						paths = append(paths, id.Value)
						if pathAt < 0 {
							pathAt = i
						}
					}
				}
			}
		}
	}
	if len(paths) >= 2 && !slices.ContainsFunc(paths, func(p string) bool { return mentioned(known, p) }) {
		out = append(out, BehaviourSignal{Name: SignalOffTarget, Message: pathAt,
			Note: fmt.Sprintf("the agent's new tool calls touch only files the task, the summary log and the kept turns never name (%s)", strings.Join(first(paths, 3), ", "))})
	}
	return out
}

// GoalDriftWarning is the three-tier design's warning for signals, as the
// text of a message the service appends at the tail of the output: the
// detection, the original intent (the task's first line), what the agent
// did, how to recover and what to do.
func GoalDriftWarning(cur conversation.Conversation, signals []BehaviourSignal) string {
	var sb strings.Builder
	sb.WriteString(strategy.GoalDriftWarningOpening + " (from the context service, not the user)\n\n**Detection:** ")
	var names, notes []string
	for _, s := range signals {
		names = append(names, s.Name)
		notes = append(notes, s.Note)
	}
	sb.WriteString(strings.Join(notes, "; "))
	fmt.Fprintf(&sb, "\n**Original Intent:** «%s»", oneLine(taskText(cur), 200))
	if len(signals) > 0 && signals[0].Message < len(cur.Messages) {
		fmt.Fprintf(&sb, "\n**Current Action:** «%s»", oneLine(saidText(cur.Messages[signals[0].Message]), 200))
	}
	sb.WriteString("\n\n**Recovery Action:** the summary log above holds the session's work so far; the " + strategy.RecoverTool +
		" tool reads back each summarized range by the id its block ends with.\n\n**Recommendation:** ")
	switch {
	case slices.Contains(names, SignalCompletion):
		sb.WriteString("check the pending work and open errors in the summary before declaring the task done.")
	case slices.Contains(names, SignalClarification):
		sb.WriteString("continue with the pending work the summary lists; ask the user only what it does not answer.")
	default:
		sb.WriteString("return to the files and goal of the original intent, or say why the new files belong to it.")
	}
	return sb.String()
}

// reDone is a line that declares the task finished.
var reDone = regexp.MustCompile(`(?i)\b(the task is (now )?(complete|completed|done|finished)|i have (now )?(completed|finished) the task|all (tasks|work) (is |are )?(done|complete)|task completed|work is complete)\b`)

// finishTools are tool names that end a task; finishCommands are what a
// shell call to end one holds.
var (
	finishTools    = []string{"submit", "finish", "attempt_completion", "task_complete", "complete_task", "done"}
	finishCommands = []string{"COMPLETE_TASK_AND_SUBMIT", "submit_final_output"}
)

func isFinishCall(b conversation.Block) bool {
	if slices.Contains(finishTools, strings.ToLower(b.ToolName)) {
		return true
	}
	return slices.ContainsFunc(finishCommands, func(c string) bool { return strings.Contains(b.Input, c) })
}

func completionNote(what string, pending []string, openErrors int) string {
	var parts []string
	if len(pending) > 0 {
		parts = append(parts, fmt.Sprintf("%d pending item(s)", len(pending)))
	}
	if openErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d open error(s)", openErrors))
	}
	return fmt.Sprintf("the agent %s while the summary lists %s", what, strings.Join(parts, " and "))
}

// continues reports whether cur's first messages are prev's, block for
// block, and cur has more.
func continues(prev, cur conversation.Conversation) bool {
	if len(cur.Messages) <= len(prev.Messages) || len(prev.Messages) == 0 {
		return false
	}
	a, b := prev.MergeSameRole(), conversation.Conversation{Format: cur.Format, Messages: cur.Messages[:len(prev.Messages)]}.MergeSameRole()
	if len(a.Messages) != len(b.Messages) {
		return false
	}
	for i := range a.Messages {
		if a.Messages[i].Role != b.Messages[i].Role || len(a.Messages[i].Blocks) != len(b.Messages[i].Blocks) {
			return false
		}
		for j := range a.Messages[i].Blocks {
			if !sameBlock(a.Messages[i].Blocks[j], b.Messages[i].Blocks[j]) {
				return false
			}
		}
	}
	return true
}

// lastSummary is the text of the last summary in conv (a log block, or a
// summary in any style), "" when it has none.
func lastSummary(conv conversation.Conversation) string {
	for i := len(conv.Messages) - 1; i >= 0; i-- {
		if strategy.IsSummary(conv.Messages[i]) {
			return saidText(conv.Messages[i])
		}
	}
	return ""
}

// pendingWork is what a summary lists under its pending or next-step
// headings (placeholders and finishing steps left out: submitting is
// what done means) and how many of its errors are still open.
func pendingWork(summary string) (pending []string, openErrors int) {
	inPending := false
	for _, l := range strings.Split(summary, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			h := strings.ToLower(l)
			inPending = strings.Contains(h, "pending") || strings.Contains(h, "next step")
			continue
		}
		if strings.HasSuffix(l, ")") && strings.Contains(l, " — open (") {
			openErrors++
		}
		item := strings.TrimSpace(strings.TrimPrefix(l, "- "))
		if !inPending || item == "" || strings.HasPrefix(item, "(") || strings.HasPrefix(item, "Answer the user's latest message") {
			continue
		}
		if reDone.MatchString(item) || strings.Contains(strings.ToLower(item), "submit") {
			continue
		}
		pending = append(pending, item)
	}
	return pending, openErrors
}

// mentioned reports whether the file path p is in the lowercased text
// known: the path itself (without a leading "./"), or, for an absolute
// path, its part under a directory the text names ("/testbed/a/b.py" is
// "a/b.py" when the text says "a/b.py"). A bare base name is not enough:
// every repository has a models.py.
func mentioned(known, p string) bool {
	p = strings.ToLower(strings.TrimPrefix(p, "./"))
	if strings.Contains(known, p) {
		return true
	}
	for rest := p; strings.Contains(rest, "/"); {
		_, rest, _ = strings.Cut(rest, "/")
		if strings.Contains(rest, "/") && strings.Contains(known, rest) {
			return true
		}
	}
	return false
}

func conversationText(conv conversation.Conversation) string {
	var sb strings.Builder
	for _, m := range conv.Messages {
		for _, b := range m.Blocks {
			sb.WriteString(b.Text)
			sb.WriteString(b.Input)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// saidText is what a message says: its texts and its calls (tool and input).
func saidText(m conversation.Message) string {
	var parts []string
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindText && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
		if b.Kind == conversation.KindToolUse {
			parts = append(parts, b.ToolName+" "+b.Input)
		}
	}
	return strings.Join(parts, "\n")
}

// taskText is the text of the first user message with text.
func taskText(conv conversation.Conversation) string {
	for _, m := range conv.Messages {
		if m.Role == conversation.RoleUser && !strategy.IsSummary(m) {
			if t := strings.TrimSpace(saidText(m)); t != "" {
				return t
			}
		}
	}
	return ""
}

// oneLine is text's first non-empty line, bounded to n bytes on a
// character boundary, with the warning's own quote marks replaced.
func oneLine(text string, n int) string {
	line := ""
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	line = strategy.EscapeQuote(line)
	if len(line) <= n {
		return line
	}
	for n > 0 && (line[n]&0xC0) == 0x80 {
		n--
	}
	return line[:n] + "…"
}

func has(signals []BehaviourSignal, name string) bool {
	return slices.ContainsFunc(signals, func(s BehaviourSignal) bool { return s.Name == name })
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
