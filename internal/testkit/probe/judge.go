package probe

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The four categories of Factory's probe evaluation.
const (
	CategoryRecall       = "recall"
	CategoryArtifact     = "artifact"
	CategoryContinuation = "continuation"
	CategoryDecision     = "decision"
)

// Question is one probe question for the LLM-judge mode: asked of an agent
// that sees only the compacted conversation, graded 0–5 against Reference
// (taken from the original).
type Question struct {
	Category  string
	Text      string
	Reference string
}

// Questions are a Set's probes as questions, one or more per category;
// a probe the original does not have is not asked.
func Questions(s Set) []Question {
	var qs []Question
	add := func(cat, text, ref string) {
		if strings.TrimSpace(ref) != "" {
			qs = append(qs, Question{Category: cat, Text: text, Reference: ref})
		}
	}
	add(CategoryRecall, "What task were you given, in the user's words?", cut(s.Task, 600))
	add(CategoryRecall, "What were the last errors you ran into?", strings.Join(s.Errors, "\n"))
	add(CategoryArtifact, "Which files have you read, created or changed so far?", strings.Join(s.Artifacts, "\n"))
	add(CategoryContinuation, "What were the last commands you ran?", strings.Join(s.Commands, "\n"))
	add(CategoryContinuation, "What were you about to do next?", s.Plan)
	add(CategoryDecision, "What have you concluded or decided so far, and why?", s.Plan+"\n"+s.Current)
	return qs
}

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Prompt renders the questions for the answering agent (references off)
// or for the grader (references on), numbered from 1.
func Prompt(qs []Question, withReferences bool) string {
	var sb strings.Builder
	for i, q := range qs {
		fmt.Fprintf(&sb, "%d. [%s] %s\n", i+1, q.Category, q.Text)
		if withReferences {
			sb.WriteString("   Reference:\n")
			for _, l := range strings.Split(q.Reference, "\n") {
				sb.WriteString("   > " + l + "\n")
			}
		}
	}
	return sb.String()
}

// reGrade is one grader line, "N: SCORE".
var reGrade = regexp.MustCompile(`(?m)^\s*(\d+)\s*[:.)-]\s*([0-5])\b`)

// ParseGrades reads the grader's answer into one score per question. A
// question without a line, a number out of range or a question graded
// twice is an error naming it: an unusable grade is never read as a 0.
func ParseGrades(text string, n int) ([]int, error) {
	scores := make([]int, n)
	seen := make([]bool, n)
	for _, m := range reGrade.FindAllStringSubmatch(text, -1) {
		i, _ := strconv.Atoi(m[1])
		if i < 1 || i > n {
			return nil, fmt.Errorf("grade for question %d: there are %d questions", i, n)
		}
		if seen[i-1] {
			return nil, fmt.Errorf("question %d graded twice", i)
		}
		seen[i-1] = true
		scores[i-1], _ = strconv.Atoi(m[2])
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("no grade for question %d", i+1)
		}
	}
	return scores, nil
}

// ByCategory averages scores (in Questions order) per category.
func ByCategory(qs []Question, scores []int) map[string]float64 {
	sum, n := map[string]float64{}, map[string]float64{}
	for i, q := range qs {
		if i < len(scores) {
			sum[q.Category] += float64(scores[i])
			n[q.Category]++
		}
	}
	out := map[string]float64{}
	for c := range sum {
		out[c] = sum[c] / n[c]
	}
	return out
}
