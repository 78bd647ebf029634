// Package recoverid names what a cut took out of a conversation, so that
// the agent can read it back with the recover_context tool: a range of
// messages, or one block, of a run's archived original.
//
// An id is "<sha>.m<i>-<j>" (messages i to j, inclusive) or
// "<sha>.m<i>b<k>" (block k of message i), where sha is the SHA-256 of
// the archived original (runs.archive_sha256) and i, j, k are positions
// in that original as conversation.ParseAny gives it: the canonical
// message list, 0-based (for OpenAI the index in messages[]; for
// Anthropic the top-level system prompt is message 0 when there is one,
// and each element of messages[] follows; a ReAct turn is two messages,
// the thought and action, then the result). Blocks are the canonical
// blocks of the message, 0-based. Numbers are decimal without leading
// zeros. An offload id (a bare SHA-256) is no archive id.
//
// An id is a name, never a key: the HTTP API resolves it through the
// store's records of the runs of the caller's tenant and session (see
// store.SessionArchive).
package recoverid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Tool is the tool an agent calls with an id (strategy.RecoverTool).
const Tool = "recover_context"

// maxIndexDigits bounds each number of an id: 9,999,999 messages or
// blocks is far beyond any conversation.
const maxIndexDigits = 7

// ID names a range of messages, or one block, of an archived original.
type ID struct {
	// Archive is the SHA-256 of the archived original, lowercase hex.
	Archive string
	// From and To are the first and last message, inclusive; equal for a
	// block id.
	From, To int
	// Block is the block of message From, or -1 for a range.
	Block int
}

// Range is the id of messages from to to (inclusive) of the archive.
func Range(archive string, from, to int) ID {
	return ID{Archive: archive, From: from, To: to, Block: -1}
}

// BlockOf is the id of block k of message msg of the archive.
func BlockOf(archive string, msg, k int) ID {
	return ID{Archive: archive, From: msg, To: msg, Block: k}
}

// IsBlock reports whether id names one block.
func (id ID) IsBlock() bool { return id.Block >= 0 }

// String formats the id as Parse reads it.
func (id ID) String() string {
	if id.IsBlock() {
		return fmt.Sprintf("%s.m%db%d", id.Archive, id.From, id.Block)
	}
	return fmt.Sprintf("%s.m%d-%d", id.Archive, id.From, id.To)
}

// ErrMalformed is what Parse returns for anything that is not an id.
var ErrMalformed = errors.New("not a recover id")

// Parse reads an id strictly: "<64 lowercase hex>.m<i>-<j>" with i <= j,
// or "<64 lowercase hex>.m<i>b<k>", decimal numbers without sign, spaces
// or leading zeros, at most 7 digits each.
func Parse(s string) (ID, error) {
	bad := func(why string) (ID, error) {
		return ID{}, fmt.Errorf("%w: %.100q: %s", ErrMalformed, s, why)
	}
	sha, rest, ok := strings.Cut(s, ".")
	if !ok {
		return bad("no \".m\" after the archive's SHA-256")
	}
	if !isSHA256(sha) {
		return bad("the archive's SHA-256 is not 64 lowercase hex characters")
	}
	rest, ok = strings.CutPrefix(rest, "m")
	if !ok {
		return bad("no \"m\" after the dot")
	}
	first, n := number(rest)
	if n == 0 {
		return bad("no message number")
	}
	rest = rest[n:]
	switch {
	case strings.HasPrefix(rest, "-"):
		last, n := number(rest[1:])
		if n == 0 || n != len(rest)-1 {
			return bad("the range's end is not a number")
		}
		if last < first {
			return bad("the range ends before it starts")
		}
		return Range(sha, first, last), nil
	case strings.HasPrefix(rest, "b"):
		k, n := number(rest[1:])
		if n == 0 || n != len(rest)-1 {
			return bad("the block is not a number")
		}
		return BlockOf(sha, first, k), nil
	}
	return bad("a message number is followed by \"-<last>\" or \"b<block>\"")
}

// number reads a decimal number without leading zeros at the start of s:
// its value and how many bytes it took (0: none, or a malformed one).
func number(s string) (int, int) {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 || n > maxIndexDigits || (n > 1 && s[0] == '0') {
		return 0, 0
	}
	v, err := strconv.Atoi(s[:n])
	if err != nil {
		return 0, 0
	}
	return v, n
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrOutOfRange is what Text returns for an id past the original's
// messages or blocks.
var ErrOutOfRange = errors.New("not in the archived conversation")

// Text is what id names in the archived original c: for a block, its text
// verbatim (a tool result's text, a call's input, a text or thinking
// block's text); for a range, the messages as a transcript (see
// Transcript).
func Text(c conversation.Conversation, id ID) (string, error) {
	if id.From < 0 || id.To >= len(c.Messages) || id.From > id.To {
		return "", fmt.Errorf("%w: messages %d-%d of %d", ErrOutOfRange, id.From, id.To, len(c.Messages))
	}
	if !id.IsBlock() {
		return Transcript(c, id.From, id.To), nil
	}
	m := c.Messages[id.From]
	if id.Block >= len(m.Blocks) {
		return "", fmt.Errorf("%w: block %d of message %d, which has %d", ErrOutOfRange, id.Block, id.From, len(m.Blocks))
	}
	b := m.Blocks[id.Block]
	switch b.Kind {
	case conversation.KindToolUse:
		return b.Input, nil
	case conversation.KindToolResult, conversation.KindText, conversation.KindThinking:
		return b.Text, nil
	}
	return "", fmt.Errorf("%w: block %d of message %d is %s, which has no text", ErrOutOfRange, id.Block, id.From, b.Kind)
}

// Transcript renders messages from to to (inclusive) of c as plain text,
// the way the summarizer reads a history (plan.Transcript), each block
// under a header naming its message: "[message 3 user]", "[message 4
// assistant tool call bash]", "[message 5 tool result bash]" (or "tool
// error"), "[message 4 assistant thinking]"; a block without text (an
// image) is named only. Every text, input and result is written verbatim.
// The same conversation always gives the same bytes.
func Transcript(c conversation.Conversation, from, to int) string {
	names := map[string]string{}
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindToolUse && b.ToolID != "" {
				if _, ok := names[b.ToolID]; !ok {
					names[b.ToolID] = b.ToolName
				}
			}
		}
	}
	var sb strings.Builder
	for i := max(from, 0); i <= to && i < len(c.Messages); i++ {
		m := c.Messages[i]
		for _, b := range m.Blocks {
			switch b.Kind {
			case conversation.KindText:
				fmt.Fprintf(&sb, "[message %d %s]\n%s\n\n", i, m.Role, b.Text)
			case conversation.KindThinking:
				fmt.Fprintf(&sb, "[message %d %s thinking]\n%s\n\n", i, m.Role, b.Text)
			case conversation.KindToolUse:
				fmt.Fprintf(&sb, "[message %d %s tool call %s]\n%s\n\n", i, m.Role, b.ToolName, b.Input)
			case conversation.KindToolResult:
				label := "tool result"
				if b.IsError {
					label = "tool error"
				}
				name := b.ToolName
				if name == "" {
					name = names[b.ToolID]
				}
				fmt.Fprintf(&sb, "[message %d %s %s]\n%s\n\n", i, label, name, b.Text)
			default:
				fmt.Fprintf(&sb, "[message %d %s %s: not text]\n\n", i, m.Role, b.Kind)
			}
		}
	}
	return sb.String()
}

// SummaryLine is the line a history summary ends with: which messages of
// the original it replaced and the id that gives them back.
func SummaryLine(id ID) string {
	what := fmt.Sprintf("messages %d–%d", id.From, id.To)
	if id.From == id.To {
		what = fmt.Sprintf("message %d", id.From)
	}
	return fmt.Sprintf("Recover the summarized %s with the %s tool, id: %s", what, Tool, id)
}

// ResultLine is the line a rewritten tool result (summarized or reduced)
// ends with: the id that gives the original result back.
func ResultLine(id string) string {
	return fmt.Sprintf("[Recover the original result with the %s tool, id: %s]", Tool, id)
}
