package llm

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/digest"
)

// ExtractiveModel is the Response.Model of the offline summarizer.
const ExtractiveModel = "extractive"

// Extractive summarizes without an LLM by picking lines out of the text
// (internal/digest). For the structured prompts (history, session) it fills
// the same headings the LLM would, so that the output has the same shape
// whichever summarizer ran. It is the offline default and the fallback when
// the LLM is down.
//
// Conversation text is read as a transcript when lines start with a role
// marker ("user:", "Assistant:", "[tool] …", "## user"); text without
// markers is one message of unknown role.
type Extractive struct{}

// Summarize implements Summarizer.
func (Extractive) Summarize(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, &Error{Kind: Canceled, Message: "call canceled by the caller", Err: err}
	}
	if err := req.Validate(); err != nil {
		return Response{}, badRequest(err)
	}
	p, err := LoadPrompt(req.Prompt)
	if err != nil {
		return Response{}, badRequest(err)
	}
	target := extractiveTarget(req)
	var text string
	switch req.Prompt {
	case PromptHistory:
		text = historySummary(parseTranscript(req.Text), target)
	case PromptSession:
		text = sessionSummary(parseTranscript(req.Text), target, req.ArchiveRef)
	case PromptRepair:
		text = repairSummary(req.Context, req.Text, req.Missing)
	case PromptJudge:
		text = HeuristicVerdict(req.Text, req.Context)
	default:
		text = digest.Extractive(req.Text, target)
	}
	return Response{
		Text:          text,
		Model:         ExtractiveModel,
		PromptVersion: p.Version,
		Offline:       true,
	}, nil
}

// extractiveTarget is the character budget: the request's, or seed 000's
// 10% when a brief summary comes without one.
func extractiveTarget(req Request) int {
	switch {
	case req.TargetChars > 0:
		return req.TargetChars
	case req.TargetTokens > 0:
		return req.TargetTokens * charsPerToken
	default:
		return max(len(req.Text)/10, 200)
	}
}

// turn is one message of a transcript.
type turn struct {
	role  string // "user", "assistant", "tool", "system" or "" when unknown
	lines []string
}

var roleMarker = regexp.MustCompile(`(?i)^\s*(?:` +
	`\[(system|user|human|assistant|ai|tool)\b[^\]]*\]\s*:?` + // [user] / [tool result bash]:
	`|#{1,6}\s*(system|user|human|assistant|ai|tool)\b[^:\n]*:?\s*$` + // ## user (message 3)
	`|(system|user|human|assistant|ai|tool)(?:\s*\([^)]*\))?\s*:` + // user: / tool (call_1):
	`)\s*`)

func canonicalRole(r string) string {
	switch strings.ToLower(r) {
	case "human", "user":
		return "user"
	case "ai", "assistant":
		return "assistant"
	default:
		return strings.ToLower(r)
	}
}

// parseTranscript splits text into turns at role markers.
func parseTranscript(text string) []turn {
	var turns []turn
	cur := turn{}
	for _, line := range strings.Split(text, "\n") {
		if m := roleMarker.FindStringSubmatchIndex(line); m != nil {
			role := ""
			for g := 1; g <= 3; g++ {
				if m[2*g] >= 0 {
					role = canonicalRole(line[m[2*g]:m[2*g+1]])
				}
			}
			if cur.role != "" || len(cur.lines) > 0 {
				turns = append(turns, cur)
			}
			cur = turn{role: role}
			line = line[m[1]:]
		}
		if strings.TrimSpace(line) != "" {
			cur.lines = append(cur.lines, strings.TrimSpace(line))
		}
	}
	if cur.role != "" || len(cur.lines) > 0 {
		turns = append(turns, cur)
	}
	return turns
}

// Line classifiers. They are deliberately plain: the offline summary is a
// fallback, its job is to keep the facts an LLM summary would keep.
var (
	reTech     = regexp.MustCompile(`(?i)\b(go|golang|python3?|node|npm|pip|docker|kubectl|git|make|pytest|cargo|java|rust|typescript|postgres(ql)?|redis|linux|ubuntu|macos|framework|config(uration)?|environment|version)\b|\bv?\d+\.\d+\.\d+\b`)
	reCode     = regexp.MustCompile(`(?i)\b(creat(e|ed|ing)|modif(y|ied|ying)|edit(ed|ing)?|wr(ote|ite|iting)|add(ed|ing)?|remov(e|ed|ing)|renam(e|ed|ing)|patch(ed)?|implement(ed|ing)?|refactor(ed|ing)?)\b|^(\+\+\+|---|@@|diff )`)
	reIssue    = regexp.MustCompile(`(?i)\b(errors?|exceptions?|traceback|fail(ed|ure|s|ing)?|panic|bugs?|fix(ed|es)?|cannot|can't|undefined|not found|denied|timeout|warning)\b`)
	rePref     = regexp.MustCompile(`(?i)\b(prefer|please|always|never|don't|do not|must|should|avoid|style|instead of)\b`)
	reDecision = regexp.MustCompile(`(?i)\b(decid(e|ed|ing)|decision|chose|choose|will use|instead|because|going to|let's|approach|plan|opted)\b`)
	// reTrivial is a line with nothing to keep: a lone markup tag or only
	// punctuation.
	reTrivial = regexp.MustCompile(`^((\s*</?[\w.-]+/?>)+|[^\pL\pN]*)\s*$`)
	// reMarker is digest's "[… 3 lines omitted …]" line: noise in a list.
	reMarker = regexp.MustCompile(`^\[… \d+ (lines?|chars) omitted …\]$`)
)

// Line predicates for linesOf.
func matches(re *regexp.Regexp) func(string) bool { return re.MatchString }

// hasIdentifier keeps lines with a fact the drift check measures (digest's
// paths, URLs, IDs, numbers, commands, error names).
func hasIdentifier(line string) bool { return len(digest.Identifiers(line)) > 0 }

// hasPath keeps lines naming a file.
func hasPath(line string) bool { return len(paths(line)) > 0 }

func paths(line string) []string {
	var out []string
	for _, id := range digest.Identifiers(line) {
		if id.Kind == digest.KindPath {
			out = append(out, id.Value)
		}
	}
	return out
}

func either(a, b func(string) bool) func(string) bool {
	return func(l string) bool { return a(l) || b(l) }
}

// linesOf collects the distinct lines of the given turns that pass line
// (all lines when it is nil), in order.
func linesOf(turns []turn, keep func(turn) bool, line func(string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range turns {
		if keep != nil && !keep(t) {
			continue
		}
		for _, l := range t.lines {
			if seen[l] || reTrivial.MatchString(l) || (line != nil && !line(l)) {
				continue
			}
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func byRole(role string) func(turn) bool {
	return func(t turn) bool { return t.role == role }
}

// firstOf and lastOf return the first and last turn of a role; with no
// such turn they fall back to the first and last turn, so a transcript
// without markers still yields an intent and a status.
func firstOf(turns []turn, role string) []turn {
	for _, t := range turns {
		if t.role == role {
			return []turn{t}
		}
	}
	if len(turns) > 0 {
		return turns[:1]
	}
	return nil
}

func lastOf(turns []turn, role string) []turn {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].role == role {
			return []turn{turns[i]}
		}
	}
	if len(turns) > 0 {
		return turns[len(turns)-1:]
	}
	return nil
}

// bullets squeezes lines into budget characters with digest and writes them
// as a markdown list. The "- " prefixes count against the budget: digest is
// asked again with the room they take until the list fits.
func bullets(lines []string, budget int) string {
	const none = "- (none found)\n"
	if len(lines) == 0 {
		return none
	}
	text := strings.Join(lines, "\n")
	room := budget
	out := ""
	for range 4 {
		out = bulletize(digest.Extractive(text, max(room, 1)))
		over := utf8.RuneCountInString(out) - budget
		if over <= 0 || room <= 1 {
			break
		}
		room -= over
	}
	if out == "" {
		return none
	}
	return out
}

// leading keeps the first lines that fit in budget: where a request is
// stated, its opening says what is wanted, and scoring would prefer the
// identifier-heavy instructions around it.
func leading(lines []string, budget int) string {
	var b strings.Builder
	used := 0
	for _, l := range lines {
		n := utf8.RuneCountInString(l) + 3 // "- " and the line break
		if used+n > budget {
			if used == 0 {
				// Not even one line fits: keep its start rather than nothing.
				b.WriteString("- " + digest.Truncate(l, max(budget-3, 1)) + "\n")
			}
			break
		}
		used += n
		b.WriteString("- " + l + "\n")
	}
	if b.Len() == 0 {
		return "- (none found)\n"
	}
	return b.String()
}

func bulletize(picked string) string {
	var b strings.Builder
	for _, l := range strings.Split(picked, "\n") {
		if l = strings.TrimSpace(l); l != "" && !reMarker.MatchString(l) {
			b.WriteString("- ")
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return b.String()
}

type section struct {
	heading string
	body    func(budget int) string
}

// renderSections writes each heading with its body, sharing the budget
// equally; the headings are always written so the shape never varies.
func renderSections(level string, sections []section, target int) string {
	overhead := 0
	for _, s := range sections {
		overhead += utf8.RuneCountInString(level+" "+s.heading+"\n") + 1
	}
	// Below 40 characters a section holds nothing useful: the shape wins
	// over the target then.
	share := max((target-overhead)/len(sections), 40)
	var b strings.Builder
	for i, s := range sections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s\n", level, s.heading)
		b.WriteString(s.body(share))
	}
	return strings.TrimRight(b.String(), "\n")
}

// HistorySections are the headings of the history prompt (seed 002), in
// order.
var HistorySections = []string{
	"Technical Context", "Project Overview", "Code Changes", "Debugging & Issues",
	"Current Status", "Pending Tasks", "User Preferences", "Key Decisions",
}

// SessionSections are the headings of the session prompt (seed 004), in
// order.
var SessionSections = []string{
	"Session Intent", "Artifacts Created", "Key Decisions", "Current Progress",
	"Critical Facts", "Next Steps", "Recovery References",
}

func historySummary(turns []turn, target int) string {
	return renderSections("##", []section{
		{HistorySections[0], list(turns, nil, matches(reTech))},
		{HistorySections[1], opening(firstOf(turns, "user"))},
		{HistorySections[2], list(turns, nil, either(matches(reCode), hasPath))},
		{HistorySections[3], list(turns, nil, matches(reIssue))},
		{HistorySections[4], list(lastOf(turns, "assistant"), nil, nil)},
		{HistorySections[5], opening(lastOf(turns, "user"))},
		{HistorySections[6], list(turns, byRole("user"), matches(rePref))},
		{HistorySections[7], list(turns, nil, matches(reDecision))},
	}, target)
}

// list is a section body of the selected lines as bullets.
func list(from []turn, keep func(turn) bool, line func(string) bool) func(int) string {
	return func(budget int) string { return bullets(linesOf(from, keep, line), budget) }
}

// opening is a section body of the first lines of a message.
func opening(from []turn) func(int) string {
	return func(budget int) string { return leading(linesOf(from, nil, nil), budget) }
}

func sessionSummary(turns []turn, target int, archiveRef string) string {
	return renderSections("###", []section{
		{SessionSections[0], opening(firstOf(turns, "user"))},
		{SessionSections[1], func(budget int) string { return artifactTable(turns, budget) }},
		{SessionSections[2], list(turns, nil, matches(reDecision))},
		{SessionSections[3], list(lastOf(turns, "assistant"), nil, nil)},
		{SessionSections[4], list(turns, nil, hasIdentifier)},
		{SessionSections[5], opening(lastOf(turns, "user"))},
		{SessionSections[6], func(int) string { return "- Full conversation: " + archiveRef + "\n" }},
	}, target)
}

// artifactTable lists the distinct paths named in the conversation, as seed
// 004's table. A path's status is the strongest thing any line did to it
// (created > modified > referenced), and stronger rows come first so that a
// small budget keeps the artifacts the session produced.
func artifactTable(turns []turn, budget int) string {
	const header = "| Artifact | Path | Status |\n|----------|------|--------|\n"
	statuses := []string{"created", "modified", "referenced"}
	rank := map[string]int{}
	var order []string
	for _, l := range linesOf(turns, nil, hasPath) {
		for _, p := range paths(l) {
			// Escaped JSON ("\n") yields false paths such as `e:\n`.
			if strings.Contains(p, `\n`) || strings.Contains(p, `\t`) {
				continue
			}
			r := artifactRank(l, p)
			old, seen := rank[p]
			if !seen {
				order = append(order, p)
				old = r
			}
			rank[p] = min(old, r)
		}
	}
	var b strings.Builder
	b.WriteString(header)
	used := utf8.RuneCountInString(header)
	for r, status := range statuses {
		for _, p := range order {
			if rank[p] != r {
				continue
			}
			row := fmt.Sprintf("| %s | %s | %s |\n", path.Base(p), p, status)
			n := utf8.RuneCountInString(row)
			if used+n > budget && b.Len() > len(header) {
				return b.String()
			}
			used += n
			b.WriteString(row)
		}
	}
	if b.Len() == len(header) {
		b.WriteString("| (none found) | | |\n")
	}
	return b.String()
}

// reCreated and reModified look at the words just before a path, so that a
// long line's verbs do not rub off on every path it names.
var (
	reCreated  = regexp.MustCompile(`(?i)(\bcreat\w*|\bwrote|\bwrit\w*|\badded|\bnew file|>>?)\s*[\w\s:'"]{0,40}$`)
	reModified = regexp.MustCompile(`(?i)(\bmodif\w*|\bedit\w*|\bpatch\w*|\bupdat\w*|\bchang\w*|\bfix\w*|\bsed -i)\s*[\w\s:'"]{0,40}$`)
)

// artifactRank is 0 (created), 1 (modified) or 2 (referenced) for the first
// mention of p in line.
func artifactRank(line, p string) int {
	i := strings.Index(line, p)
	if i < 0 {
		return 2
	}
	before := line[max(0, i-60):i]
	switch {
	case reCreated.MatchString(before):
		return 0
	case reModified.MatchString(before):
		return 1
	default:
		return 2
	}
}

// repairSummary appends what the previous summary omitted, each item with
// the source line around it, under a heading of the summary's own level.
func repairSummary(previous, source string, missing []string) string {
	level := "##"
	if strings.Contains("\n"+previous, "\n### ") {
		level = "###"
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(previous, "\n"))
	fmt.Fprintf(&b, "\n\n%s Omitted Items\n", level)
	for _, item := range missing {
		b.WriteString("- ")
		b.WriteString(excerptAround(source, item, 120))
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// excerptAround returns the item with up to radius bytes of its first
// occurrence's line around it, or the item alone when the source lacks it.
func excerptAround(source, item string, radius int) string {
	i := strings.Index(source, item)
	if i < 0 || item == "" {
		return item
	}
	lineStart := strings.LastIndexByte(source[:i], '\n') + 1
	lineEnd := len(source)
	if j := strings.IndexByte(source[i:], '\n'); j >= 0 {
		lineEnd = i + j
	}
	start := max(lineStart, i-radius)
	end := min(lineEnd, i+len(item)+radius)
	for start > lineStart && !utf8.RuneStart(source[start]) {
		start--
	}
	for end < lineEnd && !utf8.RuneStart(source[end]) {
		end++
	}
	return strings.TrimSpace(source[start:end])
}
