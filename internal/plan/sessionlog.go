package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// A session's log is the ordered list of summary blocks its compactions
// appended (policy.SessionLog). A block lives in the conversation the
// agent holds, as a text block of its own; the store records the SHA-256
// of each block a run committed, so that only text this service wrote
// for this session is ever read as a block: a caller cannot make its own
// text frozen (or another session's block count) by imitating one.

// BlockDigest is the SHA-256 (hex) of a log block's text, as the store
// records it.
func BlockDigest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// LogView is where a conversation's session log is, after SeparateLog.
type LogView struct {
	// Messages are the indices of the log's blocks, one message each, in
	// order.
	Messages []int
	// Digests are the blocks' SHA-256, in the same order.
	Digests []string
	// End is the index after the last block: messages[:End] (system
	// prompt, task, pinned constraints, the log) are the stable prefix,
	// frozen for every strategy. 0 when there is no log.
	End int
	// Tokens is the blocks' size.
	Tokens int
}

// SeparateLog returns conv with every log block in a message of its
// own, and where the log is. An Anthropic conversation renders
// consecutive messages of one role as one message, so a block the
// previous compaction appended after the task comes back inside the
// task's message; separating it keeps the task the user's words alone,
// and the block a block. Rendering merges them again into the same
// bytes. Messages without a block are shared with conv, never changed.
//
// A block is a block only in the log's place (logPlaces): a recorded
// block's text (known reports true) anywhere else, such as a user
// pasting back what the agent showed them, stays the user's words and
// is compacted like any message, so it can never freeze the
// conversation before it.
func SeparateLog(conv conversation.Conversation, known func(text string) bool, counter tokens.Counter) (conversation.Conversation, LogView) {
	var view LogView
	if known == nil {
		return conv, view
	}
	places := logPlaces(conv, known)
	if places == nil {
		return conv, view
	}
	out := conv
	out.Messages = make([]conversation.Message, 0, len(conv.Messages))
	for mi, m := range conv.Messages {
		if places[mi] == nil {
			out.Messages = append(out.Messages, m)
			continue
		}
		var rest []conversation.Block
		first := true
		flush := func() {
			if len(rest) == 0 {
				return
			}
			piece := conversation.Message{Role: m.Role, Blocks: rest, Shape: m.Shape}
			if first {
				piece.Extra, first = m.Extra, false
			}
			out.Messages = append(out.Messages, piece)
			rest = nil
		}
		for bi, b := range m.Blocks {
			if !places[mi][bi] {
				rest = append(rest, b)
				continue
			}
			flush()
			piece := conversation.Message{Role: m.Role, Blocks: []conversation.Block{b}, Shape: m.Shape}
			if first {
				piece.Extra, first = m.Extra, false
			}
			view.Messages = append(view.Messages, len(out.Messages))
			view.Digests = append(view.Digests, BlockDigest(b.Text))
			if counter != nil {
				view.Tokens += counter.Count(b.Text)
			}
			out.Messages = append(out.Messages, piece)
		}
		flush()
	}
	if n := len(view.Messages); n > 0 {
		view.End = view.Messages[n-1] + 1
	}
	return out, view
}

// logPlaces marks, per message and block, the blocks of conv's log: the
// first recorded block and those that follow it without anything else
// between them (the log is one run of blocks after the task and pins, in
// order), each digest once. Whatever follows the log ends it: a recorded
// text after that is not a block. nil when conv has no log.
func logPlaces(conv conversation.Conversation, known func(string) bool) [][]bool {
	var places [][]bool
	seen := map[string]bool{}
	started := false
	for mi, m := range conv.Messages {
		for bi, b := range m.Blocks {
			isBlock := b.Kind == conversation.KindText && known(b.Text)
			if isBlock {
				d := BlockDigest(b.Text)
				isBlock = !seen[d]
				seen[d] = true
			}
			if !isBlock {
				if started {
					return places
				}
				continue
			}
			if places == nil {
				places = make([][]bool, len(conv.Messages))
			}
			if places[mi] == nil {
				places[mi] = make([]bool, len(m.Blocks))
			}
			places[mi][bi], started = true, true
		}
	}
	return places
}

// LogBudget is the size the preset's session log may reach before a
// reflection condenses it; 0 when the preset keeps no log.
func LogBudget(p policy.Preset, b Budget) int {
	if !p.History.Enabled || !p.History.Log.Enabled {
		return 0
	}
	return int(float64(b.Limit) * p.History.Log.BudgetShare)
}

// BlockTarget is the size a new log block aims at: the preset's summary
// target, at most a sixth of the log's budget, so that after a
// reflection (ReflectionTarget) several blocks fit before the next one.
func BlockTarget(p policy.Preset, b Budget) int {
	target := p.History.TargetTokens
	if budget := LogBudget(p, b); budget > 0 {
		target = min(target, max(budget/6, 50))
	}
	return target
}

var blockLabel = regexp.MustCompile(`^(\d+)(?:-(\d+))?$`)

// NextBlockLabel is the label of the block after the log's blocks: one
// more than the highest number a block's label names.
func NextBlockLabel(conv conversation.Conversation, view LogView) string {
	return strconv.Itoa(lastBlockNumber(conv, view) + 1)
}

// lastBlockNumber is the highest number the labels of the log's blocks
// name (0 without a log). A label is read from the block's frame alone
// (strategy.LogBlockLabel): whatever the body quotes is never a label.
func lastBlockNumber(conv conversation.Conversation, view LogView) int {
	n := 0
	for _, i := range view.Messages {
		for _, b := range conv.Messages[i].Blocks {
			m := blockLabel.FindStringSubmatch(strategy.LogBlockLabel(b.Text))
			for _, g := range m[min(1, len(m)):] {
				if v, err := strconv.Atoi(g); err == nil && v > n {
					n = v
				}
			}
		}
	}
	return n
}

// ReflectionTarget is the size a reflection aims at: a fifth of the
// log's budget, so that several blocks follow it before the next one.
func ReflectionTarget(p policy.Preset, b Budget) int {
	return max(LogBudget(p, b)/5, 50)
}

// ReflectionLabel is the label of a reflection of the log's blocks.
func ReflectionLabel(conv conversation.Conversation, view LogView) string {
	return fmt.Sprintf("1-%d", max(lastBlockNumber(conv, view), 1))
}

// Reflection condenses the log's blocks of conv into the body of one
// block of at most targetChars characters, without an LLM: it merges
// their sections ("## Heading" and the lines under it; a block without
// headings is one section), each line once, and while over the target
// drops the oldest line of the largest section. It only copies, so it
// cannot invent; every recovery line of the blocks stays, so whatever it
// drops is still one recover_context call away.
func Reflection(conv conversation.Conversation, view LogView, targetChars int) string {
	bodies := make([]string, 0, len(view.Messages))
	for _, i := range view.Messages {
		for _, b := range conv.Messages[i].Blocks {
			bodies = append(bodies, strategy.LogBlockBody(b.Text))
		}
	}
	return MergeSections(bodies, targetChars)
}

// FitReflection is Reflection aimed at targetTokens, measured: it
// starts at the one characters-per-token factor every summary target
// uses (llm.CharsPerToken) and, while the text counter counts is over
// the target, tries again with a fifth fewer characters. Whatever it
// drops stays one recover_context call away (Reflection keeps every
// recovery line).
func FitReflection(conv conversation.Conversation, view LogView, targetTokens int, counter tokens.Counter) string {
	chars := targetTokens * llm.CharsPerToken
	text := Reflection(conv, view, chars)
	for counter != nil && counter.Count(text) > targetTokens && chars > 200 {
		chars = chars * 4 / 5
		text = Reflection(conv, view, chars)
	}
	return text
}

// MergeSections is Reflection's merge of summary bodies, oldest first.
func MergeSections(bodies []string, targetChars int) string {
	type section struct {
		heading string
		lines   []string
	}
	var sections []*section
	byHeading := map[string]*section{}
	var recover []string
	seenRecover := map[string]bool{}
	sectionOf := func(h string) *section {
		if s, ok := byHeading[h]; ok {
			return s
		}
		s := &section{heading: h}
		byHeading[h] = s
		sections = append(sections, s)
		return s
	}
	for _, body := range bodies {
		cur := sectionOf("")
		// A section that says where the session is now is the newest
		// block's alone: an older block's pending tasks were done or
		// dropped by the time a later block was written.
		renewed := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "", strings.Contains(line, "(none found)"), strings.HasPrefix(line, "Identifiers kept by the drift check"),
				strings.HasPrefix(line, "- "+strategy.IdentifiersLabel+": "), reflectionOpening.MatchString(line):
				// Placeholders, the identifiers a block kept for its own
				// drift check, and an earlier reflection's opening line
				// (which would read as a reflection inside this one).
			case recoverLine.MatchString(line):
				if !seenRecover[line] {
					seenRecover[line] = true
					recover = append(recover, line)
				}
			case strings.HasPrefix(line, "#"):
				h := strings.TrimSpace(strings.TrimLeft(line, "#"))
				cur = sectionOf(h)
				if currentSections[h] && !renewed[h] {
					renewed[h] = true
					cur.lines = nil
				}
			default:
				if !strings.HasPrefix(line, "- ") {
					line = "- " + line
				}
				// A line seen before moves to its newest place.
				cur.lines = slices.DeleteFunc(cur.lines, func(l string) bool { return l == line })
				cur.lines = append(cur.lines, line)
			}
		}
	}
	size := 0
	for _, s := range sections {
		for _, l := range s.lines {
			size += len(l) + 1
		}
	}
	for _, l := range recover {
		size += len(l) + 1
	}
	// While over the target, the oldest line goes: of the items the
	// summaries listed as omitted first, then of the largest section. The
	// file paths a dropped line named are kept in one short list.
	var dropped []string
	for size > targetChars {
		var from *section
		// The errors go last: a session's last errors are what an agent
		// resumed after many compactions most needs to see, and another
		// section's oldest line goes first while one is left.
		for _, lastOnes := range []bool{false, true} {
			most := 0
			for _, s := range sections {
				if errorSections[s.heading] != lastOnes {
					continue
				}
				n := 0
				for _, l := range s.lines {
					n += len(l) + 1
				}
				if n > 0 && strings.Contains(strings.ToLower(s.heading), "omitted") {
					from, most = s, n
					break
				}
				if n > most {
					from, most = s, n
				}
			}
			if from != nil {
				break
			}
		}
		if from == nil {
			break
		}
		size -= len(from.lines[0]) + 1
		dropped = append(dropped, from.lines[0])
		from.lines = from.lines[1:]
	}
	kept := map[string]bool{}
	for _, s := range sections {
		for _, l := range s.lines {
			for _, id := range drift.Identifiers(l) {
				if id.Kind == drift.KindPath {
					kept[id.Value] = true
				}
			}
		}
	}
	// The paths of the dropped lines, as many of the newest as the room
	// the target leaves takes; the rest are counted. Unbounded, the list
	// outgrew the lines it stood for.
	var paths []string
	for _, l := range dropped {
		for _, id := range drift.Identifiers(l) {
			if id.Kind == drift.KindPath && !kept[id.Value] && !strings.ContainsAny(id.Value, "\\\"'") {
				kept[id.Value] = true
				paths = append(paths, id.Value)
			}
		}
	}
	room, from := targetChars-size, len(paths)
	for from > 0 && room >= len(paths[from-1])+2 {
		from--
		room -= len(paths[from]) + 2
	}
	more := from
	paths = paths[from:]

	var sb strings.Builder
	fmt.Fprintf(&sb, "Reflection of %d session log blocks: their sections merged, the oldest lines dropped to fit; each range they covered is recoverable with the ids below.\n", len(bodies))
	for _, s := range sections {
		if len(s.lines) == 0 {
			continue
		}
		if s.heading != "" {
			sb.WriteString("\n## " + s.heading + "\n")
		} else {
			sb.WriteString("\n")
		}
		for _, l := range s.lines {
			sb.WriteString(l + "\n")
		}
	}
	if len(paths) > 0 || more > 0 {
		sb.WriteString("\n## Files named in the condensed lines\n- " + strings.Join(paths, ", "))
		if more > 0 {
			fmt.Fprintf(&sb, "%s%d more, in the recoverable ranges", map[bool]string{true: "; ", false: ""}[len(paths) > 0], more)
		}
		sb.WriteString("\n")
	}
	if len(recover) > 0 {
		sb.WriteString("\n" + strings.Join(recover, "\n") + "\n")
	}
	return sb.String()
}

// reflectionOpening matches the first line of a reflection's body
// (MergeSections writes it).
var reflectionOpening = regexp.MustCompile(`^(- )?Reflection of \d+ session log blocks:`)

// currentSections are the headings, of every summary prompt, that say
// where the session stands now rather than what happened: a reflection
// keeps only the newest block's.
var currentSections = map[string]bool{
	"Current Status": true, "Pending Tasks": true, // history prompt
	"Current Progress": true, "Next Steps": true, // session prompt
	"Current State": true, "Next Step": true, // structured prompt
}

// errorSections are the headings, of every summary prompt, under which a
// block writes the errors it saw: a reflection condenses them last.
var errorSections = map[string]bool{
	"Debugging & Issues":     true, // history prompt
	"Critical Facts":         true, // session prompt
	"Errors and Resolutions": true, // structured prompt
}

// recoverLine matches the line each block ends with (recoverid.SummaryLine).
var recoverLine = regexp.MustCompile(`(?m)^Recover the summarized messages? [^\n]* id: [0-9A-Za-z_.:-]+$`)

// Reflect replaces the log's blocks of conv (as SeparateLog returned it,
// with view) by msg, the reflection, at the first block's place. It
// returns the new conversation and how many messages fewer it has.
func Reflect(conv conversation.Conversation, view LogView, msg conversation.Message) (conversation.Conversation, int, error) {
	if len(view.Messages) == 0 {
		return conv, 0, fmt.Errorf("reflect: the conversation has no session log")
	}
	drop := make(map[int]bool, len(view.Messages))
	for _, i := range view.Messages {
		drop[i] = true
	}
	first := view.Messages[0]
	out := conv
	out.Messages = make([]conversation.Message, 0, len(conv.Messages)-len(view.Messages)+1)
	for i, m := range conv.Messages {
		switch {
		case i == first:
			out.Messages = append(out.Messages, msg)
		case !drop[i]:
			out.Messages = append(out.Messages, m)
		}
	}
	return out, len(view.Messages) - 1, nil
}

// StablePrefix is how much of out (a run's output) is an unchanged prefix
// of in (its request): the leading messages equal in both, and the
// leading blocks of the first message that differs, in the budget's unit.
// Both are compared as rendered (same-role runs of an Anthropic
// conversation merged), which is what a provider's prompt cache sees.
func StablePrefix(in, out conversation.Conversation, b Budget) int {
	in, out = in.MergeSameRole(), out.MergeSameRole()
	n := 0
	for i := 0; i < len(out.Messages) && i < len(in.Messages); i++ {
		a, o := in.Messages[i], out.Messages[i]
		if a.Role != o.Role {
			return n
		}
		j := 0
		for j < len(o.Blocks) && j < len(a.Blocks) && sameBlock(a.Blocks[j], o.Blocks[j]) {
			j++
		}
		if j == len(o.Blocks) && j == len(a.Blocks) {
			n += tokens.Message(b.Counter, o)
			continue
		}
		for _, blk := range o.Blocks[:j] {
			n += b.Counter.Count(blk.Text) + b.Counter.Count(blk.Input)
		}
		return n
	}
	if len(out.Messages) <= len(in.Messages) {
		// Every message of out is the request's: all of it stays cached.
		return b.Measure(out)
	}
	return n
}

func sameBlock(a, b conversation.Block) bool {
	return a.Kind == b.Kind && a.Text == b.Text && a.ToolID == b.ToolID && a.ToolName == b.ToolName &&
		a.Input == b.Input && a.IsError == b.IsError
}

// Frozen is the history protection of a conversation whose log is view:
// the preset's, with everything up to the log's end frozen when the
// preset keeps a session log (without one, earlier summaries are
// summarized again, as the source designs do).
func Frozen(p policy.Preset, view LogView) strategy.Protection {
	pr := HistoryProtection(p)
	if p.History.Enabled && p.History.Log.Enabled {
		pr.Frozen = view.End
	}
	return pr
}
