package drift

import (
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// The scanner of Identifiers: one extractor per kind, run line by line,
// overlaps resolved against a byte map.

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
