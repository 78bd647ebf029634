package textcut

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostProcess kinds: which rule of the post-processing table applied.
const (
	PostSearch         = "search"          // web search results → title, URL, snippet
	PostFile           = "file"            // long file read → summary and line ranges
	PostTable          = "table"           // long query result → row count, columns, sample rows
	PostAPI            = "api"             // API response → status and key fields
	PostKeptError      = "kept-error"      // errors are always kept
	PostKeptSmall      = "kept-small"      // below SmallTokens
	PostKeptStructured = "kept-structured" // JSON/YAML below JSONTokens
	PostKeptDebug      = "kept-debug"      // debug verbosity disables compression
	PostUnchanged      = "unchanged"       // no rule applied, or it would not shrink the text
)

// PostRules are the thresholds of the selective tool post-processing
// table (preset auto-summarize). Sizes are in the unit of the counting function passed to
// PostProcess; zero values are taken literally (DefaultPostRules has the
// design's numbers).
type PostRules struct {
	// SmallTokens: results smaller than this are kept as-is (design: 200).
	SmallTokens int
	// JSONTokens: JSON or YAML smaller than this is kept as-is (design: 500).
	JSONTokens int
	// FileLines: file reads with more lines are summarized (design: 500).
	FileLines int
	// DBRows: query results with more rows are sampled (design: 100).
	DBRows int
	// SampleRows is how many rows a sampled table keeps.
	SampleRows int
	// Debug keeps everything (the design's context.verbosity=debug).
	Debug bool
}

// DefaultPostRules returns the post-processing table's thresholds, with 10 sample rows.
func DefaultPostRules() PostRules {
	return PostRules{SmallTokens: 200, JSONTokens: 500, FileLines: 500, DBRows: 100, SampleRows: 10}
}

// Limits of the reduced forms. They bound the output, not the input.
const (
	fileHeadLines   = 20
	fileTailLines   = 5
	fileMaxDefs     = 150
	snippetMaxRunes = 500
	scalarMaxRunes  = 200
	arrayKeepItems  = 10
	arrayKeepBytes  = 200
	arrayListIDs    = 10
	maxReduceDepth  = 4
)

// PostProcess reduces one tool result by the post-processing table. It classifies by
// tool name and by content:
//   - preserved as-is, in this order: everything when r.Debug; errors
//     (isError, a traceback or error line at the start or end, or a JSON
//     object with an error field or a 4xx/5xx status); results smaller than
//     r.SmallTokens; JSON or YAML smaller than r.JSONTokens;
//   - web search results (JSON with results[] of title/url/snippet, or a
//     list of markdown links) keep title, URL and snippet (≤ 500 code
//     points) of each hit;
//   - tables with more than r.DBRows rows (a JSON array of objects, or an
//     object holding one under rows/records/data/items/results; CSV, TSV; a
//     psql, MySQL or markdown pipe table) keep the row count, the column
//     names and the first r.SampleRows rows;
//   - file reads with more than r.FileLines lines (tool names like
//     read_file, cat, view, open, or a numbered listing such as cat -n)
//     keep the first 20 lines, definition lines (def, func, class, …; at
//     most 150) and the last 5, with "[… lines 21–480 omitted …]" markers;
//   - API responses (a JSON object with status, statusCode, status_code,
//     code, data or result, or any JSON object from an api/http/fetch tool)
//     keep top-level scalars, the scalars of nested objects one level down
//     and id-like fields deeper; arrays and deep objects become short
//     descriptions such as "[array: 250 items; ids: a, b, …]". The result
//     is valid JSON after a one-line header.
//
// count measures size: pass a tokens.Counter's Count method for tokens, or
// nil for code points. The output is
// never longer than text, by count and in code points; a reduction that
// would not shrink the text yields text itself with PostUnchanged. changed
// reports whether out differs from text.
func PostProcess(toolName, text string, isError bool, count func(string) int, r PostRules) (out string, kind string, changed bool) {
	if count == nil {
		count = utf8.RuneCountInString
	}
	if r.Debug {
		return text, PostKeptDebug, false
	}
	if isError || looksLikeError(text) {
		return text, PostKeptError, false
	}
	size := count(text)
	if size < r.SmallTokens {
		return text, PostKeptSmall, false
	}
	trimmed := strings.TrimSpace(text)
	isJSON := looksJSON(trimmed) && json.Valid([]byte(trimmed))
	if isJSON && jsonReportsError(trimmed) {
		return text, PostKeptError, false
	}
	if (isJSON || looksYAML(trimmed)) && size < r.JSONTokens {
		return text, PostKeptStructured, false
	}

	reduced, kind := reduceToolResult(toolName, text, trimmed, isJSON, r)
	if kind == "" || reduced == text ||
		utf8.RuneCountInString(reduced) >= utf8.RuneCountInString(text) || count(reduced) > size {
		return text, PostUnchanged, false
	}
	return reduced, kind, true
}

// reduceToolResult applies the first reducing rule that fits; kind "" means
// none did.
func reduceToolResult(toolName, text, trimmed string, isJSON bool, r PostRules) (string, string) {
	name := strings.ToLower(toolName)
	if isJSON {
		if out, ok := jsonSearch(trimmed); ok {
			return out, PostSearch
		}
		if out, ok := jsonTable(trimmed, r); ok {
			return out, PostTable
		}
		if out, ok := jsonAPI(trimmed, name); ok {
			return out, PostAPI
		}
		return "", ""
	}
	if out, ok := textSearch(text, nameHas(name, "search", "web", "google", "bing", "tavily", "serp", "brave", "duckduckgo", "exa")); ok {
		return out, PostSearch
	}
	if out, ok := pipeTable(text, r); ok {
		return out, PostTable
	}
	// A numbered listing ("     1\tline") would also pass for TSV.
	fileTool := nameHas(name, "read", "readfile", "cat", "view", "open", "head", "less", "show", "contents")
	numbered := numberedListing(strings.Split(Head(text, 50), "\n"))
	if !numbered {
		if out, ok := delimitedTable(text, r); ok {
			return out, PostTable
		}
	}
	if out, ok := fileSummary(text, fileTool || numbered, r); ok {
		return out, PostFile
	}
	return "", ""
}

// nameHas reports whether one of the words of a tool name (split on
// anything but letters and digits) is among words.
func nameHas(name string, words ...string) bool {
	parts := strings.FieldsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, p := range parts {
		for _, w := range words {
			if p == w {
				return true
			}
		}
	}
	return false
}

// --- errors ---

var (
	reErrorLine = regexp.MustCompile(`^(?:[\w.]*(?:Error|Exception)(?::|$)|Traceback \(most recent call last\)|panic: |fatal: |Fatal: |FATAL|error(?:\[\w+\])?: |Error: |ERROR|npm ERR!|Segmentation fault|.*: command not found$|.*: No such file or directory$|.*: Permission denied$)`)
)

// looksLikeError checks the first 5 and last 10 non-blank lines for an
// error or traceback line, and the first and last 50 for a traceback. Only
// the ends are read: a long file that merely contains "raise ValueError"
// in its middle is not an error.
// LooksLikeError reports a result that reports a failure (the
// post-processing table's "errors always kept" rule): an error or traceback
// line near its ends.
func LooksLikeError(text string) bool { return looksLikeError(text) }

func looksLikeError(text string) bool {
	head, tail := edgeLines(text, 50)
	check := func(lines []string, n int, fromEnd bool) bool {
		for i, l := range lines {
			if strings.Contains(l, "Traceback (most recent call last)") {
				return true
			}
			near := i < n
			if fromEnd {
				near = i >= len(lines)-n
			}
			if near && reErrorLine.MatchString(strings.TrimSpace(l)) {
				return true
			}
		}
		return false
	}
	return check(head, 5, false) || check(tail, 10, true)
}

// edgeLines returns up to n non-blank lines from each end of text, without
// splitting the whole text.
func edgeLines(text string, n int) (head, tail []string) {
	for off := 0; off < len(text) && len(head) < n; {
		i := strings.IndexByte(text[off:], '\n')
		end := len(text)
		if i >= 0 {
			end = off + i
		}
		if l := text[off:end]; strings.TrimSpace(l) != "" {
			head = append(head, l)
		}
		off = end + 1
	}
	for end := len(text); end > 0 && len(tail) < n; {
		i := strings.LastIndexByte(text[:end], '\n')
		if l := text[i+1 : end]; strings.TrimSpace(l) != "" {
			tail = append(tail, l)
		}
		if i < 0 {
			break
		}
		end = i
	}
	for i, j := 0, len(tail)-1; i < j; i, j = i+1, j-1 {
		tail[i], tail[j] = tail[j], tail[i]
	}
	return head, tail
}

// jsonReportsError reports a JSON object whose top level carries a
// non-empty error/errors field, isError/is_error true, or a 4xx/5xx status.
func jsonReportsError(s string) bool {
	fields, err := objectFields([]byte(s))
	if err != nil {
		return false
	}
	for _, f := range fields {
		v := bytes.TrimSpace(f.Raw)
		switch f.Key {
		case "error", "errors":
			if !bytes.Equal(v, []byte("null")) && !bytes.Equal(v, []byte("false")) && !bytes.Equal(v, []byte(`""`)) &&
				!bytes.Equal(v, []byte("[]")) && !bytes.Equal(v, []byte("{}")) {
				return true
			}
		case "isError", "is_error":
			if bytes.Equal(v, []byte("true")) {
				return true
			}
		case "status", "statusCode", "status_code":
			if n, err := strconv.Atoi(strings.Trim(string(v), `"`)); err == nil && n >= 400 && n <= 599 {
				return true
			}
		}
	}
	return false
}

// looksYAML is a cheap test for a YAML document: a "---" start, or mostly
// "key: value" and "- item" lines with at least two of them.
func looksYAML(s string) bool {
	if strings.HasPrefix(s, "---\n") {
		return true
	}
	total, yamlish := 0, 0
	for _, l := range strings.Split(Head(s, 250), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		total++
		if reYAMLLine.MatchString(l) {
			yamlish++
		}
		if total > 200 {
			break
		}
	}
	return yamlish >= 2 && yamlish*10 >= total*9
}

var reYAMLLine = regexp.MustCompile(`^\s*(?:- |-$|(?:- )?[\w"'./-]+:(?:\s|$))`)

// clip shortens s to at most n code points, ending in "…" when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return Truncate(s, n-1) + "…"
}
