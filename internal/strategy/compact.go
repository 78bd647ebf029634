package strategy

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// SplitPoint returns the index s such that messages[s:] are kept verbatim
// and the non-system messages before s are summarized. It starts at
// len-keepLast and moves earlier until no call in the summarized range has
// a result in the kept range (so no kept result loses its call and no
// summarized call leaves a result behind), and so that a pending call (one
// the agent still awaits, see conversation.ToolPair) is kept. System messages at the head are never in the
// summarized range. It returns the first non-system index (0 when there is
// no system head) when there is nothing to summarize: too few messages
// (offload-compact: at most keepLast), or only protected messages before s.
func SplitPoint(c conversation.Conversation, keepLast int, protected []bool) int {
	n := len(c.Messages)
	head := headEnd(c)
	s := max(n-max(keepLast, 0), head)
	idx := indexTools(c)
	if p := pendingCall(idx); p >= 0 {
		s = min(s, p)
	}
	s = max(pairSafeBoundary(c, idx, s), head)
	mask := closePairs(c, idx, protected)
	for i := head; i < s; i++ {
		if !mask[i] {
			return s
		}
	}
	return head
}

// pendingCall returns the index of the earliest message holding a pending
// call (a call in the last message that is not only tool results, whose
// result has not arrived: the agent is waiting for it), or -1.
func pendingCall(idx toolIndex) int {
	p := -1
	for _, pair := range idx.x.Pairs {
		if pair.Pending && (p < 0 || pair.Use.Msg < p) {
			p = pair.Use.Msg
		}
	}
	return p
}

// SummaryStyle is how the summary message is written into the history.
type SummaryStyle string

// The summary styles of the history summaries (presets offload-compact,
// auto-summarize and three-tier).
const (
	// StyleCompressedHistory is the offload-compact compressed-history
	// summary: a user message
	// "[Compressed History]\n\n{summary}".
	StyleCompressedHistory SummaryStyle = "compressed-history"
	// StyleSummaryFirst is the auto-summarize brief summary: an assistant
	// message
	// "[SUMMARY]: {summary}".
	StyleSummaryFirst SummaryStyle = "summary-first"
	// StyleSessionSummary is the three-tier tier-3 session summary: a user
	// message holding the summary
	// as given, already formatted as "## Session Summary [{session}] …".
	StyleSessionSummary SummaryStyle = "session-summary"
)

// The openings of the summary messages, one per style: SummaryMessage
// writes them and IsSummary recognises them.
const (
	compressedHistoryPrefix = "[Compressed History]\n\n"
	summaryFirstPrefix      = "[SUMMARY]: "
	// SessionSummaryHeading opens the three-tier session summary (ApplyHistory
	// frames a summary under it when the summarizer did not).
	SessionSummaryHeading = "## Session Summary"
)

// GoalDriftWarningOpening opens the Goal Drift Warning the service
// appends at an output's tail (plan.GoalDriftWarning): a later summary
// reads the message as the service's, not as the user's words.
const GoalDriftWarningOpening = "⚠️ **Goal Drift Warning**"

// LogBlockOpening opens the body of a session log block (LogBlockText).
const LogBlockOpening = "<session-log block="

// LogBlockText frames summary as the session log's block label ("3", or
// "1-4" for a reflection of blocks 1 to 4): stable delimiters that show
// the agent (and a reader) where each block starts and ends.
//
// The delimiters are the service's alone: wherever a summary copied them
// (a tool result or a user quoting a block, an LLM echoing its input),
// they are escaped (EscapeDelimiters), so that no text inside a block can
// open or close one, or name a label.
func LogBlockText(label, summary string) string {
	return LogBlockOpening + `"` + label + `">` + "\n" + EscapeDelimiters(strings.TrimSpace(summary)) + "\n" + logBlockClosing
}

// logBlockClosing closes a log block.
const logBlockClosing = "</session-log>"

// delimiterEscaper writes the log's delimiters with "&lt;" for "<", as
// HTML would: the text still reads the same to the agent, and is never
// a frame.
var delimiterEscaper = strings.NewReplacer("<session-log", "&lt;session-log", "</session-log", "&lt;/session-log")

// EscapeDelimiters escapes the session log's delimiters in text copied
// into a block.
func EscapeDelimiters(text string) string { return delimiterEscaper.Replace(text) }

// quoteEscaper replaces the marks that fence a quotation the service
// writes (« »), so that quoted text cannot close its quote early.
var quoteEscaper = strings.NewReplacer("«", "‹", "»", "›")

// EscapeQuote is text ready to go between « and »: the offline summary's
// quotations of users and tools, and the Goal Drift Warning's.
func EscapeQuote(text string) string { return quoteEscaper.Replace(text) }

// IdentifiersLabel opens the line on which an offline summary writes the
// source's recent identifiers that no other line holds, for its drift
// check ("- Also named recently: a; b"); a reflection leaves the line
// out, since the blocks it condenses were each checked on their own.
const IdentifiersLabel = "Also named recently"

// IsLogBlock reports whether text is framed as a log block: the
// opening starts one of its first three lines (after the summary style's
// own opening, such as "[Compressed History]" or a session summary's
// heading).
func IsLogBlock(text string) bool {
	for i, line := range strings.SplitN(text, "\n", 4) {
		if i < 3 && (strings.HasPrefix(line, LogBlockOpening) || strings.HasPrefix(line, summaryFirstPrefix+LogBlockOpening)) {
			return true
		}
	}
	return false
}

// LogBlockLabel is the label a log block's frame names ("3", "1-4"):
// read from the frame's opening on one of its first three lines, as
// IsLogBlock finds it, never from the body. "" when text has no frame.
func LogBlockLabel(text string) string {
	for i, line := range strings.SplitN(text, "\n", 4) {
		if i >= 3 {
			break
		}
		line = strings.TrimPrefix(line, summaryFirstPrefix)
		if rest, ok := strings.CutPrefix(line, LogBlockOpening+`"`); ok {
			label, _, _ := strings.Cut(rest, `"`)
			return label
		}
	}
	return ""
}

// LogBlockBody is the summary a log block's text frames (LogBlockText),
// without the summary style's opening and the block's delimiters: what a
// reflection condenses, so that no block ever holds another's frame.
func LogBlockBody(text string) string {
	i := strings.Index(text, LogBlockOpening)
	if i < 0 {
		return text
	}
	body := text[i:]
	if _, rest, ok := strings.Cut(body, "\n"); ok {
		body = rest
	}
	return strings.TrimSuffix(strings.TrimRight(body, "\n"), "</session-log>")
}

// IsSummary reports whether a message is a summary that SummaryMessage
// wrote (in any style), not words of the user or the assistant.
func IsSummary(m conversation.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind != conversation.KindText {
			continue
		}
		switch {
		case m.Role == conversation.RoleUser && strings.HasPrefix(b.Text, compressedHistoryPrefix),
			m.Role == conversation.RoleAssistant && strings.HasPrefix(b.Text, summaryFirstPrefix),
			m.Role == conversation.RoleUser && strings.HasPrefix(b.Text, SessionSummaryHeading),
			strings.HasPrefix(b.Text, LogBlockOpening):
			return true
		}
	}
	return false
}

// SummaryMessage builds the message that stands for the summarized range.
// An empty summary is refused: it would erase history for nothing, and
// the formats reject empty user text.
func SummaryMessage(summary string, style SummaryStyle) (conversation.Message, error) {
	if strings.TrimSpace(summary) == "" {
		return conversation.Message{}, fmt.Errorf("summary is empty")
	}
	var role conversation.Role
	var text string
	switch style {
	case StyleCompressedHistory:
		role, text = conversation.RoleUser, compressedHistoryPrefix+summary
	case StyleSummaryFirst:
		role, text = conversation.RoleAssistant, summaryFirstPrefix+summary
	case StyleSessionSummary:
		role, text = conversation.RoleUser, summary
	default:
		return conversation.Message{}, fmt.Errorf("unknown summary style %q", style)
	}
	return conversation.Message{
		Role:   role,
		Blocks: []conversation.Block{{Kind: conversation.KindText, Text: text}},
	}, nil
}

// CompactStats reports what Compact did.
type CompactStats struct {
	// Summarized is the number of messages replaced by the summary.
	Summarized int
	// Preserved is the number of input messages kept verbatim (head
	// system messages, protected messages of the summarized range, and
	// the kept tail).
	Preserved int
}

// Compact assembles a compacted history: the system messages at the head,
// then the protected messages of the summarized range [head, split)
// verbatim and in order, then the summary message, then messages[split:]
// verbatim. When split leaves nothing to summarize the conversation is
// returned unchanged. The canonical model allows consecutive messages of
// the same role, which the summary message may create (Anthropic merges
// them; OpenAI accepts them). ReAct trajectories are refused (the ReAct
// two-layer design never drops a turn), and so is a split that would orphan a tool call.
func Compact(c conversation.Conversation, split int, summary string, style SummaryStyle, protected []bool) (conversation.Conversation, CompactStats, error) {
	if c.Format == conversation.FormatReAct {
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact a %s conversation: %w", c.Format, ErrUnsupportedFormat)
	}
	if err := checkMask(c, protected); err != nil {
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact: %w", err)
	}
	n := len(c.Messages)
	head := headEnd(c)
	if split < head || split > n {
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact: split %d outside [%d, %d] (system head ends at %d)", split, head, n, head)
	}
	switch style {
	case StyleCompressedHistory, StyleSummaryFirst, StyleSessionSummary:
	default:
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact: unknown summary style %q", style)
	}
	idx := indexTools(c)
	mask := closePairs(c, idx, protected)

	dropped := make([]bool, n)
	summarized := 0
	for i := head; i < split; i++ {
		if !mask[i] {
			dropped[i] = true
			summarized++
		}
	}
	if summarized == 0 {
		return c.Clone(), CompactStats{Preserved: n}, nil
	}
	if err := checkDropPairs(c, idx, dropped); err != nil {
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact at split %d: %w", split, err)
	}
	summaryMsg, err := SummaryMessage(summary, style)
	if err != nil {
		return conversation.Conversation{}, CompactStats{}, fmt.Errorf("compact: %w", err)
	}

	src := c.Clone()
	out := src
	out.Messages = make([]conversation.Message, 0, n-summarized+1)
	for i := range split {
		if !dropped[i] {
			out.Messages = append(out.Messages, src.Messages[i])
		}
	}
	out.Messages = append(out.Messages, summaryMsg)
	out.Messages = append(out.Messages, src.Messages[split:]...)
	return out, CompactStats{Summarized: summarized, Preserved: n - summarized}, nil
}

// checkDropPairs fails when dropping the marked messages would leave one
// half of a tool call behind.
func checkDropPairs(c conversation.Conversation, idx toolIndex, dropped []bool) error {
	for i, m := range c.Messages {
		if !dropped[i] {
			continue
		}
		for j, b := range m.Blocks {
			if b.Kind != conversation.KindToolUse && b.Kind != conversation.KindToolResult {
				continue
			}
			if o, ok := idx.other(conversation.Pos{Msg: i, Block: j}); ok && !dropped[o.Msg] {
				return fmt.Errorf("%s %q in summarized message %d has its other half in kept message %d", b.Kind, b.ToolID, i, o.Msg)
			}
		}
	}
	return nil
}
