package drift

import (
	"strings"
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
