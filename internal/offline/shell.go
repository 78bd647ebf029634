package offline

import (
	"encoding/json"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

// The shell side of the structured summary: which files a tool call read,
// created or changed, from its command line (a small tokenizer with
// quotes, pipes, redirects and heredocs) or its file-tool arguments.

// fileTracker collects the paths a transcript touched and the actions on
// each, in first-seen order.
type fileTracker struct {
	byPath map[string]*fileEntry
	order  []*fileEntry
	// inCall is set while a tool call's input is read: the paths it
	// names are the agent's own (fileEntry.inCall).
	inCall bool
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
	f.inCall = f.inCall || ft.inCall
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
// rankNamed is the rank of a path the agent only named.
const rankNamed = 3

func fileRank(f *fileEntry) int {
	rank := rankNamed
	for _, a := range f.actions {
		switch a {
		case actCreated, actWritten, actEdited, actAppended, actDeleted, actMoved:
			return 0
		case actRan:
			rank = min(rank, 1)
		case actNamed:
			if f.inCall {
				// Named in the agent's own call: its trail, like a read.
				rank = min(rank, 2)
			}
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
	ft.inCall = true
	defer func() { ft.inCall = false }()
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
	for _, id := range drift.Identifiers(script) {
		if id.Kind != drift.KindPath {
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
