package textcut

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// words is a stand-in token counter: one token per whitespace-separated word.
func words(s string) int { return len(strings.Fields(s)) }

// approxTokens is a stand-in token counter: four code points per token.
func approxTokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

func searchJSON(n int) string {
	type hit struct {
		Title      string `json:"title"`
		URL        string `json:"url"`
		Snippet    string `json:"snippet"`
		RawContent string `json:"raw_content"`
		Score      float64
	}
	var hits []hit
	for i := 0; i < n; i++ {
		hits = append(hits, hit{
			Title:      fmt.Sprintf("Result %d about Go", i),
			URL:        fmt.Sprintf("https://example.com/page/%d", i),
			Snippet:    "A short snippet that says what the page is about.",
			RawContent: strings.Repeat("<div>full page html content</div> ", 40),
			Score:      0.5,
		})
	}
	b, _ := json.Marshal(map[string]any{"query": "go generics", "results": hits})
	return string(b)
}

func pythonFile(lines int) string {
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		switch {
		case i%50 == 0:
			fmt.Fprintf(&b, "def handler_%d(request):\n", i)
		case i%120 == 0:
			fmt.Fprintf(&b, "class Model%d:\n", i)
		case i == 300:
			b.WriteString("    raise ValueError('bad')\n")
		default:
			fmt.Fprintf(&b, "    value_%d = compute(%d)  # some comment text\n", i, i)
		}
	}
	return b.String()
}

func jsonRows(n int) string {
	var rows []map[string]any
	for i := 0; i < n; i++ {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("user %d", i), "email": fmt.Sprintf("u%d@example.com", i)})
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

func csvRows(n int, sep string) string {
	var b strings.Builder
	b.WriteString(strings.Join([]string{"id", "name", "city"}, sep) + "\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d%s\"user, %d\"%sParis\n", i, sep, i, sep)
	}
	return b.String()
}

func psqlTable(n int) string {
	var b strings.Builder
	b.WriteString(" id | name     | total\n----+----------+-------\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " %2d | user %3d | %5d\n", i, i, i*10)
	}
	fmt.Fprintf(&b, "(%d rows)\n", n)
	return b.String()
}

func apiResponse() string {
	items := make([]map[string]any, 250)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("ord_%03d", i), "total": i, "lines": []int{1, 2, 3}}
	}
	b, _ := json.Marshal(map[string]any{
		"status":     200,
		"request_id": "req_9f8e7d6c",
		"data": map[string]any{
			"order_id": "ORD-42",
			"customer": map[string]any{"id": "cus_123", "address": map[string]any{"city": "Lyon"}, "notes": strings.Repeat("n", 50)},
			"items":    items,
			"metadata": map[string]any{"trace": strings.Repeat("x", 500), "region": "eu"},
		},
	})
	return string(b)
}

func TestPostProcessRules(t *testing.T) {
	t.Parallel()
	r := DefaultPostRules()
	bigProse := strings.Repeat("The agent looked at the logs and kept working on the task. ", 100)
	tests := []struct {
		name     string
		tool     string
		text     string
		isError  bool
		rules    func(PostRules) PostRules
		wantKind string
		contains []string
		absent   []string
	}{
		{name: "debug keeps everything", tool: "web_search", text: searchJSON(20), rules: func(r PostRules) PostRules { r.Debug = true; return r }, wantKind: PostKeptDebug},
		{name: "flagged error kept", tool: "bash", text: bigProse, isError: true, wantKind: PostKeptError},
		{name: "traceback kept", tool: "bash", text: "Traceback (most recent call last):\n  File \"x.py\", line 1\n" + bigProse + "\nValueError: bad", wantKind: PostKeptError},
		{name: "JSON error object kept", tool: "api", text: `{"error": {"message": "` + strings.Repeat("quota exceeded ", 300) + `"}}`, wantKind: PostKeptError},
		{name: "JSON 5xx status kept", tool: "api", text: `{"statusCode": 503, "body": "` + strings.Repeat("busy ", 800) + `"}`, wantKind: PostKeptError},
		{name: "small result kept", tool: "bash", text: "ok, 3 files changed", wantKind: PostKeptSmall},
		{name: "small JSON kept", tool: "api", text: `{"status": 200, "data": {"id": 1, "note": "` + strings.Repeat("a ", 500) + `"}}`, wantKind: PostKeptStructured},
		{name: "small YAML kept", tool: "kubectl", text: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n" + strings.Repeat("  label: value value value value\n", 40), wantKind: PostKeptStructured},
		{
			name: "search JSON keeps title, URL, snippet", tool: "web_search", text: searchJSON(10), wantKind: PostSearch,
			contains: []string{"Result 3 about Go", "https://example.com/page/3", "A short snippet"},
			absent:   []string{"<div>", "raw_content", "Score"},
		},
		{
			name: "markdown link list", tool: "search",
			text:     strings.Repeat("- [Go generics tutorial](https://go.dev/doc/tutorial/generics) - how to write generic code\n  "+strings.Repeat("more page text ", 100)+"\n", 8),
			wantKind: PostSearch, contains: []string{"Go generics tutorial", "https://go.dev/doc/tutorial/generics", "how to write generic code"},
		},
		{
			name: "long file read", tool: "read_file", text: pythonFile(800), wantKind: PostFile,
			contains: []string{"value_1 = compute(1)", "def handler_400(request):", "class Model360:", "[… lines 21–49 omitted …]", "value_799"},
			absent:   []string{"value_300"},
		},
		{
			name: "numbered listing from any tool", tool: "bash", text: numbered(pythonFile(700)), wantKind: PostFile,
			contains: []string{"def handler_650(request):"},
		},
		{name: "short file read unchanged", tool: "read_file", text: pythonFile(400), wantKind: PostUnchanged},
		{
			name: "JSON rows", tool: "sql_query", text: jsonRows(150), wantKind: PostTable,
			contains: []string{"150 rows", "columns: email, id, name", `"u9@example.com"`, "140 more rows omitted"},
			absent:   []string{`"u10@example.com"`},
		},
		{name: "100 JSON rows are not sampled", tool: "sql_query", text: jsonRows(100), wantKind: PostUnchanged},
		{
			name: "CSV rows", tool: "query", text: csvRows(150, ","), wantKind: PostTable,
			contains: []string{"150 rows", "columns: id, name, city", `9,"user, 9",Paris`, "140 more rows omitted"},
			absent:   []string{`10,"user, 10"`},
		},
		{name: "TSV rows", tool: "query", text: csvRows(150, "\t"), wantKind: PostTable, contains: []string{"150 rows"}},
		{
			name: "psql table", tool: "psql", text: psqlTable(150), wantKind: PostTable,
			contains: []string{"150 rows", "columns: id, name, total", "user   9", "(150 rows)"},
			absent:   []string{"user  10"},
		},
		{
			name: "API response", tool: "http_get", text: apiResponse(), wantKind: PostAPI,
			contains: []string{"status 200", `"request_id":"req_9f8e7d6c"`, `"order_id":"ORD-42"`, `"id":"cus_123"`, "[array: 250 items; ids: ord_000", "more keys omitted"},
			absent:   []string{"xxxxxxxxxx", "Lyon"},
		},
		{name: "plain prose unchanged", tool: "bash", text: bigProse, wantKind: PostUnchanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules := r
			if tt.rules != nil {
				rules = tt.rules(r)
			}
			out, kind, changed := PostProcess(tt.tool, tt.text, tt.isError, approxTokens, rules)
			require.Equal(t, tt.wantKind, kind)
			require.Equal(t, out != tt.text, changed)
			require.LessOrEqual(t, approxTokens(out), approxTokens(tt.text))
			require.LessOrEqual(t, utf8.RuneCountInString(out), utf8.RuneCountInString(tt.text))
			if strings.HasPrefix(kind, "kept") || kind == PostUnchanged {
				require.Equal(t, tt.text, out)
				require.False(t, changed)
			} else {
				require.True(t, changed)
			}
			for _, s := range tt.contains {
				require.Contains(t, out, s)
			}
			for _, s := range tt.absent {
				require.NotContains(t, out, s)
			}
		})
	}
}

// numbered prefixes each line as cat -n does.
func numbered(text string) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = fmt.Sprintf("%6d\t%s", i+1, l)
	}
	return strings.Join(lines, "\n")
}

func TestPostProcessAPIOutputIsJSON(t *testing.T) {
	t.Parallel()
	out, kind, _ := PostProcess("api", apiResponse(), false, nil, DefaultPostRules())
	require.Equal(t, PostAPI, kind)
	_, body, found := strings.Cut(out, "\n")
	require.True(t, found)
	require.True(t, json.Valid([]byte(body)), "reduced body must stay valid JSON: %s", body)
}

func TestPostProcessNilCountUsesCodePoints(t *testing.T) {
	t.Parallel()
	// 150 code points: small in characters (< 200), so kept.
	text := strings.Repeat("é", 150)
	_, kind, _ := PostProcess("bash", text, false, nil, DefaultPostRules())
	require.Equal(t, PostKeptSmall, kind)
}

func TestPostProcessSampleRows(t *testing.T) {
	t.Parallel()
	r := DefaultPostRules()
	r.SampleRows = 3
	out, kind, _ := PostProcess("sql", jsonRows(120), false, nil, r)
	require.Equal(t, PostTable, kind)
	require.Contains(t, out, `"u2@example.com"`)
	require.NotContains(t, out, `"u3@example.com"`)
	require.Contains(t, out, "117 more rows omitted")
}

func TestPostProcessNeverGrows(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(4))
	gens := []func() string{
		func() string { return searchJSON(1 + rng.Intn(5)) },
		func() string { return jsonRows(95 + rng.Intn(20)) },
		func() string { return csvRows(95+rng.Intn(20), ",") },
		func() string { return psqlTable(95 + rng.Intn(20)) },
		func() string { return pythonFile(480 + rng.Intn(40)) },
		apiResponse,
		func() string { return randomText(rng, rng.Intn(5000)) },
		func() string { return strings.Repeat("def f():\n", 600) },
		func() string { return strings.Repeat("| a | b |\n", 200) },
	}
	tools := []string{"bash", "read_file", "web_search", "sql", "api", ""}
	for i := 0; i < 300; i++ {
		text := gens[rng.Intn(len(gens))]()
		rules := DefaultPostRules()
		rules.SmallTokens = rng.Intn(50)
		rules.JSONTokens = rng.Intn(100)
		rules.SampleRows = rng.Intn(150)
		for _, count := range []func(string) int{nil, words} {
			out, kind, changed := PostProcess(tools[rng.Intn(len(tools))], text, false, count, rules)
			require.NotEmpty(t, kind)
			require.Equal(t, out != text, changed)
			require.LessOrEqual(t, utf8.RuneCountInString(out), utf8.RuneCountInString(text), "kind %s grew the text", kind)
			if count != nil {
				require.LessOrEqual(t, count(out), count(text), "kind %s grew the count", kind)
			}
		}
	}
}
