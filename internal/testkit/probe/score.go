package probe

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// Tally counts one category of probes.
type Tally struct {
	// Total probes of the category.
	Total int `json:"total"`
	// Kept are in the output (whitespace aside).
	Kept int `json:"kept"`
	// Recovered are not in the output but in what the recovery tool
	// returns for an id the output names.
	Recovered int `json:"recovered"`
}

// Lost is what neither the output nor a pointer in it gives back.
func (t Tally) Lost() int { return t.Total - t.Kept - t.Recovered }

// KeptShare is Kept/Total, 1 when there is nothing to keep.
func (t Tally) KeptShare() float64 {
	if t.Total == 0 {
		return 1
	}
	return float64(t.Kept) / float64(t.Total)
}

// Score is what one compacted output keeps of a Set.
type Score struct {
	// TaskVerbatim: the task statement is byte-identical in one text
	// block of the output.
	TaskVerbatim bool `json:"task_verbatim"`
	// PinnedVerbatim counts pinned messages byte-identical in the output.
	PinnedVerbatim int   `json:"pinned_verbatim"`
	Pinned         int   `json:"pinned"`
	Artifacts      Tally `json:"artifacts"`
	Errors         Tally `json:"errors"`
	Commands       Tally `json:"commands"`
	Plan           Tally `json:"plan"`
	Current        Tally `json:"current"`
	// Lost lists the probes lost without a pointer, "category: value".
	Lost []string `json:"lost,omitempty"`
	// IDs are the recovery ids the output names.
	IDs int `json:"ids"`
}

// LostCount is how many probes were lost without a pointer.
func (s Score) LostCount() int { return len(s.Lost) }

// reID is a recovery id as references, summaries and handoffs write it:
// the SHA-256 of the offloaded content, or of a run's archived original
// followed by the messages (".m3-57") or the block (".m12b1") it names.
var reID = regexp.MustCompile(`\b[0-9a-f]{64}(?:\.m[0-9]+(?:-[0-9]+|b[0-9]+)?)?\b`)

// IDs are the distinct recovery ids an output names, in order.
func IDs(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range reID.FindAllString(text, -1) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Text is everything an agent reads in a conversation: text, thinking,
// tool inputs (and the command in them) and results.
func Text(c conversation.Conversation) string {
	var sb strings.Builder
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			sb.WriteString(b.Text)
			sb.WriteByte('\n')
			if b.Input != "" {
				sb.WriteString(b.Input)
				sb.WriteByte('\n')
				sb.WriteString(Command(b.Input))
				sb.WriteByte('\n')
				// The input's strings as the model reads them, escapes
				// undone (a reference block inside a JSON value).
				var args map[string]any
				if json.Unmarshal([]byte(b.Input), &args) == nil {
					for _, k := range slices.Sorted(maps.Keys(args)) {
						if v, ok := args[k].(string); ok {
							sb.WriteString(v)
							sb.WriteByte('\n')
						}
					}
				}
			}
		}
	}
	return sb.String()
}

// Measure scores an output against the probes of its original. recover
// returns what the recovery tool answers for an id (an error counts as
// nothing recovered); nil means no recovery tool.
func Measure(set Set, out conversation.Conversation, recover func(id string) (string, error)) Score {
	var s Score
	text := Text(out)
	for _, m := range out.Messages {
		for _, b := range m.Blocks {
			if b.Kind != conversation.KindText {
				continue
			}
			if set.Task != "" && strings.Contains(b.Text, set.Task) {
				s.TaskVerbatim = true
			}
		}
	}
	for _, p := range set.Pinned {
		s.Pinned++
		if strings.Contains(text, p) {
			s.PinnedVerbatim++
		}
	}
	hay := normalize(text)
	var recovered strings.Builder
	ids := IDs(text)
	s.IDs = len(ids)
	if recover != nil {
		for _, id := range ids {
			if r, err := recover(id); err == nil {
				recovered.WriteString(r)
				recovered.WriteByte('\n')
			}
		}
	}
	back := normalize(recovered.String())
	tally := func(name string, probes []string) Tally {
		var t Tally
		for _, p := range probes {
			if p == "" {
				continue
			}
			t.Total++
			n := normalize(p)
			switch {
			case strings.Contains(hay, n):
				t.Kept++
			case back != "" && strings.Contains(back, n):
				t.Recovered++
			default:
				s.Lost = append(s.Lost, fmt.Sprintf("%s: %s", name, p))
			}
		}
		return t
	}
	s.Artifacts = tally("artifact", set.Artifacts)
	s.Errors = tally("error", set.Errors)
	s.Commands = tally("command", set.Commands)
	s.Plan = tally("plan", []string{set.Plan})
	s.Current = tally("current", []string{set.Current})
	if set.Task != "" && !s.TaskVerbatim {
		s.Lost = append([]string{"task: " + firstLine(set.Task)}, s.Lost...)
	}
	return s
}

// normalize collapses every run of white space to one space, so that a
// summary that re-wraps a line still counts as keeping it.
func normalize(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
