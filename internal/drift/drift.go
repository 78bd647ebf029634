package drift

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// The three-tier drift checks of a session summary against the transcript it
// summarizes, besides identifier retention. Offline and deterministic:
// word and pattern heuristics, each with its score, its verdict and what
// the summary misses (which a repair pass is then asked to restore).
const (
	CheckIntent        = "intent"
	CheckTrajectory    = "trajectory"
	CheckPremature     = "premature-completion"
	CheckClarification = "clarification"
	// CheckLastErrors is the product's own check beside the design's
	// four: the last errors the agent's tools reported are kept.
	CheckLastErrors = "last-errors"
)

// Check is the verdict of one check.
type Check struct {
	Name    string
	Passed  bool
	Score   float64
	Missing []string
	Note    string
}

// transcriptBlock is one "[role …]" block of a transcript.
type transcriptBlock struct {
	head string // "user", "assistant", "assistant tool call bash", "tool tool result bash", …
	text string
}

// parseTranscriptBlocks splits a transcript as plan.Transcript writes it:
// "[header]\ntext\n\n" per block.
func parseTranscriptBlocks(t string) []transcriptBlock {
	var out []transcriptBlock
	// A block's text is the run of lines after its header: one substring
	// of t, cut when the next header (or the end) is found, never built
	// up line by line (that copied a long tool result once per line).
	start := -1
	end := func(at int) {
		if start >= 0 {
			out[len(out)-1].text = strings.TrimSpace(t[start:at])
		}
	}
	for pos := 0; pos < len(t); {
		next := len(t)
		if i := strings.IndexByte(t[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		trimmed := strings.TrimRight(t[pos:next], "\n")
		if strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]") && !strings.Contains(trimmed[1:len(trimmed)-1], "[") {
			head := trimmed[1 : len(trimmed)-1]
			if head == "user" || head == "assistant" || head == "system" || strings.HasPrefix(head, "assistant tool call") || strings.HasPrefix(head, "tool ") {
				end(pos)
				out = append(out, transcriptBlock{head: head})
				start = next
			}
		}
		pos = next
	}
	end(len(t))
	return out
}

var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`about above after again against because before being below between
		could doing during further having other should their there these those through under until where
		which while would shall might must will with from that this what when your yours into than then
		them they have been were does also only some such very just more most make made like need want`) {
		stopwords[w] = true
	}
}

// keyWords are the distinctive words of a text: 5+ letters, no stopwords,
// first occurrence order, at most n.
func keyWords(text string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	}) {
		if len([]rune(w)) < 5 || stopwords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == n {
			break
		}
	}
	return out
}

// coverage is the share of words present in text, and those missing.
func coverage(words []string, text string) (float64, []string) {
	if len(words) == 0 {
		return 1, nil
	}
	lower := strings.ToLower(text)
	var missing []string
	for _, w := range words {
		if !strings.Contains(lower, w) {
			missing = append(missing, w)
		}
	}
	return float64(len(words)-len(missing)) / float64(len(words)), missing
}

var (
	doneClaim = regexp.MustCompile(`(?i)\b(task (is )?(now )?(complete|completed|done|finished)|all tests (now )?pass(ed)?|successfully (fixed|resolved|completed|implemented)|(issue|bug|problem) (is|has been) (fixed|resolved)|work is (complete|done))\b`)
	openSign  = regexp.MustCompile(`(?i)(traceback \(most recent call last\)|\berror:|\bfailed\b|\bfailures?\b|\bexception\b|returncode>[1-9]|exit (code|status) [1-9])`)
	passSign  = regexp.MustCompile(`(?i)(\ball tests pass|\bok \(|\bpassed\b|returncode>0<)`)
	// failCount is a test summary with failures ("1 failed, 12 passed"):
	// open, whatever passed beside it.
	failCount = regexp.MustCompile(`(?i)\b[1-9]\d* (failed|errors?)\b`)
)

// SessionChecks runs the three-tier drift checks of a session summary against
// its transcript: intent alignment, trajectory, premature completion and
// clarification. A transcript without the thing a check looks at (the
// first request kept verbatim outside the summary, no question asked)
// passes that check.
func SessionChecks(transcript, summary string) []Check {
	blocks := parseTranscriptBlocks(transcript)
	return []Check{intentCheck(blocks, summary), trajectoryCheck(blocks, summary),
		prematureCheck(blocks, summary), clarificationCheck(blocks, summary)}
}

// intentCheck: the first request in the summarized range is present
// verbatim or restated (half of its distinctive words).
func intentCheck(blocks []transcriptBlock, summary string) Check {
	c := Check{Name: CheckIntent, Passed: true, Score: 1, Note: "the first request is kept verbatim outside the summary"}
	for _, b := range blocks {
		if b.head != "user" {
			continue
		}
		if strings.Contains(summary, b.text) {
			c.Note = "the first request is in the summary verbatim"
			return c
		}
		words := keyWords(b.text, 20)
		c.Score, c.Missing = coverage(words, summary)
		c.Passed = c.Score >= 0.5
		c.Note = fmt.Sprintf("%d of %d key words of the first request restated", len(words)-len(c.Missing), len(words))
		for i := range c.Missing {
			c.Missing[i] = "intent: " + c.Missing[i]
		}
		return c
	}
	return c
}

// reJSONKey is a key of a tool call's JSON arguments ("reservation_id":):
// the call's schema, not what it did.
var reJSONKey = regexp.MustCompile(`"[\w-]+"\s*:`)

// CallText is a tool call's input as the trajectory check reads it: as
// the agent wrote it (unescaped), without its arguments' keys or the
// product's own text. A summary that shows what the agent did last shows
// this.
func CallText(input string) string {
	return strings.TrimSpace(StripOwn(reJSONKey.ReplaceAllString(Unescape(input), " ")))
}

// trajectoryCheck: the summary follows what the agent did last: words of
// the last five tool calls, read as the agent wrote them (unescaped),
// without their arguments' keys or the product's own text (a truncated
// input's reference block, a recovery id).
func trajectoryCheck(blocks []transcriptBlock, summary string) Check {
	var calls []string
	for i := len(blocks) - 1; i >= 0 && len(calls) < 5; i-- {
		if strings.HasPrefix(blocks[i].head, "assistant tool call") {
			calls = append(calls, CallText(blocks[i].text))
		}
	}
	words := keyWords(strings.Join(calls, "\n"), 20)
	score, missing := coverage(words, Unescape(summary))
	for i := range missing {
		missing[i] = "recent action: " + missing[i]
	}
	return Check{Name: CheckTrajectory, Passed: score >= 0.4, Score: score, Missing: missing,
		Note: fmt.Sprintf("%d of %d key words of the last %d calls", len(words)-len(missing), len(words), len(calls))}
}

// prematureCheck: the summary does not claim done what the transcript's
// last results show open (an error or failure after the last success).
func prematureCheck(blocks []transcriptBlock, summary string) Check {
	c := Check{Name: CheckPremature, Passed: true, Score: 1}
	claim := doneClaim.FindString(summary)
	if claim == "" {
		c.Note = "the summary claims nothing done"
		return c
	}
	for i := len(blocks) - 1; i >= 0 && i >= len(blocks)-6; i-- {
		if !strings.HasPrefix(blocks[i].head, "tool ") {
			continue
		}
		open := openSign.FindStringIndex(blocks[i].text)
		pass := passSign.FindAllStringIndex(blocks[i].text, -1)
		failed := failCount.MatchString(blocks[i].text)
		if open == nil || (!failed && len(pass) > 0 && pass[len(pass)-1][0] > open[0]) {
			break // the latest result is a success: the claim may stand
		}
		line := lineAt(blocks[i].text, open[0])
		if kept := keptOpenLine(blocks[i].text, line, summary); kept != "" {
			// The summary claims done but keeps the open result with it
			// (the patch adds it, an error list marks it open): the
			// reader sees both.
			c.Note = fmt.Sprintf("the summary says %q and keeps the open result %q", claim, kept)
			return c
		}
		c.Passed, c.Score = false, 0
		c.Missing = []string{"still open: " + line}
		c.Note = fmt.Sprintf("the summary says %q but the last result shows %q", claim, line)
		return c
	}
	c.Note = fmt.Sprintf("the summary says %q and the last results agree", claim)
	return c
}

// clarificationCheck: questions the assistant asked the user, not yet
// answered, survive in the summary.
func clarificationCheck(blocks []transcriptBlock, summary string) Check {
	var open []string
	for i, b := range blocks {
		if b.head != "assistant" {
			continue
		}
		answered := false
		for _, later := range blocks[i+1:] {
			if later.head == "user" {
				answered = true
				break
			}
		}
		if answered {
			continue
		}
		for _, line := range strings.Split(b.text, "\n") {
			l := strings.TrimSpace(line)
			if IsQuestionToUser(l) {
				open = append(open, l)
			}
		}
	}
	c := Check{Name: CheckClarification, Passed: true, Score: 1, Note: "no open question to the user"}
	if len(open) == 0 {
		return c
	}
	kept := 0
	for _, q := range open {
		if s, _ := coverage(keyWords(q, 8), summary); s >= 0.5 {
			kept++
		} else {
			c.Missing = append(c.Missing, "open question: "+q)
		}
	}
	c.Score = float64(kept) / float64(len(open))
	c.Passed = kept == len(open)
	c.Note = fmt.Sprintf("%d of %d open questions to the user kept", kept, len(open))
	return c
}

var toUser = regexp.MustCompile(`(?i)\b(you|your|should i|shall i|would you|do you|can you|could you|which one|prefer)\b`)

func isToUser(q string) bool { return toUser.MatchString(q) }

// IsQuestionToUser reports whether a trimmed line of the assistant asks
// the user something: what the clarification check wants kept while no
// user message answers it.
func IsQuestionToUser(line string) bool { return strings.HasSuffix(line, "?") && isToUser(line) }

// lineAt is the line of text holding byte i, trimmed and bounded.
func lineAt(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text)
	} else {
		end += i
	}
	line := strings.TrimSpace(text[start:end])
	if r := []rune(line); len(r) > 160 {
		line = string(r[:160])
	}
	return line
}

// reOpenLine is a line of a result that says what is open: an exception
// ("KeyError: 'x'", "AssertionError"), an error or a failure report.
var reOpenLine = regexp.MustCompile(`^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b|(?i)\berror:|\bfailed\b|\bfailures?\b`)

// minOpenLine is how long a kept line must be to stand for the open
// result: "FAILED" alone is in any summary of a test run.
const minOpenLine = 12

// keptOpenLine is the line of an open result (line, where the open sign
// is, or one naming the exception or failure) that the summary holds, or
// "".
func keptOpenLine(result, line, summary string) string {
	sum := Comparable(summary)
	candidates := []string{line}
	for _, l := range strings.Split(result, "\n") {
		if l = strings.TrimSpace(l); reOpenLine.MatchString(l) {
			candidates = append(candidates, l)
		}
	}
	for _, l := range candidates {
		if k := Comparable(l); len(k) >= minOpenLine && strings.Contains(sum, k) {
			return l
		}
	}
	return ""
}

// LastErrorsCheck: the summary keeps the last errors of its transcript
// that are still open (required, as the offline summary finds them:
// offline.OpenErrors), each line as written, white space and quoting
// aside. A summary that says what failed in its own words still misses
// the line a resumed agent would search the code for; the repair pass is
// asked to restore the lines, and the patch appends those still missing.
func LastErrorsCheck(required []string, summary string) Check {
	c := Check{Name: CheckLastErrors, Passed: true, Score: 1, Note: "no open error among the last ones"}
	if len(required) == 0 {
		return c
	}
	sum := Comparable(summary)
	for _, e := range required {
		if !strings.Contains(sum, Comparable(e)) {
			c.Missing = append(c.Missing, "last error: "+e)
		}
	}
	kept := len(required) - len(c.Missing)
	c.Score = float64(kept) / float64(len(required))
	c.Passed = kept == len(required)
	c.Note = fmt.Sprintf("%d of the %d open last errors kept", kept, len(required))
	return c
}
