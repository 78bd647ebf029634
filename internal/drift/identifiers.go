package drift

import (
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind classifies an identifier.
type Kind string

// Identifier kinds. They are the facts a summary must not lose (the drift
// check of DESIGN.md): where things are, what they are called, how much, what
// was run and what failed.
const (
	// KindPath is a file system path: Unix (/a/b, ./a, ~/a, a/b/c, a/b.go),
	// Windows (C:\a\b, \\host\share), or a bare file name with a known
	// extension (main.go). An optional :line or :line:col suffix is kept.
	KindPath Kind = "path"
	// KindURL is an absolute URL (http, https, ftp, ws, wss, s3, gs, file)
	// or a www. address.
	KindURL Kind = "url"
	// KindID is an opaque identifier: UUID, hex hash (≥ 7 hex digits with at
	// least one digit and one letter), tool call id (call_…, toolu_…,
	// chatcmpl-…), snake-case id ending in ≥ 3 digits (user_4421486), issue
	// or ticket reference (#1234, ABC-123, CVE-2021-44228), e-mail address,
	// IPv4 address (with optional port), and reservation-style code (5–10
	// upper-case letters and digits mixing both, e.g. ZFA04Y, HAT069).
	KindID Kind = "id"
	// KindNumber is a quantity with a unit (15,000 tokens, 50%, 3.5 GB,
	// 200ms, $120.50), a version with three or more parts (v1.2.3, 1.26.8)
	// or an ISO date or timestamp (2024-05-15, 2024-05-15 15:00:00). Bare
	// numbers are left out: line numbers and counters would drown the rest.
	KindNumber Kind = "number"
	// KindCommand is a shell command: a backticked command, a line after a
	// "$ " prompt, a line of a sh/bash/console code fence, a line starting
	// with a common CLI (git, python, pip, go, npm, docker, …), or the value
	// of a JSON "command"/"cmd" field.
	KindCommand Kind = "command"
	// KindError is an error name: an exception class (ValueError,
	// NullPointerException, ErrNotFound), an HTTP 4xx/5xx status (HTTP 404,
	// 503 Service Unavailable, status: 500), a lint or compiler code (E1234,
	// F401, TS2345), an errno name (ENOENT) or a non-zero exit status.
	KindError Kind = "error"
)

// Identifier is one fact found in a text. Value is always a substring of
// that text: normalization only trims (trailing punctuation, unbalanced
// closing brackets), it never rewrites.
type Identifier struct {
	Kind  Kind
	Value string
}

// Identifiers returns the identifiers of text, deduplicated by kind and
// value, in order of first appearance.
//
// Overlaps are resolved by priority url > error > path > id > number: a path
// inside a URL, or a number inside an IP address, is not reported on its own.
// Commands are found independently and may contain identifiers of other
// kinds, which are then reported too.
func Identifiers(text string) []Identifier {
	matches := Matches(text)
	seen := make(map[Identifier]bool, len(matches))
	out := make([]Identifier, 0, len(matches))
	for _, m := range matches {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		out = append(out, m.ID)
	}
	return out
}

// Match is an identifier with its byte span [Start, End) in the text.
type Match struct {
	Start, End int
	ID         Identifier
}

// extractor finds candidates of one kind. re's submatch 1, when it
// matched, is the value (find replaces re where a hand-written scanner is
// much faster); accept trims the span and filters false positives.
type extractor struct {
	kind Kind
	re   *regexp.Regexp
	// find, when set, replaces re: it returns the [start, end) spans of
	// the candidates in one line.
	find   func(line string) [][2]int
	accept func(text string, start, end int) (int, int, bool)
	// hint, when set, is a cheap test that a line may hold a match.
	hint func(line string) bool
}

// eachLine calls fn with the [start, end) byte span of each line of text,
// without its line break (a text ending in one ends with an empty line).
func eachLine(text string, fn func(start, end int)) {
	for off := 0; off <= len(text); {
		i := strings.IndexByte(text[off:], '\n')
		if i < 0 {
			fn(off, len(text))
			return
		}
		fn(off, off+i)
		off += i + 1
	}
}

// maxWindow bounds the text one regexp call sees. Inputs up to 256 Kbit
// divided by the program size let the regexp package use its backtracker;
// a 1 MB line of minified JSON would otherwise run through the NFA at
// about 1 MB/s.
const maxWindow = 1024

// scanSpans returns the lines of text, with lines longer than maxWindow
// cut into windows at places no identifier spans.
func scanSpans(text string) [][2]int {
	// One span a line, and a few more for long lines: sized once, as a
	// transcript of megabytes has a hundred thousand lines.
	spans := make([][2]int, 0, strings.Count(text, "\n")+1+len(text)/maxWindow)
	eachLine(text, func(s, e int) {
		for e-s > maxWindow {
			cut := windowCut(text, s, s+maxWindow)
			spans = append(spans, [2]int{s, cut})
			s = cut
		}
		spans = append(spans, [2]int{s, e})
	})
	return spans
}

// windowCut picks the end of a window of a long line, searching back from
// limit: after a space that no multi-word identifier uses (not next to a
// digit or a colon, as in "HTTP 404", "3.5 GB", "status: 500"), or after
// `",` in minified JSON; else after any space; else at a rune boundary.
func windowCut(text string, s, limit int) int {
	lower := max(s+1, limit-maxWindow/4)
	anySpace := -1
	for i := limit - 1; i >= lower; i-- {
		c := text[i]
		switch {
		case c == ' ' || c == '\t':
			if !isDigit(text[i-1]) && text[i-1] != ':' && (i+1 >= len(text) || !isDigit(text[i+1])) {
				return i + 1
			}
			if anySpace < 0 {
				anySpace = i + 1
			}
		case c == ',' && text[i-1] == '"':
			return i + 1
		}
	}
	if anySpace > 0 {
		return anySpace
	}
	for limit > s+1 && !utf8.RuneStart(text[limit]) {
		limit--
	}
	return limit
}

func containsAny(subs ...string) func(string) bool {
	return func(line string) bool {
		for _, s := range subs {
			if strings.Contains(line, s) {
				return true
			}
		}
		return false
	}
}

// hasPair reports whether some byte of line satisfies a and the next b.
func hasPair(a, b func(byte) bool) func(string) bool {
	return func(line string) bool {
		for i := 0; i+1 < len(line); i++ {
			if a(line[i]) && b(line[i+1]) {
				return true
			}
		}
		return false
	}
}

// mixesUpperAndDigit finds an upper-case letter next to a digit, which any
// token mixing both has somewhere.
func mixesUpperAndDigit(line string) bool {
	for i := 0; i+1 < len(line); i++ {
		a, b := line[i], line[i+1]
		if (isUpperByte(a) && isDigit(b)) || (isDigit(a) && isUpperByte(b)) {
			return true
		}
	}
	return false
}

// hasRun reports whether line holds n consecutive bytes satisfying ok.
func hasRun(ok func(byte) bool, n int) func(string) bool {
	return func(line string) bool {
		run := 0
		for i := 0; i < len(line); i++ {
			if !ok(line[i]) {
				run = 0
				continue
			}
			if run++; run >= n {
				return true
			}
		}
		return false
	}
}

// callIDPrefixes are the prefixes reCallID knows, with their separators.
var callIDPrefixes = []string{
	"toolu_", "call_", "call-", "chatcmpl-", "chatcmpl_", "msg_", "msg-", "req_", "req-", "run_", "run-",
	"thread_", "asst_", "file-", "file_", "batch_", "resp_", "fc_", "fc-",
}

func isUpperOrDigit(c byte) bool { return isUpperByte(c) || isDigit(c) }

func isLetterByte(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func isUpperByte(c byte) bool { return c >= 'A' && c <= 'Z' }

func isHexByte(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') }

func isDot(c byte) bool { return c == '.' }

func hasDigitByte(line string) bool { return strings.ContainsAny(line, "0123456789") }

// fileExtensions make a bare name such as main.go a path.
var fileExtensions = map[string]bool{
	"py": true, "pyi": true, "ipynb": true, "go": true, "mod": true, "sum": true, "js": true, "mjs": true,
	"cjs": true, "ts": true, "tsx": true, "jsx": true, "vue": true, "svelte": true, "rs": true, "java": true,
	"kt": true, "kts": true, "scala": true, "c": true, "h": true, "cc": true, "cpp": true, "cxx": true,
	"hpp": true, "hh": true, "cs": true, "rb": true, "php": true, "swift": true, "sh": true, "bash": true,
	"zsh": true, "fish": true, "ps1": true, "bat": true, "cmd": true, "sql": true, "json": true, "jsonl": true,
	"ndjson": true, "yaml": true, "yml": true, "toml": true, "ini": true, "cfg": true, "conf": true,
	"env": true, "xml": true, "html": true, "htm": true, "css": true, "scss": true, "sass": true, "less": true,
	"md": true, "markdown": true, "rst": true, "txt": true, "csv": true, "tsv": true, "log": true, "lock": true,
	"proto": true, "tf": true, "tfvars": true, "gradle": true, "lua": true, "pl": true, "r": true, "R": true,
	"dart": true, "exs": true, "erl": true, "hs": true, "ml": true, "clj": true, "el": true, "vim": true,
	"pdf": true, "png": true, "gif": true, "svg": true, "webp": true, "ico": true, "zip": true, "gz": true,
	"tgz": true, "bz2": true, "xz": true, "zst": true, "tar": true, "whl": true, "jar": true, "war": true,
	"so": true, "dll": true, "exe": true, "dylib": true, "wasm": true, "bin": true, "dat": true, "db": true,
	"sqlite": true, "parquet": true, "pkl": true, "pt": true, "onnx": true, "orig": true, "rej": true,
	"patch": true, "diff": true, "bak": true, "tmp": true, "pem": true, "crt": true, "dockerfile": true,
	"plist": true, "gemspec": true, "cabal": true, "nix": true, "bzl": true, "bazel": true, "cmake": true,
	"mk": true, "makefile": true, "jpg": true, "jpeg": true,
}

// fileNames are files known without an extension.
var fileNames = map[string]bool{
	"Makefile": true, "Dockerfile": true, "Containerfile": true, "Gemfile": true, "Rakefile": true,
	"Procfile": true, "Jenkinsfile": true, "Vagrantfile": true, "Justfile": true, "Taskfile": true,
}

// errnoNames are the POSIX errno names reported as errors.
var errnoNames = map[string]bool{
	"ENOENT": true, "EACCES": true, "EPERM": true, "EEXIST": true, "ENOTDIR": true, "EISDIR": true,
	"EINVAL": true, "ENOSPC": true, "EPIPE": true, "EAGAIN": true, "ECONNREFUSED": true, "ECONNRESET": true,
	"ECONNABORTED": true, "ETIMEDOUT": true, "EADDRINUSE": true, "EADDRNOTAVAIL": true, "ENOTEMPTY": true,
	"EBADF": true, "ENOMEM": true, "EBUSY": true, "ENOTCONN": true, "EHOSTUNREACH": true, "ENETUNREACH": true,
	"ENETDOWN": true, "EMFILE": true, "ENFILE": true, "EROFS": true, "EXDEV": true, "E2BIG": true,
	"ENOEXEC": true, "ENOSYS": true, "EALREADY": true, "EINPROGRESS": true, "EDEADLK": true,
	"EWOULDBLOCK": true, "ESRCH": true, "EINTR": true, "EIO": true, "ENXIO": true, "ECHILD": true,
	"EFAULT": true, "ENOTTY": true, "ETXTBSY": true, "EFBIG": true, "ESPIPE": true, "EMLINK": true,
	"EDOM": true, "ERANGE": true, "ENOTSUP": true, "EOPNOTSUPP": true, "EPROTO": true, "ELOOP": true,
	"ENAMETOOLONG": true, "EDQUOT": true, "ESTALE": true, "EOVERFLOW": true, "ECANCELED": true,
	"ENOTSOCK": true, "EMSGSIZE": true,
}

// kindRank orders kinds for overlap resolution and for ties at one offset.
var kindRank = map[Kind]int{KindURL: 0, KindError: 1, KindPath: 2, KindID: 3, KindNumber: 4, KindCommand: 5}

var (
	reURL = regexp.MustCompile(`(?i)\b(?:https?|ftp|wss?|s3|gs|file)://[^\s<>"'\x60\\]+|\bwww\.[a-z0-9-]+\.[^\s<>"'\x60\\]+`)

	reException = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)\b|\b(?:KeyboardInterrupt|SystemExit|StopIteration|GeneratorExit)\b|\bErr[A-Z][A-Za-z0-9]+\b`)
	reHTTP      = regexp.MustCompile(`\bHTTP(?:/\d(?:\.\d)?)?\s+[45]\d\d\b|\b[45]\d\d (?:Bad Request|Unauthorized|Payment Required|Forbidden|Not Found|Method Not Allowed|Not Acceptable|Request Timeout|Conflict|Gone|Payload Too Large|Unsupported Media Type|Unprocessable Entity|Too Many Requests|Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Timeout)\b|(?i:\bstatus(?:[ _-]?code)?)["']?\s*[:=]?\s*[45]\d\d\b`)
	reErrCode   = regexp.MustCompile(`\b(?:E|W|F|C|TS|CS|SC)\d{3,5}\b`)
	reExit      = regexp.MustCompile(`(?i)\bexit (?:status|code) [1-9]\d*\b`)

	rePathWin = regexp.MustCompile(`\b[A-Za-z]:(?:\\{1,2}[^\\/:*?"<>|\s]+)+\\?(?::\d+(?::\d+)?)?|\\\\[\w.-]+(?:\\[^\\/:*?"<>|\s]+)+`)

	reUUID     = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	reEmail    = regexp.MustCompile(`\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`)
	reIPv4     = regexp.MustCompile(`\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?::\d{1,5})?\b`)
	reCallID   = regexp.MustCompile(`\b(?:toolu|call|chatcmpl|msg|req|run|thread|asst|file|batch|resp|fc|srvtoolu)[_-][A-Za-z0-9]{3,}\b`)
	reSnakeID  = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*_[A-Za-z]*\d{3,}[A-Za-z0-9]*\b`)
	reHexHash  = regexp.MustCompile(`\b[0-9a-f]{7,64}\b`)
	reTicket   = regexp.MustCompile(`\bCVE-\d{4}-\d{4,}\b|\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b|(?:^|[^\w&#/])(#\d{1,7})\b`)
	reCodeWord = regexp.MustCompile(`\b[A-Z0-9]{5,10}\b`)

	reVersion = regexp.MustCompile(`\bv?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?\b`)
	reDate    = regexp.MustCompile(`\b\d{4}-[01]\d-[0-3]\d(?:[T ][0-2]\d:[0-5]\d(?::[0-5]\d)?(?:\.\d+)?(?:Z|[+-][0-2]\d:?\d\d)?)?\b`)

	reCmdNoPunct = regexp.MustCompile(`^[a-z][a-z0-9._+-]*$`)
)

// idStopPrefixes are upper-case words that look like codes or ticket keys
// but are encodings, algorithms or protocols.
var idStopPrefixes = []string{"UTF", "ISO", "SHA", "MD5", "HTTP", "TLS", "SSL", "BASE64", "AES", "X509", "INT", "UINT", "FLOAT", "IPV", "RFC", "COVID", "ASCII", "CP"}

// weakExtensions are extensions that are also common module or attribute
// names; a dotted chain ending in one is more likely code than a file.
var weakExtensions = map[string]bool{"sql": true, "conf": true, "db": true, "env": true, "log": true, "lock": true, "mod": true, "sum": true, "bin": true, "dat": true, "tmp": true, "cmd": true, "r": true, "R": true, "h": true, "c": true, "cc": true, "pl": true}

// pathStopStems are first segments that make "a.ext" a member access
// (self.log, console.log, process.env), not a file.
var pathStopStems = map[string]bool{"self": true, "this": true, "cls": true, "os": true, "sys": true, "np": true, "pd": true, "console": true, "process": true, "math": true, "module": true, "exports": true, "window": true, "document": true, "super": true, "ctx": true, "t": true, "r": true, "w": true}

var extractors = []extractor{
	{kind: KindURL, re: reURL, accept: acceptURL, hint: containsAny("://", "www.", "WWW.")},
	{kind: KindError, re: reException, accept: acceptAll, hint: containsAny("Err", "Exception", "Warning", "Interrupt", "Exit", "StopIteration")},
	{kind: KindError, re: reHTTP, accept: acceptAll, hint: httpHint},
	{kind: KindError, find: findErrno, accept: acceptAll, hint: hasPair(func(c byte) bool { return c == 'E' }, func(c byte) bool { return isUpperByte(c) || c == '2' })},
	{kind: KindError, re: reErrCode, accept: acceptAll, hint: hasPair(isUpperByte, isDigit)},
	{kind: KindError, re: reExit, accept: acceptAll, hint: containsAny("xit ", "XIT ")},
	{kind: KindPath, re: rePathWin, accept: acceptPath, hint: containsAny(":\\", "\\\\")},
	{kind: KindPath, find: findSlashPaths, accept: acceptSlashPath, hint: containsAny("/")},
	{kind: KindPath, find: findFileNames, accept: acceptFileName, hint: func(l string) bool { return hasPair(isDot, isLetterByte)(l) || strings.Contains(l, "file") }},
	// Dates before ids: "15T15" inside a timestamp is not a code.
	{kind: KindNumber, re: reDate, accept: acceptAll, hint: func(l string) bool { return strings.Contains(l, "-") && hasRun(isDigit, 4)(l) }},
	{kind: KindID, re: reUUID, accept: acceptAll, hint: hasPair(isHexByte, func(c byte) bool { return c == '-' })},
	{kind: KindID, re: reEmail, accept: acceptAll, hint: containsAny("@")},
	{kind: KindID, re: reIPv4, accept: acceptDotted, hint: hasPair(isDigit, isDot)},
	{kind: KindID, re: reCallID, accept: acceptCallID, hint: containsAny(callIDPrefixes...)},
	{kind: KindID, re: reSnakeID, accept: acceptAll, hint: func(l string) bool { return strings.Contains(l, "_") && hasRun(isDigit, 3)(l) }},
	{kind: KindID, re: reTicket, accept: acceptTicket, hint: func(l string) bool { return hasPair(func(c byte) bool { return c == '#' || c == '-' }, isDigit)(l) }},
	{kind: KindID, re: reHexHash, accept: acceptHex, hint: hasRun(isHexByte, 7)},
	{kind: KindID, re: reCodeWord, accept: acceptCode, hint: func(l string) bool { return mixesUpperAndDigit(l) && hasRun(isUpperOrDigit, 5)(l) }},
	{kind: KindNumber, re: reVersion, accept: acceptDotted, hint: hasPair(isDigit, isDot)},
	{kind: KindNumber, find: findQuantities, accept: acceptAll, hint: hasDigitByte},
}

// Matches returns every identifier of text where it occurs, repeats
// included, sorted by offset then kind: Identifiers without the
// deduplication, for a caller that attributes identifiers to parts of the
// text (textcut.KeepLines scores its lines by them).
//
// Each extractor is one linear regexp pass; overlaps are checked against a
// byte map, so the whole stays linear in the text.
func Matches(text string) []Match {
	if text == "" {
		return nil
	}
	claimed := newBitset(len(text))
	lines := scanSpans(text)
	var out []Match
	for _, ex := range extractors {
		// Line by line: identifiers never span lines, the hint skips most
		// lines cheaply, and short inputs let the regexp package use its
		// backtracker instead of the slower NFA.
		for _, ln := range lines {
			line := text[ln[0]:ln[1]]
			if ex.hint != nil && !ex.hint(line) {
				continue
			}
			for _, loc := range ex.locate(line) {
				start, end := ln[0]+loc[0], ln[0]+loc[1]
				s, e, ok := ex.accept(text, start, end)
				if !ok || s >= e || overlaps(claimed, s, e) {
					continue
				}
				for i := s; i < e; i++ {
					claimed.set(i)
				}
				out = append(out, Match{Start: s, End: e, ID: Identifier{Kind: ex.kind, Value: text[s:e]}})
			}
		}
	}
	out = append(out, findCommands(text)...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return kindRank[out[i].ID.Kind] < kindRank[out[j].ID.Kind]
	})
	return out
}

// locate returns the value spans of the candidates in line.
func (ex extractor) locate(line string) [][2]int {
	if ex.find != nil {
		return ex.find(line)
	}
	locs := ex.re.FindAllStringSubmatchIndex(line, -1)
	spans := make([][2]int, len(locs))
	for i, loc := range locs {
		spans[i] = [2]int{loc[0], loc[1]}
		if len(loc) >= 4 && loc[2] >= 0 {
			spans[i] = [2]int{loc[2], loc[3]}
		}
	}
	return spans
}

func overlaps(claimed bitset, s, e int) bool {
	for i := s; i < e; i++ {
		if claimed.has(i) {
			return true
		}
	}
	return false
}

// bitset marks the bytes of a text that an identifier claimed: a bit a
// byte, where a bool a byte held the text's size again.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

func acceptAll(_ string, s, e int) (int, int, bool) { return s, e, true }

// trimTrailing drops sentence punctuation and closing brackets that have no
// opening partner inside the span: "(see https://x.org/a)." → https://x.org/a.
// Bracket balances are counted once, so a run of closers stays linear.
func trimTrailing(text string, s, e int) int {
	var balance [4]int // closers minus openers: ) ] } >
	for i := s; i < e; i++ {
		if k := bracketIndex(text[i]); k >= 0 {
			balance[k%4] += 1 - 2*(k/4)
		}
	}
	for e > s {
		c := text[e-1]
		switch c {
		case '.', ',', ';', ':', '!', '?', '\'', '"', '*', '`':
			e--
			continue
		case ')', ']', '}', '>':
			if k := bracketIndex(c); balance[k] > 0 {
				balance[k]--
				e--
				continue
			}
		}
		break
	}
	return e
}

// bracketIndex numbers the closers ) ] } > as 0–3 and their openers as 4–7.
func bracketIndex(c byte) int {
	switch c {
	case ')':
		return 0
	case ']':
		return 1
	case '}':
		return 2
	case '>':
		return 3
	case '(':
		return 4
	case '[':
		return 5
	case '{':
		return 6
	case '<':
		return 7
	}
	return -1
}

func acceptURL(text string, s, e int) (int, int, bool) {
	e = trimTrailing(text, s, e)
	return s, e, e-s > len("http://")
}

func acceptPath(text string, s, e int) (int, int, bool) {
	e = trimTrailing(text, s, e)
	return s, e, e > s && hasLetter(text[s:e])
}

// findErrno returns the upper-case words of line that are errno names.
func findErrno(line string) [][2]int {
	var out [][2]int
	for i := 0; i < len(line); {
		if !isUpperOrDigit(line[i]) {
			i++
			continue
		}
		s := i
		for i < len(line) && isUpperOrDigit(line[i]) {
			i++
		}
		if (s == 0 || !isWordByte(line[s-1])) && (i == len(line) || !isWordByte(line[i])) && errnoNames[line[s:i]] {
			out = append(out, [2]int{s, i})
		}
	}
	return out
}

// findFileNames returns bare file names: a run of name characters whose
// last dotted segment is a known extension (schema.py, schema.py.orig,
// go.mod), with an optional :line(:col) suffix, or a known extensionless
// name (Makefile). The longest such prefix of each run wins, as a greedy
// regexp would choose; acceptFileName then rejects member accesses.
func findFileNames(line string) [][2]int {
	var out [][2]int
	for i := 0; i < len(line); {
		if !isNameByte(line[i]) {
			i++
			continue
		}
		s := i
		for i < len(line) && isNameByte(line[i]) {
			i++
		}
		run := line[s:i]
		// A name starts at a word character ("@x.py" is "x.py").
		lead := strings.IndexFunc(run, func(r rune) bool { return r < utf8.RuneSelf && isWordByte(byte(r)) })
		if lead < 0 {
			continue
		}
		start := s + lead
		end := -1
		if fileNames[line[start:i]] {
			end = i
		}
		for d := i - 1; d > start && end < 0; d-- {
			if line[d] != '.' {
				continue
			}
			segEnd := d + 1
			for segEnd < i && line[segEnd] != '.' {
				segEnd++
			}
			if fileExtensions[line[d+1:segEnd]] && line[d-1] != '.' {
				end = segEnd
			}
		}
		if end < 0 {
			continue
		}
		if end == i {
			for k := 0; k < 2 && end+1 < len(line) && line[end] == ':' && isDigit(line[end+1]); k++ {
				end++
				for end < len(line) && isDigit(line[end]) {
					end++
				}
			}
		}
		out = append(out, [2]int{start, end})
		i = max(i, end)
	}
	return out
}

// isNameByte: the bytes of a bare file name.
func isNameByte(c byte) bool {
	return isWordByte(c) || c == '.' || c == '@' || c == '+' || c == '-'
}

// findSlashPaths returns the runs of path characters that hold a '/',
// widened by a drive letter before ("C:/x") and a :line(:col) suffix
// after. A hand-written scanner: the equivalent regexp retried every word
// start and ran at about 1 MB/s.
func findSlashPaths(line string) [][2]int {
	var out [][2]int
	for i := 0; i < len(line); {
		if !isPathByte(line[i]) {
			i++
			continue
		}
		s := i
		slash := false
		for i < len(line) && isPathByte(line[i]) {
			slash = slash || line[i] == '/'
			i++
		}
		if !slash {
			continue
		}
		if line[s] == '/' && s >= 2 && line[s-1] == ':' && isLetterByte(line[s-2]) {
			s -= 2 // acceptSlashPath drops it again when glued to a word
		}
		e := i
		for k := 0; k < 2 && e+1 < len(line) && line[e] == ':' && isDigit(line[e+1]); k++ {
			e++
			for e < len(line) && isDigit(line[e]) {
				e++
			}
		}
		out = append(out, [2]int{s, e})
		i = e
	}
	return out
}

// isPathByte: the bytes of a Unix path segment, plus the separator.
func isPathByte(c byte) bool {
	return isWordByte(c) || c == '/' || c == '.' || c == '@' || c == '+' || c == '%' || c == '~' || c == '-'
}

// httpHint: an HTTP status needs "HTTP", "status", or a 4xx/5xx code
// followed by a space and a capitalized reason.
func httpHint(line string) bool {
	if strings.Contains(line, "HTTP") || strings.Contains(line, "tatus") || strings.Contains(line, "TATUS") {
		return true
	}
	for i := 0; i+4 < len(line); i++ {
		if (line[i] == '4' || line[i] == '5') && isDigit(line[i+1]) && isDigit(line[i+2]) && line[i+3] == ' ' && isUpperByte(line[i+4]) {
			return true
		}
	}
	return false
}

// acceptSlashPath keeps a/b-style tokens only when they are clearly paths:
// rooted (/, ~/, ./, ../, C:/), two or more separators, or a file extension.
// That leaves out "and/or", "TCP/IP" and "km/h".
func acceptSlashPath(text string, s, e int) (int, int, bool) {
	// A drive letter glued to a preceding word ("key:/x") is not a drive.
	if e-s > 2 && text[s+1] == ':' && s > 0 && isWordByte(text[s-1]) {
		s += 2
	}
	if s > 0 && (isWordByte(text[s-1]) || text[s-1] == '/') {
		return s, e, false
	}
	if isClosingTag(text, s, e) {
		return s, e, false
	}
	e = trimTrailing(text, s, e)
	e = trimDots(text, s, e)
	v := text[s:e]
	if !hasLetter(v) {
		return s, e, false
	}
	core := stripLineSuffix(v)
	if strings.HasPrefix(core, "/") || strings.HasPrefix(core, "~/") || strings.HasPrefix(core, "./") ||
		strings.HasPrefix(core, "../") || (len(core) > 2 && core[1] == ':') {
		return s, e, len(strings.Trim(core, "/.~")) > 0
	}
	if strings.Count(strings.TrimSuffix(core, "/"), "/") >= 2 {
		return s, e, true
	}
	base := core[strings.LastIndexByte(core, '/')+1:]
	dot := strings.LastIndexByte(base, '.')
	return s, e, dot > 0 && dot < len(base)-1 && hasLetter(base[dot+1:])
}

// isClosingTag reports whether the candidate at text[s:e] is the name
// of a markup closing tag ("</returncode>", "</output>"): SWE-agent wraps
// every tool result in them, and a summary that kept "/returncode" as a
// file would carry one per result.
func isClosingTag(text string, s, e int) bool {
	if s == 0 || text[s-1] != '<' || text[s] != '/' {
		return false
	}
	name := text[s+1 : e]
	if i := strings.IndexByte(name, '>'); i >= 0 {
		name = name[:i]
	} else if e >= len(text) || text[e] != '>' {
		return false
	}
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isWordByte(c) && c != '-' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

// trimDots drops a trailing "/..." or "." run (go test ./... → ./).
func trimDots(text string, s, e int) int {
	for e > s && (text[e-1] == '.' || text[e-1] == '-') {
		e--
	}
	return e
}

// acceptFileName rejects member accesses and calls that merely end in a
// known extension: console.log(…), self.lock, process.env.X.
func acceptFileName(text string, s, e int) (int, int, bool) {
	if s > 0 && (text[s-1] == '.' || text[s-1] == '/' || text[s-1] == '\\') {
		return s, e, false
	}
	if e < len(text) && (text[e] == '(' || (text[e] == '.' && e+1 < len(text) && isWordByte(text[e+1]))) {
		return s, e, false
	}
	v := text[s:e]
	if first, _, found := strings.Cut(v, "."); found && pathStopStems[first] {
		return s, e, false
	}
	// Python modules end in words that are also extensions
	// (from django.conf import settings, django.db.models.sql).
	if ext := v[strings.LastIndexByte(stripLineSuffix(v), '.')+1:]; weakExtensions[ext] {
		if strings.Count(v, ".") > 1 || strings.HasSuffix(text[:s], "from ") || strings.HasSuffix(text[:s], "import ") {
			return s, e, false
		}
	}
	return s, e, hasLetter(stripLineSuffix(v))
}

// acceptDotted rejects a dotted number that is part of a longer dotted run
// (1.2.3.4.5 is neither a version nor an address).
func acceptDotted(text string, s, e int) (int, int, bool) {
	if s > 1 && text[s-1] == '.' && isDigit(text[s-2]) {
		return s, e, false
	}
	if e+1 < len(text) && text[e] == '.' && isDigit(text[e+1]) {
		return s, e, false
	}
	return s, e, true
}

// acceptCallID needs evidence of randomness: a digit, mixed case, or a long
// suffix, so that call_count or file_name stay out. toolu_ is unambiguous.
func acceptCallID(text string, s, e int) (int, int, bool) {
	v := text[s:e]
	if strings.HasPrefix(v, "toolu_") || strings.HasPrefix(v, "srvtoolu_") {
		return s, e, true
	}
	suffix := v[strings.IndexAny(v, "_-")+1:]
	return s, e, hasDigit(suffix) || (hasUpper(suffix) && hasLower(suffix)) || len(suffix) >= 16
}

func acceptTicket(text string, s, e int) (int, int, bool) {
	v := text[s:e]
	if strings.HasPrefix(v, "#") {
		return s, e, true
	}
	for _, p := range idStopPrefixes {
		if strings.HasPrefix(v, p) && !strings.HasPrefix(v, "CVE") {
			return s, e, false
		}
	}
	return s, e, true
}

// acceptHex wants a digit and a letter: all-letter words made of a–f
// ("defaced") and plain numbers are not hashes.
func acceptHex(text string, s, e int) (int, int, bool) {
	v := text[s:e]
	return s, e, hasDigit(v) && hasLetter(v)
}

func acceptCode(text string, s, e int) (int, int, bool) {
	v := text[s:e]
	if !hasDigit(v) || !hasLetter(v) {
		return s, e, false
	}
	for _, p := range idStopPrefixes {
		if strings.HasPrefix(v, p) {
			return s, e, false
		}
	}
	return s, e, true
}

// Units a quantity may carry. Single letters and "ms" must follow the
// number directly (200ms, 50K, 3x); longer units may follow one space
// (3.5 GB, 15,000 tokens).
var (
	gluedUnits = map[string]bool{"k": true, "K": true, "M": true, "B": true, "x": true, "ms": true, "s": true, "m": true, "h": true, "µs": true, "us": true, "ns": true}
	wordUnits  = map[string]bool{
		"token": true, "tokens": true, "char": true, "chars": true, "character": true, "characters": true,
		"byte": true, "bytes": true, "KB": true, "MB": true, "GB": true, "TB": true, "PB": true, "KiB": true, "MiB": true,
		"GiB": true, "TiB": true, "kB": true, "word": true, "words": true, "line": true, "lines": true, "row": true,
		"rows": true, "column": true, "columns": true, "message": true, "messages": true, "turn": true, "turns": true,
		"call": true, "calls": true, "request": true, "requests": true, "file": true, "files": true, "item": true,
		"items": true, "result": true, "results": true, "record": true, "records": true, "entries": true, "step": true,
		"steps": true, "epoch": true, "epochs": true, "retries": true, "attempt": true, "attempts": true, "times": true,
		"user": true, "users": true, "ms": true, "µs": true, "us": true, "ns": true, "sec": true, "secs": true,
		"second": true, "seconds": true, "min": true, "mins": true, "minute": true, "minutes": true, "hr": true,
		"hrs": true, "hour": true, "hours": true, "day": true, "days": true, "week": true, "weeks": true, "month": true,
		"months": true, "year": true, "years": true, "px": true, "dpi": true, "Hz": true, "kHz": true, "MHz": true,
		"GHz": true, "°C": true, "°F": true, "km": true, "req/s": true, "rps": true, "qps": true, "USD": true,
		"EUR": true, "GBP": true, "core": true, "cores": true, "CPU": true, "CPUs": true, "GPU": true, "GPUs": true,
		"thread": true, "threads": true, "worker": true, "workers": true, "replica": true, "replicas": true,
		"million": true, "billion": true,
	}
	currencyUnits = map[string]bool{"k": true, "K": true, "M": true, "B": true, "bn": true, "million": true, "billion": true}
)

// findQuantities scans a line for numbers with a unit or a currency sign.
// A hand-written scanner: the equivalent regexp ran at well under 5 MB/s.
func findQuantities(line string) [][2]int {
	var out [][2]int
	for i := 0; i < len(line); {
		start := i
		currency := false
		if r, size := utf8.DecodeRuneInString(line[i:]); r == '$' || r == '€' || r == '£' || r == '¥' {
			currency = true
			i += size
			if i < len(line) && line[i] == ' ' {
				i++
			}
		}
		if i >= len(line) || !isDigit(line[i]) ||
			(!currency && start > 0 && (isWordByte(line[start-1]) || line[start-1] == '.')) {
			i = start + 1
			for i < len(line) && !utf8.RuneStart(line[i]) {
				i++
			}
			continue
		}
		end := scanNumber(line, i)
		unitEnd := -1
		if currency {
			unitEnd = end
			if e := unitAfter(line, end, currencyUnits, currencyUnits); e > 0 {
				unitEnd = e
			}
		} else {
			unitEnd = unitAfter(line, end, gluedUnits, wordUnits)
		}
		if unitEnd > 0 {
			out = append(out, [2]int{start, unitEnd})
			i = unitEnd
			continue
		}
		for i = end; i < len(line) && (isWordByte(line[i]) || line[i] == '.'); i++ {
		}
	}
	return out
}

// scanNumber reads digits, ",ddd" groups and a decimal part from i.
func scanNumber(line string, i int) int {
	for i < len(line) && isDigit(line[i]) {
		i++
	}
	for i+3 < len(line) && line[i] == ',' && isDigit(line[i+1]) && isDigit(line[i+2]) && isDigit(line[i+3]) &&
		(i+4 == len(line) || !isDigit(line[i+4])) {
		i += 4
	}
	if i+1 < len(line) && line[i] == '.' && isDigit(line[i+1]) {
		i++
		for i < len(line) && isDigit(line[i]) {
			i++
		}
	}
	return i
}

// unitAfter returns the end of a unit right after a number ending at i, or
// -1: "%" or a glued unit directly, or a word unit after at most one space.
func unitAfter(line string, i int, glued, words map[string]bool) int {
	if i < len(line) && line[i] == '%' {
		return i + 1
	}
	if w := unitWord(line, i); w != "" && (glued[w] || words[w]) {
		return i + len(w)
	}
	if i+1 < len(line) && line[i] == ' ' {
		if w := unitWord(line, i+1); w != "" && words[w] && len(w) > 1 {
			return i + 1 + len(w)
		}
	}
	return -1
}

// unitWord is the run of letters (and °, µ, "/s") starting at i, if a word
// boundary follows it.
func unitWord(line string, i int) string {
	j := i
	for j < len(line) {
		r, size := utf8.DecodeRuneInString(line[j:])
		if !(unicode.IsLetter(r) || r == '°' || r == 'µ') {
			break
		}
		j += size
	}
	if strings.HasPrefix(line[j:], "/s") && (j+2 == len(line) || !isWordByte(line[j+2])) {
		j += 2
	}
	if j == i || (j < len(line) && isWordByte(line[j])) {
		return ""
	}
	return line[i:j]
}

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

// Retention measures how many of a source's identifiers a summary keeps.
type Retention struct {
	// Total is the number of distinct identifiers in the source.
	Total int
	// Kept is how many of them the summary contains.
	Kept int
	// Ratio is Kept/Total, or 1 when the source has none.
	Ratio float64
	// Missing lists the identifiers the summary lost, in source order.
	Missing []Identifier
}

// Retain measures which identifiers of source are present in summary.
// Presence is a case-sensitive substring test of the value, with two
// allowances that match how summaries quote things:
//   - a path counts as present when the summary holds it without its
//     :line suffix, or holds its file name (the last segment, when it has
//     an extension and at least 4 characters): "schema.py" keeps
//     django/db/backends/base/schema.py:1038. This is lenient when several
//     files share a name (__init__.py); the drift bar tolerates that.
//   - an HTTP status error counts as present when its 3-digit code appears
//     as a whole number in the summary ("returned 404" keeps "HTTP 404").
func Retain(source, summary string) Retention {
	ids := Identifiers(source)
	r := Retention{Total: len(ids), Ratio: 1, Missing: Missing(ids, summary)}
	r.Kept = r.Total - len(r.Missing)
	if r.Total > 0 {
		r.Ratio = float64(r.Kept) / float64(r.Total)
	}
	return r
}

// Missing returns the identifiers of ids that summary does not keep, in
// their order. It is Retain for a caller that already extracted (and
// perhaps trimmed) the source's identifiers, which is the costly part.
func Missing(ids []Identifier, summary string) []Identifier {
	var missing []Identifier
	for _, id := range ids {
		if !present(id, summary) {
			missing = append(missing, id)
		}
	}
	return missing
}

func present(id Identifier, summary string) bool {
	if strings.Contains(summary, id.Value) {
		return true
	}
	switch id.Kind {
	case KindPath:
		core := stripLineSuffix(id.Value)
		if core != id.Value && strings.Contains(summary, core) {
			return true
		}
		base := core[strings.LastIndexAny(core, `/\`)+1:]
		if utf8.RuneCountInString(base) >= 4 && strings.Contains(base[1:], ".") && containsWord(summary, base) {
			return true
		}
	case KindError:
		if code := httpCode(id.Value); code != "" && containsWord(summary, code) {
			return true
		}
	}
	return false
}

// httpCode returns the 3-digit status of an HTTP error identifier.
func httpCode(v string) string {
	if loc := reHTTP.FindStringIndex(v); loc == nil || loc[0] != 0 {
		return ""
	}
	for i := 0; i+3 <= len(v); i++ {
		if allDigits(v[i:i+3]) && (i+3 == len(v) || !isDigit(v[i+3])) && (i == 0 || !isDigit(v[i-1])) {
			return v[i : i+3]
		}
	}
	return ""
}

// containsWord reports whether w occurs in s not glued to word characters
// or path separators on either side.
func containsWord(s, w string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		a, b := off+i, off+i+len(w)
		if (a == 0 || !isWordByte(s[a-1])) && (b == len(s) || !isWordByte(s[b])) {
			return true
		}
		off = a + 1
	}
}
