package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// DefaultTruncateTools are the write/edit tools whose inputs the three-tier
// tier-2 input truncation shortens once their content is on disk.
var DefaultTruncateTools = []string{
	"write_file", "edit_file", "str_replace_editor", "create_file",
	"apply_patch", "Write", "Edit", "MultiEdit",
}

// truncatedKey is the field of a truncated input that holds the reference;
// its presence marks an input as already truncated.
const truncatedKey = "truncated_input"

// TruncateOptions tunes TruncateInputs.
type TruncateOptions struct {
	// Tools whose inputs may be truncated; nil means DefaultTruncateTools.
	// Calls of any tool whose "command" writes a file through a heredoc
	// ("cat > f <<EOF", "cat <<EOF > f", "tee f <<EOF") are truncated too.
	Tools []string
	// MinTokens: only inputs larger than this are truncated.
	MinTokens int
	// Protected messages are never changed (nil: none).
	Protected []bool
	// RecoverID, when set, gives the id recover_context reads the
	// original input of the call at (msg, block) back with; the
	// reference names it ("" names none).
	RecoverID func(msg, block int) string
}

// TruncateStats reports what TruncateInputs did.
type TruncateStats struct {
	// Count is the number of truncated calls.
	Count int
	// TokensSaved is the drop in input size, in the counter's unit.
	TokensSaved int
}

// truncatedInput is the JSON object that replaces a truncated input: an
// object, because Anthropic requires tool_use input to be one and OpenAI
// requires arguments to be JSON.
type truncatedInput struct {
	Path      string `json:"path"`
	Truncated string `json:"truncated_input"`
}

// TruncateInputs replaces the inputs of old write/edit calls with the
// three-tier tier-2 reference ("## Tool Call: …", original size, path, summary,
// "Content persisted to disk"). A call qualifies when its message is not
// protected, its input is larger than MinTokens, names a file, and its
// result exists and is not an error: only then is the content known to be
// on disk. Inputs are only replaced when that makes them smaller. ReAct
// trajectories are refused: the ReAct two-layer design never touches an action.
func TruncateInputs(c conversation.Conversation, count tokens.Counter, opts TruncateOptions) (conversation.Conversation, TruncateStats, error) {
	if c.Format == conversation.FormatReAct {
		return conversation.Conversation{}, TruncateStats{}, fmt.Errorf("truncate tool inputs of a %s conversation: %w", c.Format, ErrUnsupportedFormat)
	}
	if err := checkMask(c, opts.Protected); err != nil {
		return conversation.Conversation{}, TruncateStats{}, fmt.Errorf("truncate tool inputs: %w", err)
	}
	tools := opts.Tools
	if tools == nil {
		tools = DefaultTruncateTools
	}
	idx := indexTools(c)
	mask := closePairs(c, idx, opts.Protected)

	out := c.Clone()
	var stats TruncateStats
	for i := range out.Messages {
		if mask[i] {
			continue
		}
		for j := range out.Messages[i].Blocks {
			b := &out.Messages[i].Blocks[j]
			if b.Kind != conversation.KindToolUse || !idx.succeeded(conversation.Pos{Msg: i, Block: j}) {
				continue
			}
			w, ok := describeWrite(b.ToolName, b.Input, tools)
			if !ok {
				continue
			}
			before := count.Count(b.Input)
			if before <= opts.MinTokens {
				continue
			}
			ref := inputReference(b.ToolName, before, w)
			if opts.RecoverID != nil {
				if id := opts.RecoverID(i, j); id != "" {
					ref += "\n**Recover:** the full input with the " + RecoverTool + " tool, id: " + id
				}
			}
			encoded, err := marshalPlain(truncatedInput{Path: w.path, Truncated: ref})
			if err != nil {
				return conversation.Conversation{}, TruncateStats{}, fmt.Errorf("truncate input of call %q in message %d: %w", b.ToolID, i, err)
			}
			after := count.Count(string(encoded))
			if after >= before {
				continue
			}
			b.Input = string(encoded)
			stats.Count++
			stats.TokensSaved += before - after
		}
	}
	return out, stats, nil
}

// marshalPlain is json.Marshal without HTML escaping: the reference is
// read by a model, for which "<<" is a heredoc and "\u003c\u003c" noise.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// succeeded reports whether the call at p has a result that is not an
// error: only then is its content known to be on disk.
func (idx toolIndex) succeeded(p conversation.Pos) bool {
	r, ok := idx.other(p)
	return ok && !idx.c.Messages[r.Msg].Blocks[r.Block].IsError
}

// write describes what a write/edit call did, for its reference.
type write struct {
	path    string
	verb    string
	content string
}

// Heredoc forms that write a file: cat > f <<EOF, cat >> f <<EOF,
// cat <<EOF > f and tee [-a] f <<EOF.
var (
	heredocCatTarget = regexp.MustCompile(`(?m)\bcat\s+>>?\s*(['"]?)([^\s'"<>|;&]+)(['"]?)\s*<<-?\s*['"]?\w+`)
	heredocCatAfter  = regexp.MustCompile(`(?m)\bcat\s+<<-?\s*['"]?\w+['"]?\s*>>?\s*(['"]?)([^\s'"<>|;&]+)`)
	heredocTee       = regexp.MustCompile(`(?m)\btee\s+(?:-a\s+)?(['"]?)([^\s'"<>|;&-][^\s'"<>|;&]*)(['"]?)\s*<<-?\s*['"]?\w+`)
	patchFileLine    = regexp.MustCompile(`(?m)^\*\*\* (?:Add|Update) File: (.+)$|^\+\+\+ (?:b/)?(\S+)`)
)

// pathKeys are the input fields that name the written file, in order of
// preference.
var pathKeys = []string{"path", "file_path", "filepath", "filename", "file", "target_file", "notebook_path"}

// describeWrite decides whether a call wrote a file, and which. Inputs that
// are not JSON objects, name no file, or are already truncated do not
// qualify; nor do str_replace_editor's read-only commands.
func describeWrite(name, input string, tools []string) (write, bool) {
	var fields map[string]any
	if err := json.Unmarshal([]byte(input), &fields); err != nil {
		return write{}, false
	}
	if _, done := fields[truncatedKey]; done {
		return write{}, false
	}
	str := func(k string) string {
		s, _ := fields[k].(string)
		return s
	}
	if slices.Contains(tools, name) {
		if cmd := str("command"); cmd == "view" || cmd == "undo_edit" {
			return write{}, false
		}
		w := write{verb: "wrote"}
		for _, k := range pathKeys {
			if p := str(k); p != "" {
				w.path = p
				break
			}
		}
		for _, k := range []string{"content", "file_text", "new_str", "new_string", "patch", "input", "diff"} {
			if s := str(k); s != "" {
				w.content = s
				break
			}
		}
		lower := strings.ToLower(name)
		switch cmd := str("command"); {
		case cmd == "create":
			w.verb = "wrote"
		case cmd == "str_replace" || cmd == "insert":
			w.verb = "edited"
		case strings.Contains(lower, "patch"):
			w.verb = "patched"
			if w.path == "" {
				w.path = patchPaths(w.content)
			}
		case strings.Contains(lower, "edit"):
			w.verb = "edited"
		}
		if edits, ok := fields["edits"].([]any); ok && w.content == "" {
			w.content = fmt.Sprintf("%d edits", len(edits))
		}
		if w.path == "" {
			return write{}, false
		}
		return w, true
	}
	cmd := str("command")
	if cmd == "" {
		cmd = str("cmd")
	}
	if p := heredocPath(cmd); p != "" {
		return write{path: p, verb: "wrote (heredoc)", content: cmd}, true
	}
	return write{}, false
}

// heredocPath returns the file a shell command writes through a heredoc.
func heredocPath(cmd string) string {
	if !strings.Contains(cmd, "<<") {
		return ""
	}
	for _, re := range []*regexp.Regexp{heredocCatTarget, heredocCatAfter, heredocTee} {
		if m := re.FindStringSubmatch(cmd); m != nil {
			return m[2]
		}
	}
	return ""
}

// patchPaths lists the files a patch adds or updates.
func patchPaths(patch string) string {
	var paths []string
	for _, m := range patchFileLine.FindAllStringSubmatch(patch, -1) {
		p := strings.TrimSpace(m[1] + m[2])
		if p != "" && p != "/dev/null" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return strings.Join(paths, ", ")
}

// inputReference renders the tier-2 truncated-call block. The summary is
// mechanical (what, where, how much, first line) so it is deterministic.
func inputReference(name string, tokens int, w write) string {
	lines := strings.Count(w.content, "\n")
	if w.content != "" && !strings.HasSuffix(w.content, "\n") {
		lines++
	}
	summary := fmt.Sprintf("%s %s %s (%d lines, %d chars of input)", name, w.verb, w.path, lines, utf8.RuneCountInString(w.content))
	if first := firstLine(w.content, 80); first != "" {
		summary += "; first line: " + strconv.Quote(first)
	}
	var sb strings.Builder
	sb.WriteString("## Tool Call: " + name + "\n")
	sb.WriteString("**Original Size:** " + strconv.Itoa(tokens) + " tokens\n")
	sb.WriteString("**Path:** " + w.path + "\n")
	sb.WriteString("**Summary:** " + summary + "\n")
	sb.WriteString("**Status:** Content persisted to disk")
	return sb.String()
}

// firstLine returns the first non-blank line of s, cut to limit characters.
func firstLine(s string, limit int) string {
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		r := []rune(line)
		if len(r) > limit {
			return string(r[:limit]) + "…"
		}
		return line
	}
	return ""
}
