package plan

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// Transcript renders the messages before split that are not protected as
// the plain text the summarizer reads, one "[role]" header per message.
//
// It is written once into a buffer of its final size: a transcript is
// most of a conversation (megabytes), and a buffer grown as it goes would
// allocate about five times that, and hold two copies at once while it
// grows.
func Transcript(c conversation.Conversation, split int, protected []bool) string {
	var sb strings.Builder
	sb.Grow(transcriptSize(c, split, protected))
	eachTranscriptBlock(c, split, protected, func(head1, head2, head3, body string) {
		sb.WriteString(head1)
		sb.WriteString(head2)
		sb.WriteString(head3)
		sb.WriteString(body)
		sb.WriteString("\n\n")
	})
	return sb.String()
}

// transcriptSize is the length of Transcript's text.
func transcriptSize(c conversation.Conversation, split int, protected []bool) int {
	n := 0
	eachTranscriptBlock(c, split, protected, func(head1, head2, head3, body string) {
		n += len(head1) + len(head2) + len(head3) + len(body) + 2
	})
	return n
}

// eachTranscriptBlock calls fn with the parts of each block of
// Transcript's text: a header in three parts ("[role]\n", "[assistant
// tool call name]\n" or "[tool tool result name]\n"), then the text; a
// blank line follows each.
func eachTranscriptBlock(c conversation.Conversation, split int, protected []bool, fn func(head1, head2, head3, body string)) {
	for i := 0; i < split && i < len(c.Messages); i++ {
		if i < len(protected) && protected[i] {
			continue
		}
		m := c.Messages[i]
		for _, blk := range m.Blocks {
			switch blk.Kind {
			case conversation.KindText, conversation.KindThinking:
				fn("[", string(m.Role), "]\n", blk.Text)
			case conversation.KindToolUse:
				fn("[assistant tool call ", blk.ToolName, "]\n", blk.Input)
			case conversation.KindToolResult:
				label := "[tool tool result "
				if blk.IsError {
					label = "[tool tool error "
				}
				fn(label, blk.ToolName, "]\n", blk.Text)
			}
		}
	}
}

// handoffTail is the last turn of a session where the user spoke only
// once: the last call and its result.
const handoffTail = 2

// HandoffSummaryChars bounds the handoff's summary of the middle of the
// session (about 2,000 tokens).
const HandoffSummaryChars = 8000

// HandoffRefs are the recovery references a handoff names.
type HandoffRefs struct {
	// Level and Usage are where the session stands.
	Level string
	Usage float64
	// ArchiveID names the whole original conversation: the id the
	// RecoverTool reads it back with (never its storage key).
	ArchiveID string
	// Offloads are the session's live offloads: id and tool name.
	Offloads [][2]string
	// Summarize writes the summary of the handed-off middle of the
	// session from its transcript, within about targetChars; nil is
	// textcut.KeepLines. The worker passes the structured offline
	// summary (offline.Summarizer, the three-tier session sections).
	Summarize func(transcript string, targetChars int) string
	// Made is a summary the run already made of the session's history
	// (its history pass, with the drift check): the handoff's summary
	// when the session keeps no summary log. With a log, that summary is
	// the log's newest block, which the handoff carries as it is, and
	// only what came after the log is summarized.
	Made string
}

// Handoff builds the three-tier fresh-session conversation from conv: the
// system prompt, the original intent and pinned constraints verbatim, a
// "## Session Handoff" summary of everything between them and the last
// turn with the recovery references, and the last turn (from the last
// message the user wrote). ok is false when there is nothing to hand off
// (a ReAct trajectory, or no earlier turn to summarize).
func Handoff(conv conversation.Conversation, p policy.Preset, refs HandoffRefs) (out conversation.Conversation, ok bool, err error) {
	split, protected, transcript, logEnd, ok := handoffSplit(conv, p)
	logKept := logEnd > 0
	if !ok || (transcript == "" && !logKept) {
		return conv, false, nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Session Handoff\n\nThe previous session was checkpointed at %s (%.1f%% of the context). "+
		"This fresh session keeps the task and the constraints as written, the summary log's blocks (when the session has them), this summary of what came after them, and the last turn.\n\n", refs.Level, refs.Usage*100)
	sb.WriteString("### Summary of the previous session\n")
	summarize := refs.Summarize
	if summarize == nil {
		summarize = textcut.KeepLines
	}
	var summary string
	switch {
	case logKept && transcript == "":
		summary = "The summary log above holds all of it."
	case refs.Made == "" || (logKept && inLog(conv, protected, refs.Made)):
		// No summary made, or the one made is a block the log carries.
		summary = strings.TrimSpace(summarize(transcript, HandoffSummaryChars))
	default:
		summary = strings.TrimSpace(refs.Made)
	}
	sb.WriteString(summary)
	// A structured summary ends with its own recovery references (the
	// last section of the three-tier session summary): the offloads go on
	// under it.
	if !strings.Contains(summary, "### Recovery References") {
		sb.WriteString("\n\n### Recovery References")
	}
	sb.WriteString("\n")
	if refs.ArchiveID != "" && !strings.Contains(summary, refs.ArchiveID) {
		fmt.Fprintf(&sb, "- Full previous conversation (archived): %s tool, id: %s\n", strategy.RecoverTool, refs.ArchiveID)
	}
	for _, o := range refs.Offloads {
		fmt.Fprintf(&sb, "- Offloaded %s result: %s tool, id: %s\n", o[1], strategy.RecoverTool, o[0])
	}
	if transcript == "" {
		// Nothing to replace between the log and the last turn: the
		// handoff's note goes in before the last turn.
		msg, err := strategy.SummaryMessage(sb.String(), strategy.StyleSessionSummary)
		if err != nil {
			return conv, false, fmt.Errorf("handoff: %w", err)
		}
		out = conv.Clone()
		out.Messages = append(append(append([]conversation.Message(nil), out.Messages[:logEnd]...), msg), out.Messages[logEnd:]...)
		return out, true, nil
	}
	out, _, err = strategy.Compact(conv, split, sb.String(), strategy.StyleSessionSummary, protected)
	if err != nil {
		return conv, false, fmt.Errorf("handoff: %w", err)
	}
	return out, true, nil
}

// HandoffTranscript is what a handoff summarizes: the transcript of the
// messages between the protected head (system prompt, task, pinned
// constraints) and the last turn (from the user's last message; the last
// call and its result when the user only spoke once), with the split and
// the protection that Handoff applies. ok is false when there is nothing
// to hand off (a ReAct trajectory, which never drops a turn, or no
// earlier turn to summarize).
func HandoffTranscript(conv conversation.Conversation, p policy.Preset) (split int, protected []bool, transcript string, ok bool) {
	split, protected, transcript, _, ok = handoffSplit(conv, p)
	if !ok || transcript == "" {
		return 0, nil, "", false
	}
	return split, protected, transcript, true
}

// handoffSplit is HandoffTranscript's work: ok when conv can be handed
// off at all (not a ReAct trajectory, a user message to keep), and
// logEnd, above 0 when the summary log is protected in the handoff: the
// index after its last block (the transcript may then be empty: the log
// holds everything before the last turn).
func handoffSplit(conv conversation.Conversation, p policy.Preset) (split int, protected []bool, transcript string, logEnd int, ok bool) {
	if conv.Format == conversation.FormatReAct {
		return 0, nil, "", 0, false
	}
	first, last := -1, -1
	for i, m := range conv.Messages {
		// An earlier compaction's summary is not the user's words: it is
		// part of the middle the handoff summarizes.
		if m.Role == conversation.RoleUser && hasText(m) && !strategy.IsSummary(m) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if last < 0 {
		return 0, nil, "", 0, false
	}
	// The last turn starts at the user's last message; when that is the
	// task itself (an agent working alone since), it is the last call and
	// its result.
	keep := len(conv.Messages) - last
	if last == first {
		keep = handoffTail
	}
	pr := Protection(p)
	pr.System, pr.FirstUser, pr.LastN = true, true, 0
	protected = strategy.Protected(conv, pr)
	logEnd = protectLog(conv, p, first, protected)
	split = strategy.SplitPoint(conv, keep, protected)
	transcript = Transcript(conv, split, protected)
	if strings.TrimSpace(transcript) == "" {
		transcript = ""
	}
	return split, protected, transcript, logEnd, true
}

// protectLog protects the session's summary log in a handoff, and
// returns the index after its last block (0 without a log): its
// blocks (or the reflection that replaced them), after the task and the
// pins, each with its recovery line. A handoff summarizes what the log
// does not hold yet, and the fresh session carries the log as it was,
// byte for byte: summarizing the blocks again would keep only the
// newest of them (the run's own history summary covers only what came
// after the last block). Without a log (the preset keeps none) earlier
// summaries are part of the middle, as the source design does.
func protectLog(conv conversation.Conversation, p policy.Preset, first int, protected []bool) (end int) {
	if !p.History.Enabled || !p.History.Log.Enabled {
		return 0
	}
	for i := first + 1; i < len(conv.Messages); i++ {
		switch {
		case isLogBlockMessage(conv.Messages[i]):
			protected[i], end = true, i+1
		case !protected[i]:
			return end
		}
	}
	return end
}

// inLog reports whether summary is the text of one of conv's protected
// log blocks (its opening, as the block frames it).
func inLog(conv conversation.Conversation, protected []bool, summary string) bool {
	head := strategy.EscapeDelimiters(strings.TrimSpace(summary))
	head = head[:min(len(head), 200)]
	for i, m := range conv.Messages {
		if protected[i] && isLogBlockMessage(m) && strings.Contains(saidText(m), head) {
			return true
		}
	}
	return false
}

// isLogBlockMessage reports whether m holds a session log block, framed
// as LogBlockText frames one.
func isLogBlockMessage(m conversation.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindText && strategy.IsLogBlock(b.Text) {
			return true
		}
	}
	return false
}

// hasText reports whether a message carries text the user wrote.
func hasText(m conversation.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == conversation.KindText && strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// handoffHeadChars is what an offloaded user message keeps in a handoff:
// its opening, so that the fresh session still reads what was asked.
const handoffHeadChars = 2000

// FitHandoff makes a handoff fit its own budget (the ladder's goal of the
// limit): the large tool results of the last turn are offloaded as the
// ladder does, then, largest first, user messages too large to carry
// (a pasted log, a task of hundreds of thousands of characters) keep
// their opening and a pointer to the rest, which is offloaded under the
// recover_context id it names. The words stay recoverable byte for byte;
// the fresh session starts under its limit. fits is false when even that
// is not enough.
func FitHandoff(conv conversation.Conversation, p policy.Preset, b Budget, offloadKey func(string) string) (out conversation.Conversation, offloads []Offload, fits bool, err error) {
	goal := LadderGoal(p, b)
	out = conv
	if b.Measure(out) > goal {
		out, _, offloads, err = FitOffload(out, p, b, offloadKey)
		if err != nil {
			return conv, nil, false, fmt.Errorf("handoff: %w", err)
		}
	}
	for iter := 0; iter < 64 && b.Measure(out) > goal; iter++ {
		msg, block, size := largestUserText(out, b)
		if msg < 0 || utf8.RuneCountInString(out.Messages[msg].Blocks[block].Text) <= 2*handoffHeadChars {
			break
		}
		if iter == 0 {
			out = out.Clone()
		}
		blk := &out.Messages[msg].Blocks[block]
		text := blk.Text
		key := offloadKey(text)
		id := key[strings.LastIndexByte(key, '/')+1:]
		runes := []rune(text)
		blk.Text = string(runes[:handoffHeadChars]) + fmt.Sprintf("\n\n[… %d more characters of this message (%d tokens) are offloaded: recover them with the %s tool, id: %s]",
			len(runes)-handoffHeadChars, size, strategy.RecoverTool, id)
		offloads = append(offloads, Offload{Key: key, ToolName: "user-message", Tokens: size, Text: text})
	}
	return out, offloads, b.Measure(out) <= b.Limit, nil
}

// largestUserText finds the largest text block of a user message.
func largestUserText(c conversation.Conversation, b Budget) (msg, block, size int) {
	msg, block = -1, -1
	for i, m := range c.Messages {
		if m.Role != conversation.RoleUser {
			continue
		}
		for j, blk := range m.Blocks {
			if blk.Kind != conversation.KindText {
				continue
			}
			if n := b.Counter.Count(blk.Text); n > size {
				msg, block, size = i, j, n
			}
		}
	}
	return msg, block, size
}
