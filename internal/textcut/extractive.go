package textcut

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

// Truncate returns the first n code points of text (the react-two-layer "keep
// the first 1,000 characters" fallback). n ≤ 0 gives "".
func Truncate(text string, n int) string {
	if n <= 0 {
		return ""
	}
	end, _ := advanceRunes(text, 0, n)
	return text[:end]
}

// Head returns the first n lines of text, without the line break that ends
// the last of them (the tier-1 offload preview). n ≤ 0 gives "".
func Head(text string, n int) string {
	if n <= 0 {
		return ""
	}
	off := 0
	for k := 0; k < n; k++ {
		i := strings.IndexByte(text[off:], '\n')
		if i < 0 {
			return text
		}
		if k == n-1 {
			return text[:off+i]
		}
		off += i + 1
	}
	return text
}

// KeepLines reduces text to at most targetChars code points by keeping its
// most informative lines, verbatim and in their original order; runs of
// dropped lines become one marker line such as "[… 37 lines omitted …]"
// (or "[… 120 chars omitted …]" when only part of a line was dropped).
//
// Units are lines; lines longer than about targetChars/2 (at most 400 code
// points) are split into sentences, and overlong sentences at whitespace or
// JSON boundaries, so every output line other than a marker is a substring
// of one input line. Units are scored for information: identifiers seen for
// the first time (see Identifiers), error words, decision words ("decided",
// "must", "fixed", "TODO", …), numbers, headings and definitions, and the
// first and last lines of the text; near-duplicates (same text once digits
// and case are ignored) and trivial lines ("}", "+") are penalized. The best
// units are taken greedily, skipping any that no longer fit, and markers are
// counted against the budget, so the result never exceeds targetChars.
// Ties break on position, so the output is deterministic.
//
// A text that already fits is returned unchanged; targetChars ≤ 0 gives "";
// when not even one unit fits with its markers, the result is
// Truncate(text, targetChars).
func KeepLines(text string, targetChars int) string {
	if targetChars <= 0 {
		return ""
	}
	if utf8.RuneCountInString(text) <= targetChars {
		return text
	}
	d := newDoc(text, maxUnitRunes(targetChars))
	if len(d.units) == 0 {
		return Truncate(text, targetChars)
	}
	d.score()
	chosen := d.choose(targetChars)
	if len(chosen) == 0 {
		return Truncate(text, targetChars)
	}
	return d.render(chosen)
}

func maxUnitRunes(target int) int {
	m := target / 2
	if m > 400 {
		m = 400
	}
	if m < 40 {
		m = 40
	}
	return m
}

// unit is one selectable piece of text: a line, or part of a long line.
type unit struct {
	start, end   int // bytes, excluding the line break and a trailing \r
	rStart, rEnd int // the same span in code points from the text start
	line         int
	lineStart    bool // starts its line's content
	lineEnd      bool // ends its line's content
	score        float64
}

// doc holds a text cut into units, plus what markers need to know.
type doc struct {
	text     string
	units    []unit
	numLines int
	nonBlank []int // nonBlank[i] = non-blank lines among lines [0, i)
	runes    int
}

func newDoc(text string, maxUnit int) *doc {
	d := &doc{text: text}
	lines := strings.Count(text, "\n") + 1
	d.units = make([]unit, 0, lines+len(text)/maxUnit)
	d.nonBlank = make([]int, 0, lines+1)
	// A final line break does not start another line.
	body := strings.TrimSuffix(text, "\n")
	d.nonBlank = append(d.nonBlank, 0)
	runeOff := 0
	for off, line := 0, 0; off <= len(body); line++ {
		nl := strings.IndexByte(body[off:], '\n')
		lineEnd := len(body)
		if nl >= 0 {
			lineEnd = off + nl
		}
		contentEnd := lineEnd
		if contentEnd > off && body[contentEnd-1] == '\r' {
			contentEnd--
		}
		content := body[off:contentEnd]
		blank := strings.TrimSpace(content) == ""
		nb := d.nonBlank[line]
		if !blank {
			nb++
			d.addLine(line, off, contentEnd, runeOff, maxUnit)
		}
		d.nonBlank = append(d.nonBlank, nb)
		d.numLines = line + 1
		runeOff += utf8.RuneCountInString(body[off:lineEnd]) + 1
		if nl < 0 {
			break
		}
		off = lineEnd + 1
	}
	d.runes = utf8.RuneCountInString(text)
	return d
}

// addLine appends the units of one non-blank line.
func (d *doc) addLine(line, start, end, runeOff, maxUnit int) {
	content := d.text[start:end]
	n := utf8.RuneCountInString(content)
	if n <= maxUnit {
		d.units = append(d.units, unit{start: start, end: end, rStart: runeOff, rEnd: runeOff + n, line: line, lineStart: true, lineEnd: true})
		return
	}
	r := runeOff
	for _, sentence := range splitSentences(content) {
		pieces, _ := Chunk(sentence, maxUnit) // maxUnit > 0: no error
		for _, p := range pieces {
			pn := utf8.RuneCountInString(p)
			d.units = append(d.units, unit{start: start, end: start + len(p), rStart: r, rEnd: r + pn, line: line})
			start += len(p)
			r += pn
		}
	}
	first := len(d.units) - 1
	for first > 0 && d.units[first-1].line == line {
		first--
	}
	d.units[first].lineStart = true
	d.units[len(d.units)-1].lineEnd = true
}

// splitSentences cuts s after each '.', '!' or '?' that is followed by
// whitespace, keeping the whitespace with the sentence it ends. The pieces
// concatenate to s.
func splitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && isSpaceByte(s[i+1]) {
			j := i + 1
			for j < len(s) && isSpaceByte(s[j]) {
				j++
			}
			if j < len(s) {
				out = append(out, s[start:j])
				start = j
			}
			i = j - 1
		}
	}
	return append(out, s[start:])
}

var (
	reDefinition = regexp.MustCompile(`^[+-]?\s*(?:export\s+|pub(?:\(crate\))?\s+|public\s+|private\s+|protected\s+|static\s+|async\s+)*(?:def|class|func|fn|function|interface|struct|impl|trait|enum|module|package|type)\s+\S`)
	errorWords   = []string{"error", "exception", "traceback", "fail", "panic", "fatal", "denied", "refused", "timed out", "timeout", "not found", "invalid", "cannot", "can't", "unable", "warning"}
	decisionSet  = map[string]bool{
		"decided": true, "decide": true, "decision": true, "will": true, "must": true, "should": true, "fixed": true,
		"fix": true, "fixes": true, "resolved": true, "todo": true, "fixme": true, "note": true, "important": true,
		"conclusion": true, "therefore": true, "because": true, "plan": true, "next": true, "cause": true,
		"found": true, "done": true, "success": true, "succeeded": true, "passed": true, "failed": true, "agreed": true,
		"confirmed": true, "required": true, "requirement": true, "constraint": true, "never": true, "always": true,
	}
)

// Score weights. Identifiers dominate because Retain measures them; the
// position bonus keeps the opening (often the command or question) and the
// closing (often the result) of a text.
const (
	wNewID       = 2.0
	wNewErrorID  = 3.0
	maxNewIDs    = 4
	wSeenID      = 0.25
	maxSeenIDs   = 2
	wErrorWord   = 2.5
	wDecision    = 1.5
	wDigits      = 0.3
	wHeading     = 1.0
	wDefinition  = 1.5
	wFirstLast   = 6.0
	wSecondLast  = 2.0
	wTrivial     = -3.0
	wDuplicate   = -2.0
	maxDupSteps  = 3
	wPerRune     = -0.003
	minAlnumUnit = 3
)

func (d *doc) score() {
	// Identifiers, attributed to the unit holding their first byte.
	matches := drift.Matches(d.text)
	seen := make(map[drift.Identifier]bool, len(matches))
	newIDs := make([]int, len(d.units))
	newErr := make([]int, len(d.units))
	seenIDs := make([]int, len(d.units))
	u := 0
	for _, m := range matches {
		for u < len(d.units) && d.units[u].end <= m.Start {
			u++
		}
		if u == len(d.units) {
			break
		}
		if m.Start < d.units[u].start {
			// In a blank line or a line break: nobody's.
			seen[m.ID] = true
			continue
		}
		switch {
		case seen[m.ID]:
			seenIDs[u]++
		case m.ID.Kind == drift.KindError:
			newErr[u]++
		default:
			newIDs[u]++
		}
		seen[m.ID] = true
	}

	dups := make(map[string]int)
	last := len(d.units) - 1
	for i := range d.units {
		un := &d.units[i]
		s := d.text[un.start:un.end]
		lower := strings.ToLower(s)
		var sc float64

		ids := newIDs[i] + newErr[i]
		if ids > maxNewIDs {
			// Keep the error share when capping.
			errs := min(newErr[i], maxNewIDs)
			sc += float64(errs)*wNewErrorID + float64(maxNewIDs-errs)*wNewID
		} else {
			sc += float64(newErr[i])*wNewErrorID + float64(newIDs[i])*wNewID
		}
		sc += float64(min(seenIDs[i], maxSeenIDs)) * wSeenID

		for _, w := range errorWords {
			if strings.Contains(lower, w) {
				sc += wErrorWord
				break
			}
		}
		for _, w := range strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) }) {
			if decisionSet[w] {
				sc += wDecision
				break
			}
		}
		if strings.IndexFunc(s, unicode.IsDigit) >= 0 {
			sc += wDigits
		}
		if un.lineStart && isHeading(s) {
			sc += wHeading
		}
		if un.lineStart && reDefinition.MatchString(s) {
			sc += wDefinition
		}
		switch i {
		case 0, last:
			sc += wFirstLast
		case 1, last - 1:
			sc += wSecondLast
		}
		if alnumCount(s, minAlnumUnit) < minAlnumUnit {
			sc += wTrivial
		}
		key := dupKey(lower)
		if k := dups[key]; k > 0 {
			sc += wDuplicate * float64(min(k, maxDupSteps))
		}
		dups[key]++
		sc += wPerRune * float64(un.rEnd-un.rStart)
		un.score = sc
	}
}

func isHeading(s string) bool {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "#"):
		return true
	case strings.HasPrefix(t, "diff --git ") || strings.HasPrefix(t, "@@ "):
		return true
	case len(t) < 80 && strings.HasSuffix(t, ":") && !strings.ContainsAny(t, "{}()=;"):
		return true
	case len(t) >= 4 && len(t) < 60 && strings.ToUpper(t) == t && strings.IndexFunc(t, unicode.IsLetter) >= 0:
		return true
	}
	return false
}

// alnumCount counts letters and digits, stopping at limit.
func alnumCount(s string, limit int) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n++
			if n >= limit {
				break
			}
		}
	}
	return n
}

// dupKey normalizes a lower-cased unit so that lines differing only in
// numbers, spacing or a diff's +/- marker compare equal.
func dupKey(lower string) string {
	var b strings.Builder
	b.Grow(len(lower))
	space := false
	t := strings.TrimLeft(lower, "+- \t")
	for _, r := range t {
		switch {
		case unicode.IsDigit(r):
			r = '0'
		case unicode.IsSpace(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// choose picks units greedily by score and returns their indices in order.
// The exact cost of the output (units, line breaks and markers) is kept up
// to date as units join, using a Fenwick tree to find each newcomer's
// selected neighbours: O(n log n) in all.
func (d *doc) choose(target int) []int {
	n := len(d.units)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ua, ub := d.units[order[a]], d.units[order[b]]
		if ua.score != ub.score {
			return ua.score > ub.score
		}
		return order[a] < order[b]
	})

	sel := newFenwick(n)
	total := d.sepCost(-1, n)
	for _, i := range order {
		size := d.units[i].rEnd - d.units[i].rStart
		if size > target {
			continue
		}
		p, q := sel.pred(i), sel.succ(i)
		delta := size + d.sepCost(p, i) + d.sepCost(i, q) - d.sepCost(p, q)
		if total+delta > target {
			continue
		}
		sel.add(i)
		total += delta
	}
	chosen := make([]int, 0, sel.count)
	for k := 1; k <= sel.count; k++ {
		chosen = append(chosen, sel.kth(k))
	}
	return chosen
}

func (d *doc) render(chosen []int) string {
	var b strings.Builder
	prev := -1
	for _, i := range chosen {
		b.WriteString(d.sep(prev, i))
		b.WriteString(d.text[d.units[i].start:d.units[i].end])
		prev = i
	}
	b.WriteString(d.sep(prev, len(d.units)))
	return b.String()
}

// gap describes what the output holds between selected unit a and
// selected unit b (a = -1: the start of the text; b = len(units): its end).
type gap struct {
	text   string // a fixed separator ("" or "\n"), when marker is false
	marker bool
	n      int    // lines or chars omitted
	unit   string // "line", "lines" or "chars"
	before bool   // a line break before the marker
	after  bool   // a line break after the marker
}

func (d *doc) gap(a, b int) gap {
	n := len(d.units)
	if a >= 0 && b < n && d.units[a].end == d.units[b].start {
		return gap{} // adjacent pieces of one line
	}
	g := gap{marker: true, before: a >= 0, after: b < n}
	if (a < 0 || d.units[a].lineEnd) && (b == n || d.units[b].lineStart) {
		from, to := 0, d.numLines
		if a >= 0 {
			from = d.units[a].line + 1
		}
		if b < n {
			to = d.units[b].line
		}
		if d.nonBlank[to]-d.nonBlank[from] == 0 {
			// Only blank lines in between: a line break says enough.
			if a < 0 || b == n {
				return gap{}
			}
			return gap{text: "\n"}
		}
		g.n, g.unit = to-from, "lines"
		if g.n == 1 {
			g.unit = "line"
		}
		return g
	}
	from, to := 0, d.runes
	if a >= 0 {
		from = d.units[a].rEnd
	}
	if b < n {
		to = d.units[b].rStart
	}
	g.n, g.unit = to-from, "chars"
	return g
}

// Marker layout: "[… 37 lines omitted …]". markerFixedRunes counts the
// code points around the number and the unit: "[… ", " ", " omitted …]".
const markerFixedRunes = 3 + 1 + 11

// sepCost is the length of sep in code points, computed without building
// the string: it is evaluated three times per candidate unit.
func (d *doc) sepCost(a, b int) int {
	g := d.gap(a, b)
	if !g.marker {
		return len(g.text)
	}
	c := markerFixedRunes + decimalDigits(g.n) + len(g.unit)
	if g.before {
		c++
	}
	if g.after {
		c++
	}
	return c
}

func (d *doc) sep(a, b int) string {
	g := d.gap(a, b)
	if !g.marker {
		return g.text
	}
	m := fmt.Sprintf("[… %d %s omitted …]", g.n, g.unit)
	if g.before {
		m = "\n" + m
	}
	if g.after {
		m += "\n"
	}
	return m
}

func decimalDigits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// fenwick is a binary indexed tree over unit indices counting selected
// units; it answers "selected neighbour" queries in O(log n).
type fenwick struct {
	tree  []int
	count int
	top   int // highest power of two ≤ len(tree)-1
}

func newFenwick(n int) *fenwick {
	top := 1
	for top*2 <= n {
		top *= 2
	}
	return &fenwick{tree: make([]int, n+1), top: top}
}

func (f *fenwick) add(i int) {
	for i++; i < len(f.tree); i += i & -i {
		f.tree[i]++
	}
	f.count++
}

// prefix counts selected indices in [0, i).
func (f *fenwick) prefix(i int) int {
	s := 0
	for ; i > 0; i -= i & -i {
		s += f.tree[i]
	}
	return s
}

// kth returns the index of the k-th selected unit (1-based k).
func (f *fenwick) kth(k int) int {
	pos := 0
	for step := f.top; step > 0; step >>= 1 {
		if pos+step < len(f.tree) && f.tree[pos+step] < k {
			pos += step
			k -= f.tree[pos]
		}
	}
	return pos // tree position pos+1 holds index pos
}

// pred is the selected index before i, or -1.
func (f *fenwick) pred(i int) int {
	c := f.prefix(i)
	if c == 0 {
		return -1
	}
	return f.kth(c)
}

// succ is the selected index after i, or n when there is none.
func (f *fenwick) succ(i int) int {
	c := f.prefix(i + 1)
	if c == f.count {
		return len(f.tree) - 1
	}
	return f.kth(c + 1)
}
