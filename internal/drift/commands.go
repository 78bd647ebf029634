package drift

import (
	"strings"
	"unicode"
)

// The finder of shell commands, and the byte and rune tests the
// scanners share.

// findCommands scans lines: "$ " prompts, shell code fences and lines that
// start with a common CLI; then backticked and JSON-embedded commands.
func findCommands(text string) []Match {
	var out []Match
	inFence, shellFence := false, false
	for off := 0; off < len(text); {
		nl := strings.IndexByte(text[off:], '\n')
		lineEnd := len(text)
		if nl >= 0 {
			lineEnd = off + nl
		}
		line := text[off:lineEnd]
		trimmed := strings.TrimSpace(line)
		lead := off + strings.Index(line, trimmed)
		switch {
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			if inFence {
				inFence, shellFence = false, false
			} else {
				inFence = true
				lang := strings.ToLower(strings.TrimSpace(trimmed[3:]))
				shellFence = lang == "sh" || lang == "bash" || lang == "shell" || lang == "console" || lang == "zsh" || lang == "shell-session"
			}
		case strings.HasPrefix(trimmed, "$ "):
			cmd := strings.TrimSpace(trimmed[2:])
			if cmd != "" && len(cmd) <= 500 {
				s := lead + strings.Index(trimmed, cmd)
				out = append(out, cmdMatch(text, s, s+len(cmd)))
			}
		case inFence && shellFence:
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") && len(trimmed) <= 500 {
				out = append(out, cmdMatch(text, lead, lead+len(trimmed)))
			}
		case !inFence && looksLikeCommandLine(trimmed):
			out = append(out, cmdMatch(text, lead, lead+len(trimmed)))
		}
		out = append(out, inlineCommands(text, off, line)...)
		if nl < 0 {
			break
		}
		off = lineEnd + 1
	}
	return out
}

// inlineCommands finds backticked commands and JSON "command"/"cmd"
// values on one line, by plain scanning: as regexps they ran on whole
// texts with the slow NFA engine.
func inlineCommands(text string, off int, line string) []Match {
	var out []Match
	for i := 0; i < len(line); {
		a := strings.IndexByte(line[i:], '`')
		if a < 0 {
			break
		}
		a += i
		b := strings.IndexByte(line[a+1:], '`')
		if b < 0 {
			break
		}
		b += a + 1
		if b == a+1 {
			i = a + 1 // empty pair: the second backtick may open the next
			continue
		}
		inner := line[a+1 : b]
		trimmed := strings.TrimSpace(inner)
		if len(trimmed) >= 2 && len(trimmed) <= 300 && looksLikeInlineCommand(trimmed) {
			s := off + a + 1 + strings.Index(inner, trimmed)
			out = append(out, cmdMatch(text, s, s+len(trimmed)))
		}
		i = b + 1
	}
	for _, key := range []string{`"command"`, `"cmd"`} {
		for i := 0; ; {
			k := strings.Index(line[i:], key)
			if k < 0 {
				break
			}
			i += k + len(key)
			if s, e, ok := jsonStringAfterColon(line, i); ok && e-s >= 2 && e-s <= 2000 {
				out = append(out, cmdMatch(text, off+s, off+e))
			}
		}
	}
	return out
}

// jsonStringAfterColon reads `\s*:\s*"…"` at i and returns the span of the
// string's raw (still escaped) content.
func jsonStringAfterColon(line string, i int) (int, int, bool) {
	skip := func() {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
	}
	skip()
	if i >= len(line) || line[i] != ':' {
		return 0, 0, false
	}
	i++
	skip()
	if i >= len(line) || line[i] != '"' {
		return 0, 0, false
	}
	start := i + 1
	for j := start; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return start, j, true
		}
	}
	return 0, 0, false
}

func cmdMatch(text string, s, e int) Match {
	return Match{Start: s, End: e, ID: Identifier{Kind: KindCommand, Value: text[s:e]}}
}

// commonCLIs start a command line. ambiguousCLIs are also English words, so
// a line starting with them needs shell-looking arguments.
var (
	commonCLIs = map[string]bool{
		"git": true, "python": true, "python3": true, "pip": true, "pip3": true, "go": true, "npm": true, "npx": true,
		"yarn": true, "pnpm": true, "cargo": true, "rustc": true, "make": true, "docker": true, "kubectl": true, "helm": true,
		"terraform": true, "curl": true, "wget": true, "ls": true, "cd": true, "cat": true, "grep": true, "rg": true,
		"find": true, "sed": true, "awk": true, "pytest": true, "node": true, "java": true, "mvn": true, "gradle": true,
		"rm": true, "cp": true, "mv": true, "mkdir": true, "chmod": true, "chown": true, "tar": true, "ssh": true, "scp": true,
		"psql": true, "mysql": true, "redis-cli": true, "aws": true, "gcloud": true, "az": true, "brew": true, "apt": true,
		"apt-get": true, "sudo": true, "bash": true, "sh": true, "uv": true, "poetry": true, "conda": true, "tox": true,
		"ruff": true, "black": true, "flake8": true, "mypy": true, "eslint": true, "tsc": true, "jest": true, "head": true,
		"tail": true, "wc": true, "sort": true, "diff": true, "patch": true, "touch": true, "systemctl": true,
		"journalctl": true, "gofmt": true, "gh": true, "jq": true, "export": true, "source": true, "echo": true,
		"nl": true, "xargs": true, "env": true, "deno": true, "bun": true, "dotnet": true, "composer": true, "php": true,
		"ruby": true, "bundle": true, "rails": true, "django-admin": true, "ln": true,
	}
	ambiguousCLIs = map[string]bool{
		"find": true, "make": true, "go": true, "sort": true, "head": true, "tail": true, "touch": true, "source": true,
		"export": true, "patch": true, "diff": true, "cat": true, "echo": true, "black": true, "env": true, "bundle": true,
		"nl": true, "cd": true, "apt": true,
	}
	// goSubcommands make "go test" a command although "go" is a word.
	goSubcommands = map[string]bool{
		"build": true, "test": true, "run": true, "get": true, "mod": true, "vet": true, "install": true, "fmt": true,
		"generate": true, "work": true, "env": true, "version": true, "list": true, "tool": true, "clean": true,
	}
)

// looksLikeCommandLine decides whether a whole (trimmed) line is a shell
// command. Assignments and calls (cat = 5, find(x)) are code, not commands.
func looksLikeCommandLine(line string) bool {
	if len(line) > 500 {
		return false
	}
	first, rest, found := strings.Cut(line, " ")
	if !found || !commonCLIs[first] {
		return false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, ".") && !strings.HasPrefix(rest, "./") && rest != "." && !strings.HasPrefix(rest, ". ") {
		return false
	}
	if first == "diff" && strings.HasPrefix(rest, "--git ") {
		return false // a diff header, not a command
	}
	if first == "go" {
		sub, _, _ := strings.Cut(rest, " ")
		return goSubcommands[sub] || shellish(rest)
	}
	if ambiguousCLIs[first] {
		return shellish(rest)
	}
	return true
}

// shellish looks for flags, paths, quotes, pipes or redirects among the
// arguments of an ambiguous command word.
func shellish(args string) bool {
	for _, f := range strings.Fields(args) {
		if strings.HasPrefix(f, "-") || strings.ContainsAny(f, "/|>=\"'$*") || f == "." || f == "&&" {
			return true
		}
		// A file name: a dot followed by a letter (README.md, not "file.").
		if i := strings.LastIndexByte(f, '.'); i > 0 && i < len(f)-1 && hasLetter(f[i+1:]) {
			return true
		}
	}
	return false
}

// looksLikeInlineCommand accepts `git status`, `./run.sh`, `foo --bar`;
// it rejects `foo()` and single identifiers.
func looksLikeInlineCommand(s string) bool {
	first, rest, found := strings.Cut(s, " ")
	if strings.HasPrefix(first, "./") && reCmdNoPunct.MatchString(strings.TrimLeft(first, "./")) {
		return true
	}
	if !found || !reCmdNoPunct.MatchString(first) {
		return false
	}
	if commonCLIs[first] {
		return true
	}
	for _, f := range strings.Fields(rest) {
		if strings.HasPrefix(f, "-") && len(f) > 1 {
			return true
		}
	}
	return false
}

func stripLineSuffix(v string) string {
	// Strip ":line" and ":line:col", but keep a drive letter's colon.
	for k := 0; k < 2; k++ {
		i := strings.LastIndexByte(v, ':')
		if i <= 1 || i == len(v)-1 || !allDigits(v[i+1:]) {
			break
		}
		v = v[:i]
	}
	return v
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isWordByte(b byte) bool {
	return b == '_' || isDigit(b) || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func hasDigit(s string) bool { return strings.IndexFunc(s, unicode.IsDigit) >= 0 }

func hasLetter(s string) bool { return strings.IndexFunc(s, unicode.IsLetter) >= 0 }

func hasUpper(s string) bool { return strings.IndexFunc(s, unicode.IsUpper) >= 0 }

func hasLower(s string) bool { return strings.IndexFunc(s, unicode.IsLower) >= 0 }
