package offline

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The layouts of the structured summary: which parts of the digest go
// under which heading of each prompt, and how a tight target trims them.

// The parts of the digest, as the layouts name them.
const (
	partTask = iota
	partConstraints
	partFiles
	partCommands
	partErrors
	partDecisions
	partState
	partNext
	partRecent // the last calls' inputs, as the trajectory check reads them
	partRefs   // the source's recent identifiers no other part writes
	numParts
)

// part is one list of the digest as it is trimmed to the budget: the items
// kept are items[lo:hi], and a note line such as "(3 more paths)" or "(40
// earlier commands: grep ×12, …)" stands for the others, so a reader
// knows that something was left out for length and what.
type part struct {
	items   []string
	rows    []string // the artifact table's rows (files only)
	labels  []string // per item, counted in the note (command kinds, error status)
	lo, hi  int
	dropOld bool // trim the oldest items first (else the last)
	note    func(p *part) string
	counts  map[string]int // labels of the dropped items
	// quiet drops the note of a part left with no item: in a summary
	// whose target is a few hundred characters, a note per part would
	// take the room of the facts themselves.
	quiet bool
	// hidden counts items left out before the budget was applied (the
	// file list's named-only paths past maxFiles); the note counts them.
	hidden int
	// actedOn counts the leading items of the file list the agent read,
	// wrote or ran (the rest it only named).
	actedOn int
	// joined, when set, writes the items on one line after this label
	// ("- Also named recently: a; b; c"), not one bullet each: they are
	// identifiers kept for the reader's search, not statements.
	joined string
}

func (p *part) dropped() int { return len(p.items) - (p.hi - p.lo) + p.hidden }

// drop removes one item; the caller checks that one is left.
func (p *part) drop() {
	if !p.dropOld {
		p.hi--
		return
	}
	if p.lo < len(p.labels) {
		p.counts[p.labels[p.lo]]++
	}
	p.lo++
}

// noteLine is the line standing for the dropped items, "" when none is.
func (p *part) noteLine(table bool) string {
	if p.dropped() == 0 || p.note == nil || (p.quiet && p.hi == p.lo) {
		return ""
	}
	text := p.note(p)
	if table {
		return "| (" + text + ") | | |\n"
	}
	return "- (" + text + ")\n"
}

// line is an item as the section writes it.
func (p *part) line(i int, table bool) string {
	if table && p.rows != nil {
		return p.rows[i]
	}
	if p.joined != "" && joinable(p.items[i]) {
		return p.items[i] + "; "
	}
	return "- " + p.items[i] + "\n"
}

// joinable reports whether an item can share a joined line: one with a
// quote or a semicolon keeps a line of its own, so that no quotation
// seems to run from one item into the next.
func joinable(item string) bool { return !strings.ContainsAny(item, "\"'`;«»") }

// write writes the items kept and the note.
func (p *part) write(b *strings.Builder, table bool) {
	var joined []string
	for i := p.lo; i < p.hi; i++ {
		if p.joined != "" && joinable(p.items[i]) {
			joined = append(joined, p.items[i])
		}
	}
	if len(joined) > 0 {
		b.WriteString("- " + p.joined + ": " + strings.Join(joined, "; ") + "\n")
	}
	for i := p.lo; i < p.hi; i++ {
		if p.joined == "" || !joinable(p.items[i]) {
			b.WriteString(p.line(i, table))
		}
	}
	b.WriteString(p.noteLine(table))
}

// section is one heading of a layout and the parts written under it.
type section struct {
	heading string
	parts   []int
	table   bool   // write the files as the three-tier session summary's artifact table
	fixed   string // a body written as is (the recovery references)
}

// minBodyRunes is the least room the bodies get, in code points, however
// small the target: under it a summary is headings and notes, no facts
// (a session log block of a short conversation can be asked for 100
// tokens). A summary may exceed a tiny target by this much.
const minBodyRunes = 800

// quietBudget is the body budget, in code points, under which a part
// trimmed to nothing leaves no note (see part.quiet).
const quietBudget = 1500

const artifactHeader = "| Artifact | Path | Status |\n|----------|------|--------|\n"

func historyLayout() []section {
	return []section{
		{heading: HistorySections[0], parts: []int{partCommands, partRefs}},
		{heading: HistorySections[1], parts: []int{partTask}},
		{heading: HistorySections[2], parts: []int{partFiles}},
		{heading: HistorySections[3], parts: []int{partErrors}},
		{heading: HistorySections[4], parts: []int{partState, partRecent}},
		{heading: HistorySections[5], parts: []int{partNext}},
		{heading: HistorySections[6], parts: []int{partConstraints}},
		{heading: HistorySections[7], parts: []int{partDecisions}},
	}
}

func sessionLayout(archiveRef string) []section {
	return []section{
		{heading: SessionSections[0], parts: []int{partTask}},
		{heading: SessionSections[1], parts: []int{partFiles}, table: true},
		{heading: SessionSections[2], parts: []int{partDecisions}},
		{heading: SessionSections[3], parts: []int{partState, partRecent, partCommands}},
		{heading: SessionSections[4], parts: []int{partErrors, partConstraints, partRefs}},
		{heading: SessionSections[5], parts: []int{partNext}},
		{heading: SessionSections[6], fixed: "- Full conversation: " + archiveRef + "\n"},
	}
}

func structuredLayout() []section {
	out := make([]section, len(StructuredSections))
	for i, h := range StructuredSections {
		out[i] = section{heading: h, parts: []int{i}} // the parts are in the headings' order
	}
	out[partCommands].parts = append(out[partCommands].parts, partRefs)
	out[partState].parts = append(out[partState].parts, partRecent)
	return out
}

// keptTaskLines is what the task's opening keeps before the last errors
// give way: the task is the user's first message, which the
// conversation keeps whole.
const keptTaskLines = 3

// floorActedOn is the file list's floor before the last errors give way:
// every path the agent read, wrote or ran stays, the ones it only named
// (listed last) may go first.
const floorActedOn = -1

// keptDecisions is how many of the agent's newest statements of cause,
// plan and decision survive the first trimming phase: they are its own
// reasoning, which no other part carries.
const keptDecisions = 4

// trimPhases is the order in which parts give up items when the summary
// is over its budget, each down to a floor: first the older decisions
// (the newest keptDecisions stay), the commands before the last
// verbatimCommands, the current state and the next step to one line, the
// constraints, the task's opening past keptTaskLines, the paths the agent
// only named, and the errors but the last five (resolved ones first, see
// parts); then, if that is not enough, the rest of the commands, the
// state, the decisions and the errors, the oldest of the recent calls,
// the kept identifiers, the next step (a question the user has not
// answered comes first in it), the task's opening and, last of all, the
// last two calls and the file list (the newest call alone may be a bare
// expression). The last commands and errors outlast the constraints
// because a resumed agent needs them to go on, while the constraints are
// the user's words that the conversation keeps whole in its first
// message; the recent calls and identifiers go late because they are
// what the drift check of this summary looks for.
var trimPhases = []struct{ part, floor int }{
	{partDecisions, keptDecisions}, {partCommands, verbatimCommands}, {partState, 1}, {partNext, 1}, {partConstraints, 0},
	{partTask, keptTaskLines}, {partFiles, floorActedOn}, {partErrors, verbatimErrors},
	{partState, 0}, {partDecisions, 0}, {partCommands, 0}, {partErrors, 0}, {partRecent, 2}, {partRefs, 0}, {partNext, 0}, {partTask, 1},
	{partRecent, 0}, {partFiles, 0}, {partTask, 0},
}

// parts turns the digest into trimmable lists.
func (d transcriptDigest) parts() []*part {
	ps := make([]*part, numParts)
	plain := func(items []string, dropOld bool, what string) *part {
		return &part{items: items, dropOld: dropOld, note: func(p *part) string { return plural(p.dropped(), what) }}
	}
	ps[partTask] = plain(d.task, false, "more line")
	ps[partConstraints] = plain(d.constraints, false, "more constraint")
	ps[partDecisions] = plain(d.decisions, true, "earlier decision")
	ps[partState] = plain(d.state, false, "more line")
	ps[partNext] = plain(d.next, false, "more line")
	ps[partRecent] = plain(d.recent, false, "earlier call")
	ps[partRefs] = &part{items: d.refs, dropOld: true, hidden: d.refsMore, joined: strategy.IdentifiersLabel,
		note: func(p *part) string { return plural(p.dropped(), "earlier identifier") }}

	files := &part{hidden: d.namedMore, note: func(p *part) string {
		return plural(p.dropped(), "more path")
	}}
	for _, f := range d.files {
		files.items = append(files.items, f.line())
		files.rows = append(files.rows, f.row())
		if fileRank(f) < rankNamed {
			files.actedOn++
		}
	}
	ps[partFiles] = files

	commands := &part{dropOld: true, note: func(p *part) string {
		return plural(p.dropped(), "earlier command") + ": " + topCounts(p.counts)
	}}
	for _, c := range d.commands {
		commands.items = append(commands.items, c.line())
		commands.labels = append(commands.labels, c.kind)
	}
	ps[partCommands] = commands

	errs := &part{dropOld: true, note: func(p *part) string {
		return fmt.Sprintf("%s: %d resolved, %d open", plural(p.dropped(), "earlier error"), p.counts["resolved"], p.counts["open"])
	}}
	// The last five errors come last, so that they are the last to go,
	// and of the older ones the resolved come first: what a block must
	// carry is the latest errors and the ones still open.
	ordered := make([]errorEntry, 0, len(d.errors))
	older := d.errors[:max(len(d.errors)-verbatimErrors, 0)]
	for _, open := range []bool{false, true} {
		for _, e := range older {
			if e.resolved != open {
				ordered = append(ordered, e)
			}
		}
	}
	ordered = append(ordered, d.errors[len(older):]...)
	for i, e := range ordered {
		limit := maxItemRunes
		if i >= len(ordered)-verbatimErrors {
			limit = maxErrorRunes
		}
		errs.items = append(errs.items, e.text(limit))
		errs.labels = append(errs.labels, map[bool]string{true: "resolved", false: "open"}[e.resolved])
	}
	ps[partErrors] = errs

	for _, p := range ps {
		p.hi = len(p.items)
		p.counts = map[string]int{}
	}
	return ps
}

// plural writes "1 more line", "3 more lines".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// topCounts writes the most frequent labels with their counts ("grep ×12,
// sed ×9, …").
func topCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for i, k := range keys {
		if i == noteKinds {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if k == "" {
			k = "other"
		}
		fmt.Fprintf(&b, "%s ×%d", k, counts[k])
	}
	return b.String()
}

// renderDigest writes the digest under the layout's headings within
// target code points: the bodies get the target less the headings (at
// least half of it, and at least minBodyRunes beside the fixed text), and
// the parts are trimmed in trimPhases order until they fit. So the
// summary never exceeds the target by more than the headings and
// minBodyRunes, whose shape and facts win at very small targets.
func renderDigest(d transcriptDigest, level string, layout []section, target int) string {
	ps := d.parts()
	overhead := len(layout) - 1 // the blank lines between sections
	for _, s := range layout {
		overhead += utf8.RuneCountInString(level + " " + s.heading + "\n")
	}
	budget := max(target-overhead, target/2)
	for _, p := range ps {
		p.quiet = budget < quietBudget
	}

	// A part's cost is summed over every section that writes it.
	fixed := 0
	itemCost := make([][]int, numParts)
	sum := make([]int, numParts)
	for p := range ps {
		itemCost[p] = make([]int, len(ps[p].items))
	}
	for _, s := range layout {
		fixed += utf8.RuneCountInString(s.fixed)
		if s.table {
			fixed += utf8.RuneCountInString(artifactHeader)
		}
		for _, p := range s.parts {
			for i := range ps[p].items {
				n := utf8.RuneCountInString(ps[p].line(i, s.table))
				itemCost[p][i] += n
				sum[p] += n
			}
		}
	}
	// A joined part's label is written while any of its items is: its
	// cost goes with the newest, the last such item to go.
	for q, p := range ps {
		if p.joined == "" {
			continue
		}
		for i := len(p.items) - 1; i >= 0; i-- {
			if joinable(p.items[i]) {
				n := utf8.RuneCountInString("- " + p.joined + ": \n")
				itemCost[q][i] += n
				sum[q] += n
				break
			}
		}
	}
	// The facts get minBodyRunes beside the fixed text (the recovery
	// references, the table's header, the placeholders).
	budget = max(budget, fixed+minBodyRunes)
	noteCost := func(p int) int {
		n := 0
		for _, s := range layout {
			for _, q := range s.parts {
				if q == p {
					n += utf8.RuneCountInString(ps[p].noteLine(s.table))
				}
			}
		}
		return n
	}
	total := fixed
	for p := range ps {
		total += sum[p] + noteCost(p)
	}
	for _, phase := range trimPhases {
		p := ps[phase.part]
		floor := phase.floor
		if floor == floorActedOn {
			floor = p.actedOn
		}
		for total > budget && p.hi-p.lo > floor {
			i := p.hi - 1
			if p.dropOld {
				i = p.lo
			}
			before := noteCost(phase.part)
			p.drop()
			total += noteCost(phase.part) - before - itemCost[phase.part][i]
		}
	}

	// A section with nothing to say is left out: a heading over "(none
	// found)" tells the agent nothing and costs its room in every block.
	var b strings.Builder
	for _, s := range layout {
		if s.fixed == "" && emptySection(s, ps) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s\n", level, s.heading)
		b.WriteString(s.fixed)
		if s.table {
			b.WriteString(artifactHeader)
		}
		for _, q := range s.parts {
			ps[q].write(&b, s.table)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// emptySection reports whether a section would write nothing: no part
// kept an item or has a note to write.
func emptySection(s section, ps []*part) bool {
	for _, q := range s.parts {
		if p := ps[q]; p.hi > p.lo || p.noteLine(s.table) != "" {
			return false
		}
	}
	return true
}

// lines are the digest's items as the summary writes them, for the repair
// pass to restore an omitted identifier with its context: the files first,
// then the errors, the commands, the constraints, the task, the decisions,
// the state and the next step.
func (d transcriptDigest) lines() []string {
	var out []string
	for _, f := range d.files {
		out = append(out, f.line())
	}
	for _, e := range d.errors {
		out = append(out, e.text(maxErrorRunes))
	}
	for _, c := range d.commands {
		out = append(out, c.line())
	}
	for _, group := range [][]string{d.constraints, d.task, d.decisions, d.state, d.next} {
		out = append(out, group...)
	}
	return out
}
