package audit

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Actions of a Change.
const (
	ActionKept       = "kept"
	ActionReplaced   = "replaced"
	ActionRemoved    = "removed"
	ActionSummarized = "summarized"
	ActionAdded      = "added"
)

// Change says what a run did to one message.
//
// Positions are those of the caller's documents (see
// conversation.CallerIndexes): elements of messages[] (of the turn list
// for a ReAct trajectory, whose two messages per turn share the turn's
// position), not of the canonical model. The Anthropic system prompt is
// the top-level system field, in no position: its index is -1 and At (or
// OutAt) says "system".
type Change struct {
	// Index is the message's position in the original, -1 for a message
	// the run added or one outside messages[].
	Index int `json:"index"`
	// OutIndex is its position in the output, -1 for a message the run
	// dropped or one outside messages[].
	OutIndex int `json:"out_index"`
	// At and OutAt name the same places for people: the position as a
	// number, "system" for a system prompt outside messages[], empty when
	// the message is not in that document.
	At     string `json:"at,omitempty"`
	OutAt  string `json:"out_at,omitempty"`
	Role   string `json:"role"`
	Action string `json:"action"`
	// Before and After are the message's characters (text, tool inputs and
	// results) in the original and in the output.
	Before int    `json:"before"`
	After  int    `json:"after"`
	Note   string `json:"note,omitempty"`
}

// Diff is what a run removed, replaced, summarized or added, message by
// message, in output order.
type Diff struct {
	RunID      string   `json:"run_id"`
	Changes    []Change `json:"changes"`
	Removed    int      `json:"removed"`
	Summarized int      `json:"summarized"`
	Replaced   int      `json:"replaced"`
	Kept       int      `json:"kept"`
	Added      int      `json:"added"`
}

// Diff compares a run's archived original with its output. Messages are
// aligned as a longest common subsequence where two messages correspond
// when they are identical, share a tool call id, or have the same role and
// the same non-tool text (a message whose tool blocks were pruned). A
// dropped message counts as summarized when the run added a message (its
// summary), as removed otherwise.
func (s *Service) Diff(ctx context.Context, tenant, runID string) (Diff, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return Diff{}, err
	}
	orig, err := s.archive(ctx, r)
	if err != nil {
		return Diff{}, err
	}
	out, err := s.output(ctx, r)
	if err != nil {
		return Diff{}, err
	}
	d, err := DiffConversations(orig, out)
	if err != nil {
		return Diff{}, fmt.Errorf("diff run %s: %w", r.ID, err)
	}
	d.RunID = r.ID
	return d, nil
}

// DiffConversations compares two serialized conversations in any supported
// format (see Service.Diff). Changes give positions in the two documents'
// messages[] (see Change).
func DiffConversations(before, after []byte) (Diff, error) {
	a, err := conversation.ParseAny(before)
	if err != nil {
		return Diff{}, fmt.Errorf("parse original: %w", err)
	}
	b, err := conversation.ParseAny(after)
	if err != nil {
		return Diff{}, fmt.Errorf("parse output: %w", err)
	}
	return diffMessages(a, b), nil
}

// diffMessages aligns the canonical messages of the two conversations and
// reports each change at the caller's positions.
func diffMessages(ca, cb conversation.Conversation) Diff {
	a, b := ca.Messages, cb.Messages
	pa, pb := ca.CallerIndexes(), cb.CallerIndexes()
	pairs := align(a, b)
	dropped := ActionRemoved
	if len(b)-len(pairs) > 0 {
		dropped = ActionSummarized
	}
	var d Diff
	i, j := 0, 0
	emitGap := func(toI, toJ int) {
		for ; i < toI; i++ {
			d.Changes = append(d.Changes, Change{Index: pa[i], OutIndex: -1, At: at(pa[i]), Role: string(a[i].Role),
				Action: dropped, Before: chars(a[i])})
		}
		for ; j < toJ; j++ {
			d.Changes = append(d.Changes, Change{Index: -1, OutIndex: pb[j], OutAt: at(pb[j]), Role: string(b[j].Role),
				Action: ActionAdded, After: chars(b[j]), Note: firstLine(b[j], 80)})
		}
	}
	for _, p := range pairs {
		emitGap(p[0], p[1])
		c := Change{Index: pa[i], OutIndex: pb[j], At: at(pa[i]), OutAt: at(pb[j]), Role: string(a[i].Role),
			Before: chars(a[i]), After: chars(b[j])}
		if identical(a[i], b[j]) {
			c.Action = ActionKept
		} else {
			c.Action, c.Note = ActionReplaced, describe(a[i], b[j])
		}
		d.Changes = append(d.Changes, c)
		i, j = i+1, j+1
	}
	emitGap(len(a), len(b))
	for _, c := range d.Changes {
		switch c.Action {
		case ActionKept:
			d.Kept++
		case ActionReplaced:
			d.Replaced++
		case ActionRemoved:
			d.Removed++
		case ActionSummarized:
			d.Summarized++
		case ActionAdded:
			d.Added++
		}
	}
	return d
}

// at names a caller position for people: the number, or "system" for a
// message with none (the Anthropic system prompt, a top-level field).
func at(pos int) string {
	if pos < 0 {
		return "system"
	}
	return strconv.Itoa(pos)
}

// maxLCSCells bounds the alignment table; beyond it a greedy alignment is
// used (conversations of thousands of changed messages in a row).
const maxLCSCells = 16 << 20

// align returns the pairs (i, j) of corresponding messages, increasing in
// both. Common prefix and suffix are matched first, so the table only
// covers the changed middle.
func align(a, b []conversation.Message) [][2]int {
	ka, kb := keysOf(a), keysOf(b)
	match := func(i, j int) bool { return related(ka[i], kb[j]) || identical(a[i], b[j]) }
	var head, tail [][2]int
	lo := 0
	for lo < len(a) && lo < len(b) && identical(a[lo], b[lo]) {
		head = append(head, [2]int{lo, lo})
		lo++
	}
	ha, hb := len(a), len(b)
	for ha > lo && hb > lo && identical(a[ha-1], b[hb-1]) {
		ha, hb = ha-1, hb-1
		tail = append([][2]int{{ha, hb}}, tail...)
	}
	n, m := ha-lo, hb-lo
	var mid [][2]int
	if n > 0 && m > 0 && (n+1)*(m+1) <= maxLCSCells {
		// t[x][y] is the LCS length of a[lo+x:ha] and b[lo+y:hb].
		t := make([][]int32, n+1)
		for x := range t {
			t[x] = make([]int32, m+1)
		}
		for x := n - 1; x >= 0; x-- {
			for y := m - 1; y >= 0; y-- {
				switch {
				case match(lo+x, lo+y):
					t[x][y] = t[x+1][y+1] + 1
				case t[x+1][y] >= t[x][y+1]:
					t[x][y] = t[x+1][y]
				default:
					t[x][y] = t[x][y+1]
				}
			}
		}
		for x, y := 0, 0; x < n && y < m; {
			switch {
			case match(lo+x, lo+y):
				mid = append(mid, [2]int{lo + x, lo + y})
				x, y = x+1, y+1
			case t[x+1][y] >= t[x][y+1]:
				x++
			default:
				y++
			}
		}
	} else {
		y := lo
		for x := lo; x < ha && y < hb; x++ {
			for k := y; k < hb; k++ {
				if match(x, k) {
					mid = append(mid, [2]int{x, k})
					y = k + 1
					break
				}
			}
		}
	}
	out := append(head, mid...)
	return append(out, tail...)
}

// identical compares two messages field by field; an empty and a missing
// Extra are the same.
func identical(a, b conversation.Message) bool {
	if a.Role != b.Role || a.Shape != b.Shape || len(a.Blocks) != len(b.Blocks) || !sameExtra(a.Extra, b.Extra) {
		return false
	}
	for k := range a.Blocks {
		x, y := a.Blocks[k], b.Blocks[k]
		if x.Kind != y.Kind || x.Text != y.Text || x.ToolID != y.ToolID || x.ToolName != y.ToolName ||
			x.Input != y.Input || x.IsError != y.IsError || x.Shape != y.Shape || !sameExtra(x.Extra, y.Extra) {
			return false
		}
	}
	return true
}

func sameExtra[V ~[]byte](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// msgKey is what related compares, computed once per message.
type msgKey struct {
	role    conversation.Role
	toolIDs []string
	text    string // text and thinking, without tool blocks
}

func keysOf(msgs []conversation.Message) []msgKey {
	out := make([]msgKey, len(msgs))
	for i, m := range msgs {
		k := msgKey{role: m.Role}
		var sb strings.Builder
		for _, blk := range m.Blocks {
			if blk.ToolID != "" {
				k.toolIDs = append(k.toolIDs, blk.ToolID)
			}
			if blk.Kind == conversation.KindText || blk.Kind == conversation.KindThinking {
				sb.WriteString(blk.Text)
				sb.WriteByte(0)
			}
		}
		k.text = sb.String()
		out[i] = k
	}
	return out
}

// related reports the same message changed in place: same role, and a
// shared tool call id or the same non-empty non-tool text.
func related(a, b msgKey) bool {
	if a.role != b.role {
		return false
	}
	for _, x := range a.toolIDs {
		for _, y := range b.toolIDs {
			if x == y {
				return true
			}
		}
	}
	return a.text != "" && a.text == b.text
}

// chars counts a message's characters: texts, tool inputs and results.
func chars(m conversation.Message) int {
	n := 0
	for _, blk := range m.Blocks {
		n += utf8.RuneCountInString(blk.Text) + utf8.RuneCountInString(blk.Input)
	}
	return n
}

// offloadRef finds an offload reference's id in a replaced text.
var offloadRef = regexp.MustCompile(`Tool result is at: ([0-9a-f]{64})\s*$`)

// maxNotes bounds the block notes of one changed message.
const maxNotes = 4

// describe says which blocks of a changed message changed and how.
func describe(a, b conversation.Message) string {
	var notes []string
	byID := map[string]conversation.Block{}
	var bText []conversation.Block
	for _, blk := range b.Blocks {
		if blk.ToolID != "" {
			byID[string(blk.Kind)+"\x00"+blk.ToolID] = blk
		} else {
			bText = append(bText, blk)
		}
	}
	t := 0
	for _, x := range a.Blocks {
		if x.ToolID == "" {
			if t < len(bText) {
				y := bText[t]
				t++
				if x.Text != y.Text {
					notes = append(notes, fmt.Sprintf("%s %d → %d chars", x.Kind, utf8.RuneCountInString(x.Text), utf8.RuneCountInString(y.Text)))
				}
			} else {
				notes = append(notes, fmt.Sprintf("%s removed", x.Kind))
			}
			continue
		}
		label := fmt.Sprintf("%s %s", x.Kind, x.ToolID)
		if x.ToolName != "" {
			label += " (" + x.ToolName + ")"
		}
		y, ok := byID[string(x.Kind)+"\x00"+x.ToolID]
		switch {
		case !ok:
			notes = append(notes, label+" removed")
		case x.Input != y.Input:
			notes = append(notes, fmt.Sprintf("%s input %d → %d chars", label, utf8.RuneCountInString(x.Input), utf8.RuneCountInString(y.Input)))
		case x.Text != y.Text:
			note := fmt.Sprintf("%s %d → %d chars", label, utf8.RuneCountInString(x.Text), utf8.RuneCountInString(y.Text))
			if m := offloadRef.FindStringSubmatch(y.Text); m != nil && !strings.Contains(x.Text, m[1]) {
				note += ", offloaded as " + m[1]
			}
			notes = append(notes, note)
		}
	}
	for ; t < len(bText); t++ {
		notes = append(notes, fmt.Sprintf("%s added", bText[t].Kind))
	}
	if len(notes) == 0 {
		return "metadata changed"
	}
	if len(notes) > maxNotes {
		notes = append(notes[:maxNotes], fmt.Sprintf("and %d more", len(notes)-maxNotes))
	}
	return strings.Join(notes, "; ")
}

// firstLine is the start of a message's first text, for naming an added
// message.
func firstLine(m conversation.Message, max int) string {
	for _, blk := range m.Blocks {
		text := strings.TrimSpace(blk.Text)
		if text == "" {
			continue
		}
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[:i]
		}
		if utf8.RuneCountInString(text) > max {
			text = string([]rune(text)[:max]) + "…"
		}
		return text
	}
	return ""
}
