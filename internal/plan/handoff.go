package plan

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/digest"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// Transcript renders the messages before split that are not protected as
// the plain text the summarizer reads, one "[role]" header per message.
func Transcript(c conversation.Conversation, split int, protected []bool) string {
	var sb strings.Builder
	for i := 0; i < split && i < len(c.Messages); i++ {
		if i < len(protected) && protected[i] {
			continue
		}
		m := c.Messages[i]
		for _, blk := range m.Blocks {
			switch blk.Kind {
			case conversation.KindText, conversation.KindThinking:
				fmt.Fprintf(&sb, "[%s]\n%s\n\n", m.Role, blk.Text)
			case conversation.KindToolUse:
				fmt.Fprintf(&sb, "[assistant tool call %s]\n%s\n\n", blk.ToolName, blk.Input)
			case conversation.KindToolResult:
				label := "tool result"
				if blk.IsError {
					label = "tool error"
				}
				fmt.Fprintf(&sb, "[tool %s %s]\n%s\n\n", label, blk.ToolName, blk.Text)
			}
		}
	}
	return sb.String()
}

// handoffTail is the last turn of a session where the user spoke only
// once: the last call and its result.
const handoffTail = 2

// handoffSummaryChars bounds the handoff's summary of the middle of the
// session (about 2,000 tokens).
const handoffSummaryChars = 8000

// HandoffRefs are the recovery references a handoff names.
type HandoffRefs struct {
	// Level and Usage are where the session stands.
	Level string
	Usage float64
	// ArchiveKey holds the whole original conversation.
	ArchiveKey string
	// Offloads are the session's live offloads: id and tool name.
	Offloads [][2]string
}

// Handoff builds seed 004's fresh-session conversation from conv: the
// system prompt, the original intent and pinned constraints verbatim, a
// "## Session Handoff" summary of everything between them and the last
// turn with the recovery references, and the last turn (from the last
// message the user wrote). ok is false when there is nothing to hand off
// (a ReAct trajectory, or no earlier turn to summarize).
func Handoff(conv conversation.Conversation, p policy.Preset, refs HandoffRefs) (out conversation.Conversation, ok bool, err error) {
	if conv.Format == conversation.FormatReAct {
		return conv, false, nil
	}
	first, last := -1, -1
	for i, m := range conv.Messages {
		if m.Role == conversation.RoleUser && hasText(m) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if last < 0 {
		return conv, false, nil
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
	protected := compress.Protected(conv, pr)
	split := compress.SplitPoint(conv, keep, protected)
	transcript := Transcript(conv, split, protected)
	if strings.TrimSpace(transcript) == "" {
		return conv, false, nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Session Handoff\n\nThe previous session was checkpointed at %s (%.1f%% of the context). "+
		"This fresh session keeps the task and the constraints as written, this summary, and the last turn.\n\n", refs.Level, refs.Usage*100)
	sb.WriteString("### Summary of the previous session\n")
	sb.WriteString(strings.TrimSpace(digest.Extractive(transcript, handoffSummaryChars)))
	sb.WriteString("\n\n### Recovery References\n")
	if refs.ArchiveKey != "" {
		sb.WriteString("- Full previous conversation (archived): " + refs.ArchiveKey + "\n")
	}
	for _, o := range refs.Offloads {
		fmt.Fprintf(&sb, "- Offloaded %s result: %s tool, id: %s\n", o[1], compress.RecoverTool, o[0])
	}
	out, _, err = compress.Compact(conv, split, sb.String(), compress.StyleSessionSummary, protected)
	if err != nil {
		return conv, false, fmt.Errorf("handoff: %w", err)
	}
	return out, true, nil
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
