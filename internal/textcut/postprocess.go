package textcut

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// --- JSON helpers ---

// jsonField is one member of a JSON object, in document order.
type jsonField struct {
	Key string
	Raw json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

// objectFields decodes the members of a JSON object, keeping their order
// (encoding/json maps would lose it).
func objectFields(raw []byte) ([]jsonField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read object start: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var fields []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key %d: %w", len(fields), err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("read value of %q: %w", key, err)
		}
		fields = append(fields, jsonField{Key: key, Raw: v})
	}
	return fields, nil
}

// arrayElems decodes the elements of a JSON array, or fails.
func arrayElems(raw []byte) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("decode array: %w", err)
	}
	return elems, nil
}

func firstByte(raw []byte) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// stringField returns the string value of the first of keys present in m.
func stringField(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// clip shortens s to at most n code points, ending in "…" when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return Truncate(s, n-1) + "…"
}

// --- search ---

type searchHit struct{ title, url, snippet string }

var searchContainers = []string{"results", "items", "organic_results", "organic", "search_results", "hits", "data", "web", "news"}

// jsonSearch recognizes a list of hits that each have a URL and a title,
// at the top level or in a results-like field (one nesting allowed, as in
// Brave's {"web": {"results": […]}}).
func jsonSearch(s string) (string, bool) {
	hits, ok := searchHits([]byte(s), 0)
	if !ok {
		return "", false
	}
	return renderHits(hits), true
}

func searchHits(raw []byte, depth int) ([]searchHit, bool) {
	switch firstByte(raw) {
	case '[':
		elems, err := arrayElems(raw)
		if err != nil || len(elems) == 0 {
			return nil, false
		}
		var hits []searchHit
		for _, e := range elems {
			var m map[string]any
			if json.Unmarshal(e, &m) != nil {
				return nil, false
			}
			h := searchHit{
				title:   stringField(m, "title", "name", "headline"),
				url:     stringField(m, "url", "link", "href", "uri"),
				snippet: stringField(m, "snippet", "description", "summary", "content", "text", "body"),
			}
			if h.url != "" && h.title != "" {
				hits = append(hits, h)
			}
		}
		// Most elements must look like hits, or this is some other list.
		return hits, len(hits) > 0 && len(hits)*2 >= len(elems)
	case '{':
		if depth > 1 {
			return nil, false
		}
		fields, err := objectFields(raw)
		if err != nil {
			return nil, false
		}
		for _, want := range searchContainers {
			for _, f := range fields {
				if f.Key == want {
					if hits, ok := searchHits(f.Raw, depth+1); ok {
						return hits, true
					}
				}
			}
		}
	}
	return nil, false
}

func renderHits(hits []searchHit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[search results: %d; kept title, URL and snippet]\n", len(hits))
	for i, h := range hits {
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, oneLine(h.title), h.url)
		if h.snippet != "" {
			fmt.Fprintf(&b, "   %s\n", clip(oneLine(h.snippet), snippetMaxRunes))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var (
	reMDLink   = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])?\s*(?:\*\*)?\[([^\]]+)\]\((https?://[^)\s]+)\)(?:\*\*)?\s*(?:[-–—:|]\s*)?(.*)$`)
	reKeyTitle = regexp.MustCompile(`(?i)^\s*(?:\d+[.)]\s*)?(?:title|name)\s*:\s*(.+)$`)
	reKeyURL   = regexp.MustCompile(`(?i)^\s*(?:url|link|source|href)\s*:\s*(https?://\S+)\s*$`)
	reKeySnip  = regexp.MustCompile(`(?i)^\s*(?:snippet|description|summary|content|text)\s*:\s*(.*)$`)
)

// textSearch parses markdown link lists ("- [Title](url) - snippet") and
// "Title:/URL:/Snippet:" blocks. Without a search-like tool name it wants
// at least three hits.
func textSearch(text string, searchTool bool) (string, bool) {
	lines := strings.Split(text, "\n")
	var linkHits, keyHits []searchHit
	for i := 0; i < len(lines); i++ {
		if m := reMDLink.FindStringSubmatch(lines[i]); m != nil {
			h := searchHit{title: m[1], url: m[2], snippet: strings.TrimSpace(m[3])}
			// Up to two following non-blank lines continue the snippet.
			for k := 0; k < 2 && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !reMDLink.MatchString(lines[i+1]); k++ {
				i++
				h.snippet = strings.TrimSpace(h.snippet + " " + strings.TrimSpace(lines[i]))
			}
			linkHits = append(linkHits, h)
			continue
		}
		if m := reKeyTitle.FindStringSubmatch(lines[i]); m != nil {
			keyHits = append(keyHits, searchHit{title: strings.TrimSpace(m[1])})
			continue
		}
		if len(keyHits) == 0 {
			continue
		}
		last := &keyHits[len(keyHits)-1]
		if m := reKeyURL.FindStringSubmatch(lines[i]); m != nil && last.url == "" {
			last.url = m[1]
		} else if m := reKeySnip.FindStringSubmatch(lines[i]); m != nil && last.snippet == "" {
			last.snippet = strings.TrimSpace(m[1])
		}
	}
	hits := linkHits
	var complete []searchHit
	for _, h := range keyHits {
		if h.url != "" {
			complete = append(complete, h)
		}
	}
	if len(complete) > len(hits) {
		hits = complete
	}
	if len(hits) == 0 || (!searchTool && len(hits) < 3) {
		return "", false
	}
	return renderHits(hits), true
}

// --- tables ---

var rowContainers = []string{"rows", "records", "data", "items", "results", "hits", "entries"}

// jsonTable samples an array of objects longer than r.DBRows, at the top
// level or in a rows-like field of the top-level object.
func jsonTable(s string, r PostRules) (string, bool) {
	raw := []byte(s)
	where := ""
	if firstByte(raw) == '{' {
		fields, err := objectFields(raw)
		if err != nil {
			return "", false
		}
		raw = nil
		for _, want := range rowContainers {
			for _, f := range fields {
				if f.Key == want && firstByte(f.Raw) == '[' {
					raw, where = f.Raw, f.Key
					break
				}
			}
			if raw != nil {
				break
			}
		}
		if raw == nil {
			return "", false
		}
	}
	elems, err := arrayElems(raw)
	if err != nil || len(elems) <= r.DBRows {
		return "", false
	}
	var columns []string
	seen := map[string]bool{}
	objects := 0
	for _, e := range elems {
		fields, err := objectFields(e)
		if err != nil {
			continue
		}
		objects++
		for _, f := range fields {
			if !seen[f.Key] {
				seen[f.Key] = true
				columns = append(columns, f.Key)
			}
		}
	}
	if objects*10 < len(elems)*9 {
		return "", false
	}
	var b strings.Builder
	in := ""
	if where != "" {
		in = fmt.Sprintf(" in %q", where)
	}
	sample := min(max(r.SampleRows, 0), len(elems))
	fmt.Fprintf(&b, "[table: %d rows%s; columns: %s; first %d rows]\n", len(elems), in, strings.Join(columns, ", "), sample)
	for _, e := range elems[:sample] {
		var c bytes.Buffer
		if err := json.Compact(&c, e); err != nil {
			return "", false
		}
		b.Write(c.Bytes())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %d more rows omitted …]", len(elems)-sample)
	return b.String(), true
}

var reBorder = regexp.MustCompile(`^\s*[|+]?(?:[-=:]{3,}[|+]?)+\s*$|^\s*[|+](?:[-=:]+[|+])+\s*$`)

// pipeTable samples psql, MySQL and markdown tables: data lines hold '|',
// border lines only '-', '+', '=', ':' and '|'.
func pipeTable(text string, r PostRules) (string, bool) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) <= r.DBRows {
		return "", false
	}
	isData := func(l string) bool { return strings.Contains(l, "|") && !reBorder.MatchString(l) }
	// The header ends at the first border line that follows a data line.
	headerEnd := -1
	sawData := false
	for i, l := range lines {
		if i > 5 {
			break
		}
		if reBorder.MatchString(l) && sawData {
			headerEnd = i
			break
		}
		if isData(l) {
			sawData = true
		} else if !reBorder.MatchString(l) && strings.TrimSpace(l) != "" {
			return "", false
		}
	}
	if headerEnd < 0 {
		return "", false
	}
	var rows []int
	for i := headerEnd + 1; i < len(lines); i++ {
		if isData(lines[i]) {
			rows = append(rows, i)
		}
	}
	lastRow := headerEnd
	if len(rows) > 0 {
		lastRow = rows[len(rows)-1]
	}
	// Lines after the header are rows, borders and a short trailer.
	if len(rows) <= r.DBRows || len(rows)*10 < (lastRow-headerEnd)*9 {
		return "", false
	}
	header := lines[headerEnd-1]
	var columns []string
	for _, c := range strings.Split(header, "|") {
		if c = strings.TrimSpace(c); c != "" {
			columns = append(columns, c)
		}
	}
	sample := min(max(r.SampleRows, 0), len(rows))
	var b strings.Builder
	fmt.Fprintf(&b, "[table: %d rows; columns: %s; first %d rows]\n", len(rows), strings.Join(columns, ", "), sample)
	for _, l := range lines[:headerEnd+1] {
		b.WriteString(l + "\n")
	}
	for _, i := range rows[:sample] {
		b.WriteString(lines[i] + "\n")
	}
	fmt.Fprintf(&b, "[… %d more rows omitted …]", len(rows)-sample)
	for _, l := range lines[lastRow+1:] {
		b.WriteString("\n" + l)
	}
	return b.String(), true
}

// delimitedTable samples CSV and TSV: the first lines must agree on a field
// count of at least 2 for one delimiter.
func delimitedTable(text string, r PostRules) (string, bool) {
	head := Head(text, 20)
	var delim rune
	for _, d := range []rune{'\t', ',', ';', '|'} {
		if consistentFields(head, d) {
			delim = d
			break
		}
	}
	if delim == 0 {
		return "", false
	}
	rd := csv.NewReader(strings.NewReader(text))
	rd.Comma = delim
	rd.FieldsPerRecord = -1
	rd.LazyQuotes = true
	rd.ReuseRecord = true
	var columns []string
	records := 0
	cut := 0 // byte offset after the header and the sample rows
	sample := max(r.SampleRows, 0)
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", false
		}
		if records == 0 {
			columns = append([]string(nil), rec...)
		}
		records++
		if records <= sample+1 {
			cut = int(rd.InputOffset())
		}
	}
	rows := records - 1
	if rows <= r.DBRows {
		return "", false
	}
	kept := min(sample, rows)
	var b strings.Builder
	fmt.Fprintf(&b, "[table: %d rows; columns: %s; first %d rows]\n", rows, strings.Join(columns, ", "), kept)
	b.WriteString(strings.TrimRight(text[:cut], "\r\n"))
	fmt.Fprintf(&b, "\n[… %d more rows omitted …]", rows-kept)
	return b.String(), true
}

func consistentFields(head string, delim rune) bool {
	rd := csv.NewReader(strings.NewReader(head))
	rd.Comma = delim
	rd.FieldsPerRecord = -1
	rd.LazyQuotes = true
	want, n, agree := -1, 0, 0
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The head may end inside a quoted field; judge what was read.
			break
		}
		n++
		if want < 0 {
			want = len(rec)
		}
		if len(rec) == want {
			agree++
		}
	}
	return want >= 2 && n >= 3 && agree*10 >= n*9
}

// --- files ---

// reNumbered matches the line-number prefix of cat -n and editor views.
var reNumbered = regexp.MustCompile(`^\s*\d+(?:\t|: |\| |  )`)

// fileSummary keeps the head, the definition lines and the tail of a long
// file read, with numbered markers for what it leaves out.
func fileSummary(text string, fileLike bool, r PostRules) (string, bool) {
	if !fileLike {
		return "", false
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) <= r.FileLines || len(lines) <= fileHeadLines+fileTailLines {
		return "", false
	}
	keep := make([]bool, len(lines))
	for i := 0; i < fileHeadLines; i++ {
		keep[i] = true
	}
	for i := len(lines) - fileTailLines; i < len(lines); i++ {
		keep[i] = true
	}
	defs, totalDefs := 0, 0
	for i := fileHeadLines; i < len(lines)-fileTailLines; i++ {
		content := reNumbered.ReplaceAllString(lines[i], "")
		if !reDefinition.MatchString(content) {
			continue
		}
		totalDefs++
		if defs < fileMaxDefs {
			keep[i] = true
			defs++
		}
	}
	var b strings.Builder
	defNote := fmt.Sprintf("%d definition lines", defs)
	if totalDefs > defs {
		defNote = fmt.Sprintf("%d of %d definition lines", defs, totalDefs)
	}
	fmt.Fprintf(&b, "[file: %d lines, %d chars; kept lines 1–%d, %s and the last %d lines; request a line range for more]\n",
		len(lines), utf8.RuneCountInString(text), fileHeadLines, defNote, fileTailLines)
	for i := 0; i < len(lines); {
		if keep[i] {
			b.WriteString(lines[i])
			b.WriteByte('\n')
			i++
			continue
		}
		j := i
		for j < len(lines) && !keep[j] {
			j++
		}
		if j-i == 1 {
			fmt.Fprintf(&b, "[… line %d omitted …]\n", i+1)
		} else {
			fmt.Fprintf(&b, "[… lines %d–%d omitted …]\n", i+1, j)
		}
		i = j
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// numberedListing reports whether the first 50 non-blank lines start with
// consecutive line numbers (cat -n, editor views). Requiring the very first
// line to be numbered keeps a TSV with a header and an id column out.
func numberedListing(lines []string) bool {
	n, numbered, prev := 0, 0, -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n++
		m := reNumbered.FindString(l)
		if m == "" {
			if n == 1 {
				return false
			}
			continue
		}
		num, err := strconv.Atoi(strings.TrimSpace(strings.TrimRight(m, "\t:| ")))
		if err == nil && (prev < 0 || num == prev+1) {
			numbered++
		}
		if err == nil {
			prev = num
		}
		if n == 50 {
			break
		}
	}
	return n > 0 && numbered*10 >= n*9
}

// --- API responses ---

var apiKeys = map[string]bool{"status": true, "statusCode": true, "status_code": true, "code": true, "data": true, "result": true}

// jsonAPI reduces a JSON object that looks like an API response, or any
// JSON object when the tool name says api/http/fetch/request.
func jsonAPI(s, name string) (string, bool) {
	fields, err := objectFields([]byte(s))
	if err != nil {
		return "", false
	}
	apiShaped := nameHas(name, "api", "http", "fetch", "request", "get", "post", "curl", "rest", "graphql")
	status := ""
	for _, f := range fields {
		if apiKeys[f.Key] {
			apiShaped = true
		}
		if (f.Key == "status" || f.Key == "statusCode" || f.Key == "status_code") && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
			status = strings.Trim(string(bytes.TrimSpace(f.Raw)), `"`)
		}
	}
	if !apiShaped {
		return "", false
	}
	var body bytes.Buffer
	writeReducedObject(&body, fields, 1)
	var b strings.Builder
	b.WriteString("[api response")
	if status != "" {
		b.WriteString(": status " + status)
	}
	b.WriteString("; kept top-level fields and ids, nested values summarized]\n")
	b.Write(body.Bytes())
	return b.String(), true
}

// writeReducedObject writes the kept members of an object whose members are
// at depth (1 for the top level).
func writeReducedObject(b *bytes.Buffer, fields []jsonField, depth int) {
	b.WriteByte('{')
	n := 0
	omitted := 0
	for _, f := range fields {
		v, ok := reducedValue(f.Key, f.Raw, depth)
		if !ok {
			omitted++
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, f.Key)
		b.WriteByte(':')
		b.WriteString(v)
		n++
	}
	if omitted > 0 {
		if n > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, "…")
		b.WriteByte(':')
		writeJSONString(b, fmt.Sprintf("%d more keys omitted", omitted))
	}
	b.WriteByte('}')
}

// reducedValue returns the JSON to keep for a member at depth, or false to
// drop it. Scalars are kept at depths 1–2 and for key fields deeper;
// objects are opened at depth 1 and reduced to their key fields below;
// arrays become a description unless short and scalar.
func reducedValue(key string, raw json.RawMessage, depth int) (string, bool) {
	switch firstByte(raw) {
	case '{':
		if depth > maxReduceDepth {
			// Each level re-reads its subtree: a depth cap keeps
			// pathological nesting from costing O(size × depth).
			return "", false
		}
		fields, err := objectFields(raw)
		if err != nil {
			return "", false
		}
		if depth >= 2 && !hasKeyField(fields) {
			if depth > 2 {
				return "", false
			}
			return jsonString(fmt.Sprintf("{object: %d keys}", len(fields))), true
		}
		var b bytes.Buffer
		writeReducedObject(&b, fields, depth+1)
		return b.String(), true
	case '[':
		if depth > 2 {
			return "", false
		}
		return reducedArray(raw), true
	default:
		if depth > 2 && !isKeyField(key) {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return jsonString(clip(s, scalarMaxRunes)), true
		}
		var c bytes.Buffer
		if json.Compact(&c, raw) != nil {
			return "", false
		}
		return c.String(), true
	}
}

// reducedArray keeps a short array of scalars, and otherwise describes the
// array with its length and the ids of its first elements.
func reducedArray(raw json.RawMessage) string {
	elems, err := arrayElems(raw)
	if err != nil {
		return jsonString("[array]")
	}
	scalars := true
	for _, e := range elems {
		if c := firstByte(e); c == '{' || c == '[' {
			scalars = false
			break
		}
	}
	if scalars && len(elems) <= arrayKeepItems {
		var c bytes.Buffer
		if json.Compact(&c, raw) == nil && c.Len() <= arrayKeepBytes {
			return c.String()
		}
	}
	var ids []string
	for _, e := range elems {
		if len(ids) == arrayListIDs {
			break
		}
		fields, err := objectFields(e)
		if err != nil {
			continue
		}
		for _, f := range fields {
			if isIDKey(f.Key) && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
				ids = append(ids, strings.Trim(string(bytes.TrimSpace(f.Raw)), `"`))
				break
			}
		}
	}
	desc := fmt.Sprintf("[array: %d items", len(elems))
	if len(ids) > 0 {
		desc += "; ids: " + strings.Join(ids, ", ")
		if len(elems) > len(ids) {
			desc += ", …"
		}
	}
	return jsonString(desc + "]")
}

func isIDKey(k string) bool {
	l := strings.ToLower(k)
	return l == "id" || l == "uuid" || l == "key" || strings.HasSuffix(l, "_id") || strings.HasSuffix(k, "Id") || strings.HasSuffix(k, "ID")
}

// isKeyField: ids plus the fields that say what a record is and how it went.
func isKeyField(k string) bool {
	if isIDKey(k) {
		return true
	}
	switch strings.ToLower(k) {
	case "name", "title", "type", "status", "state", "code", "message", "error", "url":
		return true
	}
	return false
}

func hasKeyField(fields []jsonField) bool {
	for _, f := range fields {
		if isKeyField(f.Key) && firstByte(f.Raw) != '{' && firstByte(f.Raw) != '[' {
			return true
		}
	}
	return false
}

func jsonString(s string) string {
	var b bytes.Buffer
	writeJSONString(&b, s)
	return b.String()
}

// writeJSONString quotes s without escaping <, > and &, which would only
// make the reduced text longer.
func writeJSONString(b *bytes.Buffer, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
