package offline

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// ExtractiveModel is the Response.Model of the offline summarizer.
const ExtractiveModel = "extractive"

// Summarizer summarizes without an LLM. It is the offline default and the
// fallback when the LLM is down, so it is the first summary a new user
// sees.
//
// A conversation (the history, session and brief prompts) is summarized
// from its structure (see structured.go): the task, the constraints, every
// file touched and what was done to it, the commands and their outcomes,
// the errors and whether they were resolved, the decisions, the current
// state and the next step, each copied verbatim and written under the
// headings the LLM would fill, so that the output has the same shape
// whichever summarizer ran. Text that is not a conversation (a tool
// result, a chunk, merged chunk summaries) gets textcut.KeepLines's most
// informative lines.
//
// Conversation text is read as plan.Transcript writes it ("[user]",
// "[assistant tool call bash]", "[tool tool result bash]" blocks), or else
// as a transcript when lines start with a role marker ("user:",
// "Assistant:", "[tool] …", "## user"); text without markers is one
// message of unknown role.
type Summarizer struct {
	// Required are the identifiers a summary of the request's text must
	// keep (drift.Required), when the caller already has them (the drift
	// check's cache of its source); nil: they are found in the text.
	Required []drift.Identifier
}

// Summarize implements llm.Summarizer.
func (e Summarizer) Summarize(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.Canceled, Message: "call canceled by the caller", Err: err}
	}
	if err := req.Validate(); err != nil {
		return llm.Response{}, badRequest(err)
	}
	p, err := llm.LoadPrompt(req.Prompt)
	if err != nil {
		return llm.Response{}, badRequest(err)
	}
	target := extractiveTarget(req)
	var text string
	switch req.Prompt {
	case llm.PromptHistory:
		events, _ := parseEvents(req.Text)
		text = renderDigest(buildDigest(events).withRefs(req.Text, e.Required), "##", historyLayout(), target)
	case llm.PromptSession:
		events, _ := parseEvents(req.Text)
		text = renderDigest(buildDigest(events).withRefs(req.Text, e.Required), "###", sessionLayout(req.ArchiveRef), target)
	case llm.PromptRepair:
		text = repairSummary(req.Context, req.Text, req.Missing)
	case llm.PromptJudge:
		text = llm.HeuristicVerdict(req.Text, req.Context)
	case llm.PromptChunk, llm.PromptMerge, llm.PromptResult:
		// The react-two-layer map-reduce over tool output: no conversation here,
		// even when the output happens to hold "user:" lines.
		text = textcut.KeepLines(req.Text, target)
	default:
		if events, ok := parseEvents(req.Text); ok {
			text = renderDigest(buildDigest(events).withRefs(req.Text, e.Required), "##", structuredLayout(), target)
		} else {
			text = textcut.KeepLines(req.Text, target)
		}
	}
	return llm.Response{
		Text:          text,
		Model:         ExtractiveModel,
		PromptVersion: p.Version,
		Offline:       true,
	}, nil
}

// badRequest is the llm.Error of a request refused before any work, as the
// model's client would refuse it.
func badRequest(err error) *llm.Error {
	return &llm.Error{Kind: llm.BadRequest, Message: err.Error(), Err: err}
}

// extractiveTarget is the character budget: the request's, or the ReAct
// two-layer design's 10% when a brief summary comes without one.
func extractiveTarget(req llm.Request) int {
	switch {
	case req.TargetChars > 0:
		return req.TargetChars
	case req.TargetTokens > 0:
		return req.TargetTokens * llm.CharsPerToken
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

// Line patterns shared by the summaries.
var (
	// reTrivial is a line with nothing to keep: a lone markup tag or only
	// punctuation.
	reTrivial = regexp.MustCompile(`^((\s*</?[\w.-]+/?>)+|[^\pL\pN]*)\s*$`)
	// reMarker is textcut's "[… 3 lines omitted …]" line.
	reMarker = regexp.MustCompile(`^\[… \d+ (lines?|chars) omitted …\]$`)
)

// paths are the file paths drift finds in a line.
func paths(line string) []string {
	var out []string
	for _, id := range drift.Identifiers(line) {
		if id.Kind == drift.KindPath {
			out = append(out, id.Value)
		}
	}
	return out
}

// HistorySections are the headings of the history prompt (offload-compact), in
// order.
var HistorySections = []string{
	"Technical Context", "Project Overview", "Code Changes", "Debugging & Issues",
	"Current Status", "Pending Tasks", "User Preferences", "Key Decisions",
}

// SessionSections are the headings of the session prompt (three-tier tier 3), in
// order.
var SessionSections = []string{
	"Session Intent", "Artifacts Created", "Key Decisions", "Current Progress",
	"Critical Facts", "Next Steps", "Recovery References",
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

// repairSummary appends what the previous summary omitted under a heading
// of the summary's own level. When the source is a conversation, an item
// comes as the structured digest writes the line that holds it (a file
// with its actions, a command with its outcome, an error with its status);
// otherwise, or when no line of the digest holds it, with the source line
// around it.
func repairSummary(previous, source string, missing []string) string {
	level := "##"
	if strings.Contains("\n"+previous, "\n### ") {
		level = "###"
	}
	var lines []string
	if events, ok := parseEvents(source); ok {
		lines = buildDigest(events).lines()
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(previous, "\n"))
	fmt.Fprintf(&b, "\n\n%s Omitted Items\n", level)
	for _, item := range missing {
		found := ""
		for _, l := range lines {
			if item != "" && strings.Contains(l, item) {
				found = l
				break
			}
		}
		if found == "" {
			found = excerptAround(source, item, 120)
		}
		b.WriteString("- ")
		b.WriteString(found)
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
