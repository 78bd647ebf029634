// Package probe measures what an agent gets back from a compaction, the
// way published evaluations of context compression do (Factory's probe
// evaluation: recall, artifact trail, continuation, decision; ACON's
// "what the agent needs next"). From the original conversation it derives,
// deterministically, the facts an agent needs to continue (Derive); from a
// compacted output it tells which of them are still there, which the agent
// can get back through the recovery tools with the ids the output names,
// and which are lost (Score).
//
// It is pure: the bench and the tests feed it conversations and a recovery
// function.
package probe

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// Recent is how many of the last errors and commands are probed.
const Recent = 5

// Set is the probes of one original conversation.
type Set struct {
	// Task is the first user message's text: the task statement, which
	// must survive verbatim.
	Task string
	// Pinned are user messages holding a pin marker, verbatim.
	Pinned []string
	// Artifacts are the file paths named in the agent's tool calls (what
	// it read, created or changed), in first-seen order.
	Artifacts []string
	// Errors are the last Recent distinct error lines seen in tool results
	// (ErrorLines).
	Errors []string
	// Commands are the last Recent distinct commands the agent ran (their
	// first line, cut to headRunes like Errors).
	Commands []string
	// Plan is the agent's last stated plan: the first line of its last
	// text before its last call.
	Plan string
	// Current is the current turn: the first line of the last message's
	// text or result.
	Current string
}

// Derive takes the probes of an original conversation. pinMarkers are the
// markers that pin a user message (policy.DefaultPinMarkers).
func Derive(c conversation.Conversation, pinMarkers []string) Set {
	var s Set
	seenPath := map[string]bool{}
	var errs, cmds []string
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			switch b.Kind {
			case conversation.KindText:
				if m.Role == conversation.RoleUser && s.Task == "" && strings.TrimSpace(b.Text) != "" {
					s.Task = b.Text
				}
				if m.Role == conversation.RoleUser && hasMarker(b.Text, pinMarkers) && b.Text != s.Task {
					s.Pinned = append(s.Pinned, b.Text)
				}
				if m.Role == conversation.RoleAssistant {
					if l := firstLine(b.Text); l != "" {
						s.Plan = l
					}
				}
			case conversation.KindToolUse:
				cmd := Command(b.Input)
				if cmd != "" {
					cmds = appendRecent(cmds, textcut.Truncate(cmd, headRunes))
				}
				for _, p := range CallPaths(b.Input) {
					if !seenPath[p] {
						seenPath[p] = true
						s.Artifacts = append(s.Artifacts, p)
					}
				}
			case conversation.KindToolResult:
				for _, l := range ErrorLines(b.Text) {
					errs = appendRecent(errs, l)
				}
			}
		}
	}
	s.Errors = lastN(errs, Recent)
	s.Commands = lastN(cmds, Recent)
	if n := len(c.Messages); n > 0 {
		for _, b := range c.Messages[n-1].Blocks {
			if l := firstLine(b.Text); l != "" {
				s.Current = l
				break
			}
		}
	}
	return s
}

func hasMarker(text string, markers []string) bool {
	for _, m := range markers {
		if m != "" && strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// appendRecent appends v, moving it to the end when it is already there, so
// that the list ends with the most recent distinct values.
func appendRecent(list []string, v string) []string {
	for i, x := range list {
		if x == v {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	return append(list, v)
}

func lastN(list []string, n int) []string {
	if len(list) > n {
		return append([]string(nil), list[len(list)-n:]...)
	}
	return list
}

// firstLine is the first non-empty line of text, trimmed, at most 200
// bytes (a probe is a sentence, not a page).
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return textcut.Truncate(l, 200)
		}
	}
	return ""
}

// Command is the command a tool call ran: the "command" (or "cmd")
// string of its JSON arguments; the arguments themselves when they are
// not JSON. Editor calls ({"command":"view","path":…}) name the path
// instead of a shell command and count as their command word and path.
func Command(input string) string {
	input = strings.TrimSpace(input)
	if input == "" {
		return ""
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		return firstLine(input)
	}
	for _, k := range []string{"command", "cmd", "code", "query"} {
		v, ok := args[k].(string)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if p, ok := args["path"].(string); ok && !strings.ContainsAny(v, " \n") {
			return v + " " + p
		}
		return firstLine(v)
	}
	return ""
}

// CallPaths are the files a tool call names: the paths in its shell
// command outside heredoc bodies (a script's text is the content of a
// file, not what the agent touched) and in its path-like arguments
// ("path", "file_path", …); not in the content it writes.
func CallPaths(input string) []string {
	var args map[string]any
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		return Paths(stripHeredocs(input))
	}
	var text strings.Builder
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v, ok := args[k].(string)
		if !ok {
			continue
		}
		switch lk := strings.ToLower(k); {
		case lk == "command" || lk == "cmd":
			text.WriteString(stripHeredocs(v))
		case strings.Contains(lk, "path") || strings.Contains(lk, "file") && !strings.Contains(lk, "text"):
			text.WriteString(v)
		default:
			continue
		}
		text.WriteByte('\n')
	}
	return Paths(text.String())
}

// reHeredoc opens a heredoc: <<EOF, <<'EOF', <<-"EOF".
var reHeredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// stripHeredocs removes the bodies of a shell script's heredocs, keeping
// the command lines around them.
func stripHeredocs(script string) string {
	lines := strings.Split(script, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		m := reHeredoc.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != m[1]; i++ {
		}
	}
	return strings.Join(out, "\n")
}

// Paths are the file paths a text names, as the drift check's identifier
// extraction finds them, without the fragments of escaped JSON.
func Paths(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range drift.Identifiers(text) {
		p := id.Value
		if id.Kind != drift.KindPath || seen[p] || strings.ContainsAny(p, "\\\"'") {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

// reError is a line that reports a failure: an exception with its
// message (the last line of a traceback), a test runner's ERROR/FAIL
// lines, pytest's "E   …", a tool's "error:"/"fatal:"/"panic:". A line
// that merely mentions errors (a comment in a file that was read, the
// "Traceback (most recent call last):" header) is none.
var reError = regexp.MustCompile(`^[A-Za-z_][\w.]*(Error|Exception|Failure)(:|$)|^(ERROR|FAIL|FAILED)\b|^E\s{2,}\S|(?i)^(error|fatal|panic)(\[[^\]]*\])?:`)

// headRunes is how much of a long error line or command identifies it: a
// summary may clip a long line, and its head is what the agent needs to
// recognize the failure.
const headRunes = 100

// ErrorLines are the lines of a tool result that report a failure, trimmed
// and cut to their first headRunes characters.
func ErrorLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if len(l) < 8 || !reError.MatchString(l) {
			continue
		}
		out = append(out, textcut.Truncate(l, headRunes))
	}
	return out
}
