package offline

import (
	"regexp"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

// maxPathList is the most paths a summary lists bare, one after another,
// before it counts the rest instead (capNamed, the reflection's list).
const maxPathList = 20

// Boilerplate returns the lines of a summary (a block of the session log,
// a history summary) that tell a resumed agent nothing: placeholders of
// empty sections, tool-output wrapper tags read as paths or lines, bare
// JSON fragments of a tool call's arguments, a reflection's opening
// nested inside another block, and the paths of a bare path list past
// its 20th. The summaries of this package write none: the quality test
// (TestOfflineSummaryQuality) holds them to it on real trajectories.
func Boilerplate(summary string) []string {
	var out []string
	lines := strings.Split(summary, "\n")
	bare := 0 // consecutive bullets that are a path and nothing else
	for i, l := range lines {
		t := strings.TrimSpace(l)
		body := strings.TrimSpace(strings.TrimPrefix(t, "- "))
		switch {
		case t == "":
			bare = 0
			continue
		case strings.Contains(t, "(none found)"),
			reWrapperTag.MatchString(body),
			reJSONFragment.MatchString(body),
			i > 0 && reflectionLine.MatchString(t):
			out = append(out, l)
			continue
		}
		if strings.HasPrefix(t, "- ") && isBarePath(body) {
			bare++
			if bare > maxPathList {
				out = append(out, l)
			}
		} else {
			bare = 0
		}
		if n := pathCount(body); n > maxPathList && isPathList(body) {
			out = append(out, l)
		}
	}
	return out
}

var (
	// reWrapperTag is a line that is only a tool-output wrapper tag, or
	// one read as a path ("/returncode").
	reWrapperTag = regexp.MustCompile(`^(</?|/)(returncode|output|stdout|stderr|exit_code|warning|tool_result|function_results|result)>?$`)
	// reJSONFragment is what is left of a tool call's JSON arguments when
	// their keys are taken out: `{ "ls -la"}`.
	reJSONFragment = regexp.MustCompile(`^\{\s*"[^"]*"?\s*\}?$|^\{\s*"\s`)
	// reflectionLine is the opening line of a reflection (plan.Reflection).
	reflectionLine = regexp.MustCompile(`^(- )?Reflection of \d+ session log blocks`)
)

// isBarePath reports whether s is one path and nothing else.
func isBarePath(s string) bool {
	ids := drift.Identifiers(s)
	return len(ids) == 1 && ids[0].Kind == drift.KindPath && strings.TrimSpace(s) == ids[0].Value
}

// pathCount counts the paths a line names.
func pathCount(s string) int {
	n := 0
	for _, id := range drift.Identifiers(s) {
		if id.Kind == drift.KindPath {
			n++
		}
	}
	return n
}

// isPathList reports whether a line is a list of paths: what is left
// when its paths are taken out is separators and a short label.
func isPathList(s string) bool {
	rest := s
	for _, id := range drift.Identifiers(s) {
		if id.Kind == drift.KindPath {
			rest = strings.Replace(rest, id.Value, "", 1)
		}
	}
	words := 0
	for _, f := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == ':' }) {
		if f != "" {
			words++
		}
	}
	return words < 8
}
