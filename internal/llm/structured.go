package llm

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/digest"
)

// The structured offline summary. Instead of picking raw lines out of a
// transcript, Extractive reads its structure (who said what, which tool
// call ran which command, what came back) into a fixed digest: the task,
// the constraints, every file touched and what was done to it, the
// commands and their outcomes, the errors and whether they were resolved,
// the decisions, the current state and the next step. Every fact is
// copied verbatim from the transcript (paths, commands and error lines are
// never reworded), and the same transcript always gives the same summary.

// StructuredSections are the headings of the structured summary written
// for the brief prompt (seed 003) and any other conversation prompt
// without a shape of its own, in order.
var StructuredSections = []string{
	"Task and Intent", "Constraints", "Files Touched", "Commands and Outcomes",
	"Errors and Resolutions", "Decisions", "Current State", "Next Step",
}

// Bounds of the digest's items, in code points. Lines are kept whole up to
// maxItemRunes; a longer line is cut with "…" (a single minified line can
// be larger than the whole budget). The most recent errors get more room
// because they are what a resumed agent needs to see exactly.
const (
	maxItemRunes      = 400
	maxErrorRunes     = 1000
	maxOutcomeRunes   = 100
	taskLines         = 8
	taskRunes         = 1000
	stateLines        = 5
	stateRunes        = 600
	verbatimErrors    = 5
	errorsPerResult   = 5
	longLineRunes     = 240
	noteKinds         = 5
	requestLines      = 3
	maxDisplayedValue = 120
)

// eventKind is what a transcript block is.
type eventKind int

const (
	evText   eventKind = iota // a message someone wrote
	evCall                    // a tool call's input
	evResult                  // a tool result (or error)
)

// event is one block of a transcript.
type event struct {
	kind  eventKind
	role  string // of a text: "user", "assistant" or "system"
	tool  string // of a call or result; "" when the transcript does not say
	text  string
	isErr bool // a result the tool reported as an error
}

// parseEvents reads a transcript into events. Text written by
// plan.Transcript ("[user]", "[assistant tool call bash]", "[tool tool
// result bash]" headers) is read block by block with digest's parser;
// anything else with parseTranscript's role markers, where an assistant
// line that is a JSON object is a tool call (the "role: content" dumps of
// OpenAI runs put the call's arguments on their own line). isTranscript is
// false when the text has no role marker at all: it is then one message of
// unknown role, read as the user's.
func parseEvents(text string) (events []event, isTranscript bool) {
	if blocks := digest.TranscriptBlocks(text); len(blocks) > 0 && startsWithHeader(text, blocks[0].Head) {
		for _, b := range blocks {
			events = append(events, blockEvent(b))
		}
		return events, true
	}
	for _, t := range parseTranscript(text) {
		if t.role != "" {
			isTranscript = true
		}
		switch t.role {
		case "assistant":
			var prose []string
			flush := func() {
				if len(prose) > 0 {
					events = append(events, event{kind: evText, role: "assistant", text: strings.Join(prose, "\n")})
					prose = nil
				}
			}
			for _, l := range t.lines {
				if strings.HasPrefix(l, "{") && strings.HasSuffix(l, "}") && json.Valid([]byte(l)) {
					flush()
					events = append(events, event{kind: evCall, text: l})
					continue
				}
				prose = append(prose, l)
			}
			flush()
		case "tool":
			events = append(events, event{kind: evResult, text: strings.Join(t.lines, "\n")})
		case "system":
			events = append(events, event{kind: evText, role: "system", text: strings.Join(t.lines, "\n")})
		default:
			events = append(events, event{kind: evText, role: "user", text: strings.Join(t.lines, "\n")})
		}
	}
	return events, isTranscript
}

// startsWithHeader reports whether the text's first line is the header
// "[head]" (plan.Transcript writes "[tool tool result ]" for a result
// without a tool name, and digest reports its head trimmed).
func startsWithHeader(text, head string) bool {
	first, _, _ := strings.Cut(strings.TrimLeft(text, " \t\r\n"), "\n")
	first = strings.TrimSpace(first)
	return strings.HasPrefix(first, "[") && strings.HasSuffix(first, "]") && strings.TrimSpace(first[1:len(first)-1]) == head
}

// blockEvent is the event of one plan.Transcript block.
func blockEvent(b digest.TranscriptBlock) event {
	switch {
	case strings.HasPrefix(b.Head, "assistant tool call"):
		return event{kind: evCall, tool: strings.TrimSpace(strings.TrimPrefix(b.Head, "assistant tool call")), text: b.Text}
	case strings.HasPrefix(b.Head, "tool tool error"):
		return event{kind: evResult, tool: strings.TrimSpace(strings.TrimPrefix(b.Head, "tool tool error")), text: b.Text, isErr: true}
	case strings.HasPrefix(b.Head, "tool tool result"):
		return event{kind: evResult, tool: strings.TrimSpace(strings.TrimPrefix(b.Head, "tool tool result")), text: b.Text}
	case strings.HasPrefix(b.Head, "tool"):
		return event{kind: evResult, text: b.Text}
	default:
		return event{kind: evText, role: b.Head, text: b.Text}
	}
}

// transcriptDigest is the structure of a transcript, every item verbatim
// (or cut with "…" when longer than its bound), oldest first.
type transcriptDigest struct {
	task        []string
	constraints []string
	files       []*fileEntry // most telling first: changed, ran, read, named
	commands    []commandEntry
	errors      []errorEntry
	decisions   []string
	state       []string
	next        []string
}

// fileEntry is one path and what was done to it, in first-seen order.
type fileEntry struct {
	path    string
	actions []string
}

func (f *fileEntry) line() string { return f.path + ": " + strings.Join(f.actions, ", ") }

func (f *fileEntry) row() string {
	return fmt.Sprintf("| %s | %s | %s |\n", path.Base(f.path), f.path, strings.Join(f.actions, ", "))
}

// commandEntry is one tool call with its outcome.
type commandEntry struct {
	display string // the command's first line, or the tool and its target
	kind    string // what a later "command of the same kind" is
	outcome string
}

func (c commandEntry) line() string { return c.display + " → " + c.outcome }

// errorEntry is one distinct error line and whether a later command of the
// same kind succeeded.
type errorEntry struct {
	line     string
	kind     string
	resolved bool
}

func (e errorEntry) text(limit int) string {
	status := "open"
	if e.resolved {
		status = "resolved"
	}
	if e.kind != "" {
		status += " (" + e.kind + ")"
	}
	return clip(e.line, limit) + " — " + status
}

// Line patterns. They are deliberately plain: the offline summary is a
// fallback, and a line it files under the wrong heading is still verbatim.
var (
	reConstraint = regexp.MustCompile(`(?i)\b(must|never|always|don'?t|do not|please|important|constraints?|critical|required|avoid|make sure|should not|shouldn'?t)\b`)
	reDecision   = regexp.MustCompile(`(?i)\b(because|instead|decid(e|ed|ing)|decision|will|i'll|we'll|let's|approach|chose|choose|opted|going to)\b`)
	reNextStep   = regexp.MustCompile(`(?i)^\W*((next|now|then|finally|first)\b,?\s*)?(i'll|i will|i'm going to|i need to|i should|let me|let's|we'll|we will|we need to|we should|the next step|next steps?|todo|remaining)\b`)
	reClosingTag = regexp.MustCompile(`^</[\w.-]+>$`)
	reReturnCode = regexp.MustCompile(`<returncode>\s*(-?\d+)\s*</returncode>|(?i)\bexit(?:ed)?(?: with)? (?:code|status)[: ]\s*(-?\d+)`)
	// reReturnTag is SWE-agent's wrapper around the exit code.
	reReturnTag = regexp.MustCompile(`<returncode>\s*-?\d+\s*</returncode>`)
	// reTestFailure is a report of a failure that counts whatever the
	// exit status: unittest's "FAILED (failures=1)", "FAIL: test_x",
	// "ERROR: test_x", pytest's "E   AssertionError" and "FAILED
	// tests/x.py::test_y", and a line that opens with "Error:" (a script
	// reporting what went wrong).
	reTestFailure = regexp.MustCompile(`^(FAILED \(|FAILED \S+::|FAIL: |ERROR: |E\s{2,}\S|(?i:error|fatal|panic)(\[[^\]]*\])?: )`)
	// reErrorLine is an error reported in a tool's output. FAIL and FAILED
	// are case-sensitive: "0 failed" in prose is not an error.
	reErrorLine = regexp.MustCompile(`(?i:^\s*(error|fatal|panic)\b|\berror:|^E\s{2,}\S|command not found|no such file or directory|permission denied|segmentation fault)|\bFAIL(ED)?\b`)
	// reException is the line that ends a Python traceback:
	// "ModuleNotFoundError: No module named 'x'", "pkg.ImproperlyConfigured: …",
	// or a bare exception name.
	reException = regexp.MustCompile(`^([A-Za-z_][\w.]*): \S|^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Iteration|Warning)$`)
)

// buildDigest reads the events into the digest.
func buildDigest(events []event) transcriptDigest {
	var d transcriptDigest
	files := newFileTracker()
	type call struct {
		entry    commandEntry
		readOnly bool
	}
	type occurrence struct {
		line, kind string
		at         int
	}
	var (
		calls       []*call
		pending     []*call // calls waiting for their result, oldest first
		errs        []occurrence
		lastSuccess = map[string]int{} // kind → position of its last success
		anySuccess  = -1
		firstUser   = -1
		lastUser    = -1
		nextAt      = -1
		lastSaid    string
		constraints = newDistinct()
		decisions   = newDistinct()
	)
	for i, e := range events {
		switch e.kind {
		case evText:
			switch e.role {
			case "user":
				if firstUser < 0 {
					firstUser = i
					d.task = openingLines(e.text, taskLines, taskRunes)
				}
				lastUser = i
				for _, l := range proseLines(e.text) {
					if reConstraint.MatchString(l) && !isLabel(l) {
						constraints.add(clip(l, maxItemRunes))
					}
				}
			case "assistant":
				if strings.TrimSpace(e.text) == "" {
					continue
				}
				lastSaid = e.text
				for _, l := range proseLines(e.text) {
					for _, s := range pick(l, reDecision) {
						decisions.add(clip(s, maxItemRunes))
					}
					if s := lastMatch(l, reNextStep); s != "" {
						d.next, nextAt = []string{clip(s, maxItemRunes)}, i
					}
					files.stated(l)
				}
			}
		case evCall:
			c := &call{}
			c.entry, c.readOnly = files.call(e)
			c.entry.outcome = "no result"
			calls = append(calls, c)
			pending = append(pending, c)
		case evResult:
			var c *call
			if len(pending) > 0 {
				c, pending = pending[0], pending[1:]
			}
			kind, readOnly := "", false
			if c != nil {
				kind, readOnly = c.entry.kind, c.readOnly
			}
			rc, hasRC := returnCode(e.text)
			found := errorLines(e.text, e.isErr || (hasRC && rc != 0), readOnly)
			if e.isErr && len(found) == 0 {
				if first := firstLine(e.text); first != "" {
					found = []string{first}
				}
			}
			for _, l := range found {
				errs = append(errs, occurrence{line: l, kind: kind, at: i})
			}
			if !e.isErr && len(found) == 0 && (!hasRC || rc == 0) {
				lastSuccess[kind], anySuccess = i, i
			}
			if c != nil {
				c.entry.outcome = outcome(e, rc, hasRC, found)
			}
			if !readOnly {
				// A result's own report of what it wrote ("File created
				// successfully at: /x.py", git status's "modified: x.go").
				for _, l := range strings.Split(e.text, "\n") {
					if utf8.RuneCountInString(l) <= longLineRunes {
						files.stated(l)
					}
				}
			}
		}
	}
	if lastUser >= 0 && lastUser > nextAt {
		// The user spoke after the assistant's last stated plan: the
		// request is what is pending.
		d.next = openingLines(events[lastUser].text, requestLines, stateRunes)
	}
	if len(d.task) == 0 && lastSaid != "" {
		// No user message: the assistant's first words say what it is doing.
		for _, e := range events {
			if e.kind == evText && e.role == "assistant" && strings.TrimSpace(e.text) != "" {
				d.task = openingLines(e.text, taskLines, taskRunes)
				break
			}
		}
	}
	if lastSaid != "" {
		d.state = openingLines(lastSaid, stateLines, stateRunes)
	}
	d.constraints = constraints.items
	d.decisions = decisions.items
	d.files = files.ordered()
	for _, c := range calls {
		d.commands = append(d.commands, c.entry)
	}
	// Distinct errors, ordered by their last occurrence, each resolved when
	// a command of its kind (any command, when the kind is unknown)
	// succeeded after it.
	seen := map[string]bool{}
	for i := len(errs) - 1; i >= 0; i-- {
		o := errs[i]
		if seen[o.line] {
			continue
		}
		seen[o.line] = true
		after, ok := lastSuccess[o.kind]
		if o.kind == "" {
			after, ok = anySuccess, true
		}
		d.errors = append(d.errors, errorEntry{line: o.line, kind: o.kind, resolved: ok && after > o.at})
	}
	for i, j := 0, len(d.errors)-1; i < j; i, j = i+1, j-1 {
		d.errors[i], d.errors[j] = d.errors[j], d.errors[i]
	}
	return d
}

// distinct collects strings once each, in first-seen order.
type distinct struct {
	seen  map[string]bool
	items []string
}

func newDistinct() *distinct { return &distinct{seen: map[string]bool{}} }

func (d *distinct) add(s string) {
	if s != "" && !d.seen[s] {
		d.seen[s] = true
		d.items = append(d.items, s)
	}
}

// proseLines are the trimmed, non-trivial lines of a message outside code
// fences: code in a message is not what the author decided or asked.
func proseLines(text string) []string {
	var out []string
	fence := false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence || l == "" || reTrivial.MatchString(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// isLabel reports whether a line only titles what follows: a markdown
// heading or a few words ending with a colon ("**CRITICAL REQUIREMENTS:**").
func isLabel(line string) bool {
	if strings.HasPrefix(line, "#") {
		return true
	}
	bare := strings.TrimRight(line, "*_ ")
	return strings.HasSuffix(bare, ":") && len(strings.Fields(bare)) <= 4
}

// openingLines are a message's first non-trivial lines, at most maxLines
// and about maxRunes. A closing tag ends the opening: in agent prompts it
// closes the quoted request ("</pr_description>"), and what follows is
// boilerplate.
func openingLines(text string, maxLines, maxRunes int) []string {
	var out []string
	used := 0
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if len(out) > 0 && reClosingTag.MatchString(l) {
			break
		}
		if l == "" || reTrivial.MatchString(l) {
			continue
		}
		l = clip(l, maxItemRunes)
		n := utf8.RuneCountInString(l)
		if len(out) > 0 && used+n > maxRunes {
			break
		}
		out = append(out, l)
		used += n
		if len(out) == maxLines {
			break
		}
	}
	return out
}

// sentences splits a line after ". ", "! " and "? ".
func sentences(line string) []string {
	var out []string
	start := 0
	for i := 0; i+1 < len(line); i++ {
		if (line[i] == '.' || line[i] == '!' || line[i] == '?') && line[i+1] == ' ' {
			if s := strings.TrimSpace(line[start : i+1]); s != "" {
				out = append(out, s)
			}
			start = i + 2
		}
	}
	if s := strings.TrimSpace(line[min(start, len(line)):]); s != "" {
		out = append(out, s)
	}
	return out
}

// pick returns a matching line whole when it is short, else its matching
// sentences: a paragraph on one line states many things, only some of
// them decisions.
func pick(line string, re *regexp.Regexp) []string {
	if !re.MatchString(line) {
		return nil
	}
	if utf8.RuneCountInString(line) <= longLineRunes {
		return []string{line}
	}
	var out []string
	for _, s := range sentences(line) {
		if re.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// lastMatch is the last sentence of line that matches re, or "".
func lastMatch(line string, re *regexp.Regexp) string {
	ss := sentences(line)
	for i := len(ss) - 1; i >= 0; i-- {
		if re.MatchString(ss[i]) {
			return ss[i]
		}
	}
	return ""
}

// clip cuts s to n code points, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return digest.Truncate(s, max(n-1, 1)) + "…"
}

// firstLine is the first non-trivial line of a tool's output, without the
// SWE-agent wrapper tags ("<returncode>0</returncode>", "<output>").
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(reReturnTag.ReplaceAllString(l, ""))
		if l != "" && !reTrivial.MatchString(l) {
			return l
		}
	}
	return ""
}

// returnCode is the exit code a tool's output states, if any.
func returnCode(text string) (int, bool) {
	m := reReturnCode.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	s := m[1]
	if s == "" {
		s = m[2]
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// outcome is a command's short result: its exit code when the output
// states one, else its first error line, else its first line or "ok".
func outcome(e event, rc int, hasRC bool, errs []string) string {
	switch {
	case e.isErr && len(errs) > 0:
		return "error: " + clip(errs[0], maxOutcomeRunes)
	case hasRC:
		return "exit " + strconv.Itoa(rc)
	case len(errs) > 0:
		return clip(errs[0], maxOutcomeRunes)
	}
	if first := firstLine(e.text); first != "" {
		return clip(first, maxOutcomeRunes)
	}
	return "ok"
}

// errorLines are the errors a tool's output reports: the last line of each
// Python traceback, and, when the command failed (or did not say), the
// lines that look like errors. The output of a command that only reads
// files is file content, not a report, unless the command failed; a
// traceback printed by a command that exited 0 is still an error.
func errorLines(text string, failed, readOnly bool) []string {
	if readOnly && !failed {
		return nil
	}
	_, hasRC := returnCode(text)
	scanAll := failed || (!hasRC && !readOnly)
	var out []string
	seen := map[string]bool{}
	add := func(l string) {
		if l = strings.TrimSpace(l); l != "" && !seen[l] && len(out) < errorsPerResult {
			seen[l] = true
			out = append(out, l)
		}
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "Traceback (most recent call last)") {
			// The exception line is the first one after the frames that is
			// not indented and looks like "Name: message".
			for i++; i < len(lines); i++ {
				t := strings.TrimSpace(lines[i])
				if t == "" || strings.HasPrefix(lines[i], " ") || strings.HasPrefix(lines[i], "\t") || strings.HasPrefix(t, "File ") || t == "^" {
					continue
				}
				if reException.MatchString(t) {
					add(t)
					break
				}
			}
			continue
		}
		// A test runner's failures count even when a pipe hid its exit
		// status ("… | tail -50" exits 0).
		if (scanAll && reErrorLine.MatchString(l)) || (!readOnly && reTestFailure.MatchString(strings.TrimSpace(l))) {
			add(l)
		}
	}
	return out
}

// fileTracker collects the paths a transcript touched and the actions on
// each, in first-seen order.
type fileTracker struct {
	byPath map[string]*fileEntry
	order  []*fileEntry
}

func newFileTracker() *fileTracker { return &fileTracker{byPath: map[string]*fileEntry{}} }

// The actions. A write to a path not seen before is a creation.
const (
	actRead     = "read"
	actListed   = "listed"
	actCreated  = "created"
	actWritten  = "written"
	actEdited   = "edited"
	actAppended = "appended"
	actCopied   = "copied"
	actMoved    = "moved"
	actDeleted  = "deleted"
	actRan      = "ran"
	actCd       = "cd"
	actNamed    = "named"
	// actTouched (touch, mkdir) is a creation when the path is new and
	// nothing worth listing otherwise.
	actTouched = "touched"
)

// add records an action on p.
func (ft *fileTracker) add(p, action string) {
	p = strings.TrimSpace(p)
	if p == "" || strings.ContainsAny(p, "\n\t") || strings.Contains(p, `\n`) || strings.Contains(p, `\t`) {
		return
	}
	f, seen := ft.byPath[p]
	if !seen {
		if action == actWritten || action == actTouched {
			action = actCreated
		}
		f = &fileEntry{path: p}
		ft.byPath[p] = f
		ft.order = append(ft.order, f)
	}
	if action == actTouched {
		return
	}
	for _, a := range f.actions {
		if a == action {
			return
		}
	}
	if action == actNamed && len(f.actions) > 0 {
		return // a path with a real action needs no "named"
	}
	if len(f.actions) == 1 && f.actions[0] == actNamed {
		f.actions = f.actions[:0]
	}
	f.actions = append(f.actions, action)
}

// stated records the paths a line says were created or changed ("I
// modified internal/x.go", "new file: y.py").
func (ft *fileTracker) stated(line string) {
	for _, p := range paths(line) {
		switch artifactRank(line, p) {
		case 0:
			ft.add(p, actWritten)
		case 1:
			ft.add(p, actEdited)
		}
	}
}

// fileRank orders the file list: what the session changed first, then
// what it ran, what it read, and what it only named.
func fileRank(f *fileEntry) int {
	rank := 3
	for _, a := range f.actions {
		switch a {
		case actCreated, actWritten, actEdited, actAppended, actDeleted, actMoved:
			return 0
		case actRan:
			rank = min(rank, 1)
		case actNamed:
		default:
			rank = min(rank, 2)
		}
	}
	return rank
}

func (ft *fileTracker) ordered() []*fileEntry {
	out := append([]*fileEntry(nil), ft.order...)
	sort.SliceStable(out, func(i, j int) bool { return fileRank(out[i]) < fileRank(out[j]) })
	return out
}

// editorCommands are the str_replace_editor commands and what each does to
// its path.
var editorCommands = map[string]string{
	"view": actRead, "create": actWritten, "str_replace": actEdited, "insert": actEdited,
	"undo_edit": actEdited, "edit": actEdited, "write": actWritten, "append": actAppended,
}

// pathKeys are the argument names that hold a file path.
var pathKeys = []string{"path", "file_path", "filepath", "filename", "file", "notebook_path", "target_file"}

// call records what one tool call did to files and returns it as a
// command entry, and whether it only read.
func (ft *fileTracker) call(e event) (commandEntry, bool) {
	var args map[string]any
	if json.Unmarshal([]byte(e.text), &args) != nil {
		args = nil
	}
	tool := e.tool
	if args == nil {
		// Not a JSON object: a raw command line.
		cmd := strings.TrimSpace(e.text)
		kind, readOnly := ft.shell(cmd)
		return commandEntry{display: commandDisplay(cmd), kind: kind}, readOnly
	}
	if cmd, ok := args["command"].(string); ok {
		if act, editor := editorCommands[cmd]; editor {
			if p, ok := args["path"].(string); ok {
				ft.add(p, act)
				display := strings.TrimSpace(cmd + " " + p)
				return commandEntry{display: display, kind: display}, act == actRead
			}
		}
		kind, readOnly := ft.shell(cmd)
		return commandEntry{display: commandDisplay(cmd), kind: kind}, readOnly
	}
	if argv, ok := args["command"].([]any); ok && len(argv) > 0 {
		// An argv list: ["bash", "-lc", "script"] runs the script.
		words := make([]string, 0, len(argv))
		for _, w := range argv {
			s, _ := w.(string)
			words = append(words, s)
		}
		cmd := strings.Join(words, " ")
		if len(words) >= 3 && (words[1] == "-c" || words[1] == "-lc") {
			cmd = words[len(words)-1]
		}
		kind, readOnly := ft.shell(cmd)
		return commandEntry{display: commandDisplay(cmd), kind: kind}, readOnly
	}
	if cmd, ok := args["cmd"].(string); ok {
		kind, readOnly := ft.shell(cmd)
		return commandEntry{display: commandDisplay(cmd), kind: kind}, readOnly
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys) // map order is random; the summary must not be
	for _, k := range keys {
		if s, ok := args[k].(string); ok && strings.Contains(s, "*** Begin Patch") {
			ft.patch(s)
			return commandEntry{display: strings.TrimSpace(tool + " patch"), kind: tool}, false
		}
	}
	// Any other tool: its path arguments, with an action named by the tool.
	act := toolAction(tool)
	var shown []string
	for _, k := range pathKeys {
		if p, ok := args[k].(string); ok && p != "" {
			ft.add(p, act)
			shown = append(shown, p)
		}
	}
	if ps, ok := args["paths"].([]any); ok {
		for _, v := range ps {
			if p, ok := v.(string); ok && p != "" {
				ft.add(p, act)
				shown = append(shown, p)
			}
		}
	}
	for _, k := range []string{"pattern", "query", "url"} {
		if s, ok := args[k].(string); ok && s != "" {
			shown = append(shown, clip(s, maxDisplayedValue))
		}
	}
	display := tool
	if len(shown) > 0 {
		display = strings.TrimSpace(tool + " " + strings.Join(shown, " "))
	} else if raw := strings.Join(strings.Fields(e.text), " "); raw != "" {
		display = strings.TrimSpace(tool + " " + clip(raw, maxDisplayedValue))
	}
	// Two calls of one tool are of the same kind, whatever their arguments.
	return commandEntry{display: display, kind: tool}, act == actRead || act == actListed
}

// toolAction names what a non-shell tool does from its name.
func toolAction(tool string) string {
	t := strings.ToLower(tool)
	switch {
	case strings.Contains(t, "write") || strings.Contains(t, "create"):
		return actWritten
	case strings.Contains(t, "edit") || strings.Contains(t, "replace") || strings.Contains(t, "patch") || strings.Contains(t, "insert") || strings.Contains(t, "update"):
		return actEdited
	case strings.Contains(t, "delete") || strings.Contains(t, "remove"):
		return actDeleted
	case strings.Contains(t, "read") || strings.Contains(t, "view") || strings.Contains(t, "open") || strings.Contains(t, "cat"):
		return actRead
	case strings.Contains(t, "list") || strings.Contains(t, "glob") || strings.Contains(t, "find") || strings.Contains(t, "search") || strings.Contains(t, "grep"):
		return actListed
	default:
		return actNamed
	}
}

var rePatchFile = regexp.MustCompile(`(?m)^\*\*\* (Add|Update|Delete) File: (.+)$`)

// patch records the files of an apply_patch envelope.
func (ft *fileTracker) patch(s string) {
	for _, m := range rePatchFile.FindAllStringSubmatch(s, -1) {
		act := map[string]string{"Add": actWritten, "Update": actEdited, "Delete": actDeleted}[m[1]]
		ft.add(strings.TrimSpace(m[2]), act)
	}
}

// commandDisplay is how a command is listed: its first line, verbatim, with
// "…" when more lines follow (a heredoc, a python -c script).
func commandDisplay(cmd string) string {
	cmd = strings.TrimSpace(cmd)
	first, rest, more := strings.Cut(cmd, "\n")
	first = clip(strings.TrimSpace(first), maxItemRunes)
	if more && strings.TrimSpace(rest) != "" {
		return first + " …"
	}
	return first
}

// simpleCmd is one simple command of a shell line: its words with the
// quotes removed, and its redirections.
type simpleCmd struct {
	words  []string
	redirs []redir
}

type redir struct{ op, target string }

// heredoc is the body of a "<<EOF" and the command it feeds.
type heredoc struct {
	cmd   int // index of the command in the list tokenize returns
	delim string
	body  string
}

// tokenize splits a shell script into simple commands, as far as naming
// files needs: quotes, escapes, comments, the control operators (&& || ;
// | & newline and parentheses) and redirections, with heredoc bodies cut
// out. It is no shell: expansions and substitutions stay words.
func tokenize(s string) ([]simpleCmd, []heredoc) {
	var (
		cmds    []simpleCmd
		docs    []heredoc
		waiting []int // indexes in docs of heredocs whose body starts at the next line
		cur     simpleCmd
		word    strings.Builder
		inWord  bool
		op      string // redirection waiting for its target
	)
	flush := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord = false
		switch {
		case op == "<<":
			docs = append(docs, heredoc{cmd: len(cmds), delim: w})
			waiting = append(waiting, len(docs)-1)
		case op != "":
			cur.redirs = append(cur.redirs, redir{op: op, target: w})
		default:
			cur.words = append(cur.words, w)
		}
		op = ""
	}
	end := func() {
		flush()
		op = ""
		if len(cur.words) > 0 || len(cur.redirs) > 0 {
			cmds = append(cmds, cur)
		}
		cur = simpleCmd{}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' { // a backslash-newline continues the line
				word.WriteByte(s[i])
				inWord = true
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				word.WriteString(s[i+1:])
				i = len(s)
				break
			}
			word.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				word.WriteByte(s[i])
			}
		case c == ' ' || c == '\t' || c == '\r':
			flush()
		case c == '#' && !inWord:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == '&' && i+1 < len(s) && s[i+1] == '>':
			flush()
			i++
			op = ">"
			if i+1 < len(s) && s[i+1] == '>' {
				i++
				op = ">>"
			}
		case c == '>' || c == '<':
			// A file descriptor number before the operator ("2>") is part
			// of it, not a word.
			if w := word.String(); inWord && strings.Trim(w, "0123456789") == "" {
				word.Reset()
				inWord = false
			}
			flush()
			op = string(c)
			for i+1 < len(s) && (s[i+1] == c || s[i+1] == '&' || s[i+1] == '|' || (op == "<<" && s[i+1] == '-')) {
				i++
				if s[i] != '-' {
					op += string(s[i])
				}
			}
		case c == '\n':
			end()
			i = readHeredocs(s, i, docs, waiting)
			waiting = waiting[:0]
		case c == ';' || c == '|' || c == '&' || c == '(' || c == ')':
			end()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	end()
	if len(waiting) > 0 {
		readHeredocs(s, len(s)-1, docs, waiting)
	}
	return cmds, docs
}

// readHeredocs fills the bodies of the waiting heredocs from the lines
// after the newline at nl, and returns the position of the newline that
// ends the last delimiter line (or the end of s).
func readHeredocs(s string, nl int, docs []heredoc, waiting []int) int {
	pos := nl
	for _, d := range waiting {
		var body strings.Builder
		for pos+1 < len(s) {
			start := pos + 1
			stop := strings.IndexByte(s[start:], '\n')
			line := s[start:]
			if stop >= 0 {
				line = s[start : start+stop]
				pos = start + stop
			} else {
				pos = len(s)
			}
			if strings.TrimSpace(line) == docs[d].delim {
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		docs[d].body = body.String()
	}
	return min(pos, len(s))
}

var (
	reAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	rePython     = regexp.MustCompile(`^(python[\d.]*|pypy[\d.]*)$`)
	reExtension  = regexp.MustCompile(`^[\w.@+-]*[A-Za-z0-9_]\.[A-Za-z][A-Za-z0-9]{0,7}$`)
	// reOpen is Python's open("path", "mode") and Path("path").write_text(…).
	reOpen     = regexp.MustCompile(`\bopen\(\s*[rbf]?(['"])([^'"\n]+)['"]\s*(?:,\s*(?:mode\s*=\s*)?['"]([a-z+]*)['"])?`)
	rePathCall = regexp.MustCompile(`\bPath\(\s*['"]([^'"\n]+)['"]\s*\)\.(write_text|write_bytes|read_text|read_bytes|unlink|touch)\b`)
)

// readVerbs only read the files they name.
var readVerbs = map[string]bool{
	"cat": true, "head": true, "tail": true, "less": true, "more": true, "nl": true, "wc": true,
	"file": true, "stat": true, "bat": true, "od": true, "xxd": true, "hexdump": true, "strings": true,
	"md5sum": true, "sha256sum": true, "diff": true, "cmp": true, "source": true, ".": true, "jq": true,
	"sort": true, "uniq": true, "cut": true, "readlink": true, "realpath": true,
}

// grepVerbs take a pattern before their files.
var grepVerbs = map[string]bool{"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true}

// quietVerbs neither read nor write files themselves (redirections aside);
// the verbs that do are handled by wordActions before it looks here.
var quietVerbs = map[string]bool{
	"echo": true, "printf": true, "pwd": true, "which": true, "whereis": true, "true": true, "false": true,
	"export": true, "set": true, "tr": true, "date": true, "env": true, "popd": true, "df": true,
	"test": true, "[": true, "sleep": true, "whoami": true, "uname": true, "ps": true,
}

// navigation commands are not what a command line is about.
var navigation = map[string]bool{"cd": true, "pushd": true, "popd": true, "export": true, "set": true, "source": true, ".": true, "true": true, ":": true}

// subcommandVerbs are named with their first argument ("git diff").
var subcommandVerbs = map[string]bool{
	"git": true, "pip": true, "pip3": true, "go": true, "npm": true, "yarn": true, "pnpm": true, "cargo": true,
	"make": true, "docker": true, "kubectl": true, "apt-get": true, "apt": true, "uv": true, "poetry": true, "conda": true,
}

// buildVerbs build or test a project: a command that installs a package
// first and then runs one of these is about the run.
var buildVerbs = map[string]bool{"go": true, "cargo": true, "npm": true, "yarn": true, "pnpm": true, "npx": true, "make": true, "uv": true, "poetry": true}

// runVerbs run the files they name (test files, scripts).
var runVerbs = map[string]bool{
	"pytest": true, "py.test": true, "tox": true, "nosetests": true, "node": true, "ruby": true, "php": true,
	"deno": true, "bun": true, "ts-node": true, "jest": true, "mocha": true, "bash": true, "sh": true, "zsh": true,
}

// shell records what a shell script does to files and returns its kind
// (see commandKind) and whether it only reads. Every path the script names
// is recorded, with "named" when no rule says what was done to it: the
// list of files must be complete even where the rules are not.
func (ft *fileTracker) shell(script string) (kind string, readOnly bool) {
	acts, cmds, readOnly := analyzeShell(script, 0)
	for _, a := range acts {
		ft.add(a[0], a[1])
	}
	for _, id := range digest.Identifiers(script) {
		if id.Kind != digest.KindPath {
			continue
		}
		covered := false
		for _, a := range acts {
			if strings.Contains(a[0], id.Value) {
				covered = true
				break
			}
		}
		if !covered {
			ft.add(id.Value, actNamed)
		}
	}
	return commandKind(cmds), readOnly
}

// analyzeShell returns the (path, action) pairs of a script in order, its
// simple commands, and whether every command only reads. depth bounds
// "bash -c" recursion.
func analyzeShell(script string, depth int) (acts [][2]string, cmds []simpleCmd, readOnly bool) {
	cmds, docs := tokenize(script)
	readOnly = true
	for _, sc := range cmds {
		words := stripWrappers(sc.words)
		for _, r := range sc.redirs {
			switch {
			case strings.Contains(r.op, "&") || strings.HasPrefix(r.target, "/dev/") || r.target == "":
			case r.op == ">>":
				acts, readOnly = append(acts, [2]string{r.target, actAppended}), false
			case strings.HasPrefix(r.op, ">"):
				acts, readOnly = append(acts, [2]string{r.target, actWritten}), false
			case r.op == "<":
				acts = append(acts, [2]string{r.target, actRead})
			}
		}
		if len(words) == 0 {
			continue
		}
		verb := path.Base(words[0])
		a, ro := wordActions(verb, words, depth)
		acts = append(acts, a...)
		readOnly = readOnly && ro
	}
	for _, d := range docs {
		// A heredoc feeding a shell is a script; any other is code or
		// file content, where only Python's open() names what is written.
		if d.cmd < len(cmds) {
			if w := stripWrappers(cmds[d.cmd].words); len(w) > 0 && (path.Base(w[0]) == "bash" || path.Base(w[0]) == "sh") && depth < 2 {
				a, _, _ := analyzeShell(d.body, depth+1)
				acts = append(acts, a...)
				continue
			}
		}
		acts = append(acts, codeActions(d.body)...)
	}
	return acts, cmds, readOnly
}

// stripWrappers drops variable assignments and wrappers (sudo, env,
// timeout 30, xargs -0, …) before the command's verb.
func stripWrappers(words []string) []string {
	for len(words) > 0 {
		w := words[0]
		if reAssignment.MatchString(w) {
			words = words[1:]
			continue
		}
		switch path.Base(w) {
		case "sudo", "env", "nohup", "nice", "time", "command", "exec", "stdbuf", "xargs", "timeout":
			valued := map[string]bool{"-I": true, "-n": true, "-P": true, "-d": true, "-L": true, "-u": true, "-s": true, "-k": true}
			timeout := path.Base(w) == "timeout"
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				if valued[words[0]] && len(words) > 1 {
					words = words[1:]
				}
				words = words[1:]
			}
			if timeout && len(words) > 0 {
				words = words[1:] // the duration
			}
			continue
		}
		break
	}
	return words
}

// isPathWord reports whether a command word names a file: it has a slash
// or a file extension, and is not an option, a URL or a pattern.
func isPathWord(w string) bool {
	if w == "" || w == "." || w == ".." || w == "/" || strings.HasPrefix(w, "-") ||
		strings.Contains(w, "://") || strings.ContainsAny(w, " \n\t=,'\"(){}|;") {
		return false
	}
	return strings.Contains(w, "/") || reExtension.MatchString(w)
}

// operands are the words after the verb that are not options; valued
// options (like "-n 20" or "-e expr") skip their value.
func operands(words []string, valued string) []string {
	var out []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			return append(out, words[i+1:]...)
		}
		if strings.HasPrefix(w, "-") && w != "-" {
			if len(w) == 2 && strings.Contains(valued, w[1:]) && i+1 < len(words) {
				i++
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

// hasFlag reports whether an option starting with one of the prefixes is
// among the words ("-i", "-i.bak", "--in-place").
func hasFlag(words []string, prefixes ...string) bool {
	for _, w := range words[1:] {
		for _, p := range prefixes {
			if strings.HasPrefix(w, p) {
				return true
			}
		}
	}
	return false
}

// pathActions pairs each path-like word with the action.
func pathActions(words []string, action string) [][2]string {
	var out [][2]string
	for _, w := range words {
		if isPathWord(w) {
			out = append(out, [2]string{w, action})
		}
	}
	return out
}

// wordActions is what one simple command does to the files it names, and
// whether it only reads.
func wordActions(verb string, words []string, depth int) ([][2]string, bool) {
	switch {
	case verb == "cd" || verb == "pushd":
		return pathActions(operands(words, ""), actCd), true
	case readVerbs[verb]:
		valued := ""
		if verb == "head" || verb == "tail" {
			valued = "nc" // head -n 20
		}
		return pathActions(operands(words, valued), actRead), true
	case grepVerbs[verb]:
		ops := operands(words, "efmABCg")
		if !hasFlag(words, "-e", "-f", "--regexp") && len(ops) > 0 {
			ops = ops[1:] // the pattern
		}
		return pathActions(ops, actRead), true
	case verb == "sed" || verb == "perl":
		ops := operands(words, "efE")
		if !hasFlag(words, "-e", "-f", "--expression") && len(ops) > 0 {
			ops = ops[1:] // the script
		}
		if hasFlag(words, "-i", "--in-place", "-pi") {
			return pathActions(ops, actEdited), false
		}
		return pathActions(ops, actRead), true
	case verb == "awk" || verb == "gawk":
		ops := operands(words, "Fvf")
		if !hasFlag(words, "-f") && len(ops) > 0 {
			ops = ops[1:]
		}
		return pathActions(ops, actRead), true
	case verb == "find":
		var out [][2]string
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "-") || w == "(" || w == "!" {
				break
			}
			if isPathWord(w) {
				out = append(out, [2]string{w, actListed})
			}
		}
		return out, true
	case verb == "ls" || verb == "tree" || verb == "du":
		return pathActions(operands(words, "LI"), actListed), true
	case verb == "tee":
		act := actWritten
		if hasFlag(words, "-a", "--append") {
			act = actAppended
		}
		return pathActions(operands(words, ""), act), false
	case verb == "cp" || verb == "mv" || verb == "install":
		ops := operands(words, "tS")
		src := actCopied
		if verb == "mv" {
			src = actMoved
		}
		var out [][2]string
		for i, w := range ops {
			if !isPathWord(w) {
				continue
			}
			if i == len(ops)-1 && len(ops) > 1 {
				out = append(out, [2]string{w, actWritten})
			} else {
				out = append(out, [2]string{w, src})
			}
		}
		return out, false
	case verb == "rm" || verb == "rmdir" || verb == "unlink":
		return pathActions(operands(words, ""), actDeleted), false
	case verb == "touch" || verb == "mkdir":
		return pathActions(operands(words, "m"), actTouched), false
	case verb == "chmod" || verb == "chown" || verb == "ln":
		ops := operands(words, "")
		if verb != "ln" && len(ops) > 0 {
			ops = ops[1:] // the mode or owner
		}
		return pathActions(ops, verb), false
	case verb == "git":
		ops := operands(words, "Cc")
		if len(ops) == 0 {
			return nil, true
		}
		sub := ops[0]
		ro := map[string]bool{"diff": true, "log": true, "show": true, "status": true, "grep": true, "blame": true, "ls-files": true}[sub]
		return pathActions(ops[1:], "git "+sub), ro
	case rePython.MatchString(verb):
		for i := 1; i < len(words); i++ {
			switch {
			case words[i] == "-c" && i+1 < len(words):
				return codeActions(words[i+1]), false
			case words[i] == "-m":
				return pathActions(words[i+1:], actRan), false
			case !strings.HasPrefix(words[i], "-"):
				if isPathWord(words[i]) {
					return [][2]string{{words[i], actRan}}, false
				}
				return nil, false
			}
		}
		return nil, false
	case (verb == "bash" || verb == "sh" || verb == "zsh") && len(words) > 2 && words[1] == "-c" && depth < 2:
		acts, _, ro := analyzeShell(words[2], depth+1)
		return acts, ro
	case runVerbs[verb] || verb == "go" || verb == "cargo" || verb == "npx" || verb == "make":
		return pathActions(operands(words, ""), actRan), false
	case isPathWord(words[0]):
		// A script run by its path ("./run.sh").
		return [][2]string{{words[0], actRan}}, false
	default:
		return nil, quietVerbs[verb]
	}
}

// codeActions finds the files a Python snippet opens.
func codeActions(code string) [][2]string {
	var out [][2]string
	for _, m := range reOpen.FindAllStringSubmatch(code, -1) {
		act := actRead
		switch {
		case strings.ContainsAny(m[3], "wx"):
			act = actWritten
		case strings.Contains(m[3], "a"):
			act = actAppended
		}
		out = append(out, [2]string{m[2], act})
	}
	for _, m := range rePathCall.FindAllStringSubmatch(code, -1) {
		act := map[string]string{"write_text": actWritten, "write_bytes": actWritten, "read_text": actRead,
			"read_bytes": actRead, "unlink": actDeleted, "touch": actTouched}[m[2]]
		out = append(out, [2]string{m[1], act})
	}
	return out
}

// commandKind names a command for "a later command of the same kind": its
// main simple command by verb, with the script, module or subcommand where
// that is what tells two runs apart ("python test_issue.py", "python -c",
// "git diff"). The main command is the first that runs something (a
// script written by a heredoc and then run fails or passes as the run),
// else the first that is not cd or export.
func commandKind(cmds []simpleCmd) string {
	var words, runs []string
	for _, sc := range cmds {
		w := stripWrappers(sc.words)
		if len(w) == 0 {
			continue
		}
		verb := path.Base(w[0])
		if runs == nil && (rePython.MatchString(verb) || runVerbs[verb] || buildVerbs[verb] || strings.Contains(w[0], "/")) {
			runs = w
		}
		if words == nil || (navigation[path.Base(words[0])] && !navigation[verb]) {
			words = w
		}
	}
	if runs != nil {
		words = runs
	}
	if len(words) == 0 {
		return ""
	}
	verb := path.Base(words[0])
	switch {
	case rePython.MatchString(verb):
		for i := 1; i < len(words); i++ {
			switch {
			case words[i] == "-c":
				return verb + " -c"
			case words[i] == "-m" && i+1 < len(words):
				return verb + " -m " + words[i+1]
			case !strings.HasPrefix(words[i], "-"):
				return verb + " " + words[i]
			}
		}
	case subcommandVerbs[verb] || runVerbs[verb]:
		if ops := operands(words, ""); len(ops) > 0 {
			return verb + " " + ops[0]
		}
	}
	return verb
}

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
}

func (p *part) dropped() int { return len(p.items) - (p.hi - p.lo) }

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
	if p.dropped() == 0 || p.note == nil {
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
	return "- " + p.items[i] + "\n"
}

// section is one heading of a layout and the parts written under it.
type section struct {
	heading string
	parts   []int
	table   bool   // write the files as seed 004's artifact table
	fixed   string // a body written as is (the recovery references)
}

const artifactHeader = "| Artifact | Path | Status |\n|----------|------|--------|\n"

func historyLayout() []section {
	return []section{
		{heading: HistorySections[0], parts: []int{partCommands}},
		{heading: HistorySections[1], parts: []int{partTask}},
		{heading: HistorySections[2], parts: []int{partFiles}},
		{heading: HistorySections[3], parts: []int{partErrors}},
		{heading: HistorySections[4], parts: []int{partState}},
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
		{heading: SessionSections[3], parts: []int{partState, partCommands}},
		{heading: SessionSections[4], parts: []int{partErrors, partConstraints}},
		{heading: SessionSections[5], parts: []int{partNext}},
		{heading: SessionSections[6], fixed: "- Full conversation: " + archiveRef + "\n"},
	}
}

func structuredLayout() []section {
	out := make([]section, len(StructuredSections))
	for i, h := range StructuredSections {
		out[i] = section{heading: h, parts: []int{i}} // the parts are in the headings' order
	}
	return out
}

// trimPhases is the order in which parts give up items when the summary
// is over its budget, each down to a floor: first the decisions, the older
// commands, the current state, the older errors (all but the last five)
// and the constraints; then, if that is not enough, the rest of each in
// the same order, the task's opening and, last of all, the file list.
var trimPhases = []struct{ part, floor int }{
	{partDecisions, 0}, {partCommands, 1}, {partState, 1}, {partNext, 1}, {partErrors, verbatimErrors}, {partConstraints, 0},
	{partCommands, 0}, {partState, 0}, {partNext, 0}, {partErrors, 0}, {partTask, 1}, {partFiles, 0}, {partTask, 0},
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

	files := &part{note: func(p *part) string { return plural(p.dropped(), "more path") }}
	for _, f := range d.files {
		files.items = append(files.items, f.line())
		files.rows = append(files.rows, f.row())
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
	for i, e := range d.errors {
		limit := maxItemRunes
		if i >= len(d.errors)-verbatimErrors {
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
// least half of it), and the parts are trimmed in trimPhases order until
// they fit. So the summary never exceeds the target by more than the
// headings, whose shape wins at very small targets.
func renderDigest(d transcriptDigest, level string, layout []section, target int) string {
	ps := d.parts()
	overhead := len(layout) - 1 // the blank lines between sections
	for _, s := range layout {
		overhead += utf8.RuneCountInString(level + " " + s.heading + "\n")
	}
	budget := max(target-overhead, target/2)

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
		if s.fixed == "" && emptySection(s, ps) {
			fixed += utf8.RuneCountInString(placeholder(s.table))
		}
		for _, p := range s.parts {
			for i := range ps[p].items {
				n := utf8.RuneCountInString(ps[p].line(i, s.table))
				itemCost[p][i] += n
				sum[p] += n
			}
		}
	}
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
		total += sum[p]
	}
	for _, phase := range trimPhases {
		p := ps[phase.part]
		for total > budget && p.hi-p.lo > phase.floor {
			i := p.hi - 1
			if p.dropOld {
				i = p.lo
			}
			before := noteCost(phase.part)
			p.drop()
			total += noteCost(phase.part) - before - itemCost[phase.part][i]
		}
	}

	var b strings.Builder
	for k, s := range layout {
		if k > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s\n", level, s.heading)
		b.WriteString(s.fixed)
		if s.table {
			b.WriteString(artifactHeader)
		}
		if s.fixed == "" && emptySection(s, ps) {
			b.WriteString(placeholder(s.table))
			continue
		}
		for _, q := range s.parts {
			p := ps[q]
			for i := p.lo; i < p.hi; i++ {
				b.WriteString(p.line(i, s.table))
			}
			b.WriteString(p.noteLine(s.table))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// emptySection reports whether none of a section's parts found anything.
func emptySection(s section, ps []*part) bool {
	for _, p := range s.parts {
		if len(ps[p].items) > 0 {
			return false
		}
	}
	return true
}

func placeholder(table bool) string {
	if table {
		return "| (none found) | | |\n"
	}
	return "- (none found)\n"
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
