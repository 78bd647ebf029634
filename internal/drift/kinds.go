package drift

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The finders and filters of the kinds of identifier: URLs, paths, file
// names, dotted names, call ids, tickets, hashes, codes and quantities.

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
