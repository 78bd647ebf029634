package llm

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEveryPromptFileLoads(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("prompts/*.md")
	require.NoError(t, err)
	names := PromptNames()
	require.Len(t, names, len(files), "every file is embedded")
	for _, want := range []string{PromptChunk, PromptMerge, PromptResult, PromptHistory, PromptBrief, PromptSession, PromptRepair} {
		require.Contains(t, names, want)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".md")
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		p, err := LoadPrompt(name)
		require.NoError(t, err)
		require.Equal(t, name, p.Name)
		// The version is visible in the file itself, so a reviewer sees it.
		require.Contains(t, string(raw), "version: "+p.Version)
		require.Regexp(t, "^"+regexp.QuoteMeta(name)+`-v\d+$`, p.Version)
	}
}

func TestLoadPromptUnknown(t *testing.T) {
	t.Parallel()
	_, err := LoadPrompt("nope")
	require.ErrorContains(t, err, `unknown prompt "nope"`)
	require.ErrorContains(t, err, "history", "the error lists what exists")
}

func fullRequest(name string) Request {
	return Request{
		Prompt:       name,
		Text:         "user: fix the bug",
		Context:      "THOUGHT-MARK: look at the logs; ACTION-MARK: read_file(logs/app.log)",
		TargetTokens: 8000,
		Missing:      []string{"internal/store/runs.go", "ERR-4411"},
		ArchiveRef:   "s3://bucket/tenant/archive/abc123.json",
	}
}

func TestEveryTemplateRenders(t *testing.T) {
	t.Parallel()
	// What each rendered prompt must contain, from the source designs
	// (docs/designs.md).
	want := map[string][]string{
		PromptChunk:  {"approximately 32000 characters", "about 8000 tokens", "THOUGHT-MARK", "error"},
		PromptMerge:  {"approximately 32000 characters", "chunk summaries"},
		PromptResult: {"THOUGHT-MARK", "ACTION-MARK", "approximately 32000 characters"},
		PromptHistory: {
			"Please provide a comprehensive summary of our conversation structured as follows:",
			"## Technical Context\nDevelopment environment, tools, frameworks, and configurations in use.",
			"## Project Overview\n", "## Code Changes\n", "## Debugging & Issues\n", "## Current Status\n",
			"## Pending Tasks\n", "## User Preferences\n", "## Key Decisions\n",
			"Focus on information essential for continuing effectively. Target length: approximately 8000 tokens.",
		},
		PromptBrief: {"Summarize the following conversation, preserving:", "Key decisions made", "Unresolved issues",
			"Current task state", "Be concise."},
		PromptSession: {"### Session Intent", "### Artifacts Created", "### Key Decisions", "### Current Progress",
			"### Critical Facts", "### Next Steps", "### Recovery References",
			"- Full conversation: s3://bucket/tenant/archive/abc123.json"},
		PromptRepair: {"The previous summary omitted these items:", "- internal/store/runs.go\n", "- ERR-4411\n",
			"Produce a corrected summary that includes them", "THOUGHT-MARK"},
		PromptJudge:       {"<summary>\n", "THOUGHT-MARK", "premature-completion", "clarification", "answer with JSON only"},
		PromptProbeAnswer: {"Using only what it says", "answer \"unknown\": do not guess", "numbered list", "THOUGHT-MARK"},
		PromptProbeGrade:  {"recall, artifact trail, continuation, decision", "from 0 to 5", "exactly \"N: SCORE\"", "THOUGHT-MARK"},
	}
	for _, name := range PromptNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := LoadPrompt(name)
			require.NoError(t, err)
			out, err := p.Render(fullRequest(name))
			require.NoError(t, err)
			require.NotContains(t, out, "{{")
			require.NotContains(t, out, "<no value>")
			wants, ok := want[name]
			require.True(t, ok, "add expectations for prompt %s", name)
			for _, w := range wants {
				require.Contains(t, out, w)
			}
		})
	}
}

func TestRenderTargetsConvert(t *testing.T) {
	t.Parallel()
	p, err := LoadPrompt(PromptChunk)
	require.NoError(t, err)
	out, err := p.Render(Request{Prompt: PromptChunk, Text: "x", TargetChars: 5000})
	require.NoError(t, err)
	require.Contains(t, out, "approximately 5000 characters (about 1250 tokens)")

	p, err = LoadPrompt(PromptBrief)
	require.NoError(t, err)
	out, err = p.Render(Request{Prompt: PromptBrief, Text: "x"})
	require.NoError(t, err)
	require.NotContains(t, out, "Target length", "no target, no target line")
}

func TestParsePromptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, wantErr string
	}{
		{"no front matter", "hello", "missing front matter"},
		{"unclosed", "---\nversion: x-v1\nhello", "not closed"},
		{"no version", "---\n---\nhello", "no version"},
		{"bad line", "---\nversion x-v1\n---\nhello", "want \"key: value\""},
		{"unknown key", "---\nversion: x-v1\nauthor: me\n---\nhello", `unknown key "author"`},
		{"version of other prompt", "---\nversion: y-v1\n---\nhello", `must look like "x-v1"`},
		{"version without number", "---\nversion: x-latest\n---\nhello", "must look like"},
		{"empty body", "---\nversion: x-v1\n---\n  \n", "empty prompt body"},
		{"bad template", "---\nversion: x-v1\n---\n{{.Nope", "parse template"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parsePrompt("x", tc.raw)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	p, err := parsePrompt("x", "---\r\nversion: x-v3\r\n---\r\nhello {{.TargetTokens}}\r\n")
	require.NoError(t, err)
	require.Equal(t, "x-v3", p.Version)
	out, err := p.Render(Request{TargetTokens: 9})
	require.NoError(t, err)
	require.Equal(t, "hello 9", out)
}

func TestRenderUnknownField(t *testing.T) {
	t.Parallel()
	p, err := parsePrompt("x", "---\nversion: x-v1\n---\n{{.Nope}}")
	require.NoError(t, err)
	_, err = p.Render(Request{})
	require.ErrorContains(t, err, "x-v1")
	_, err = Prompt{Name: "bare"}.Render(Request{})
	require.ErrorContains(t, err, "not loaded")
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	ok := func(name string) Request { return fullRequest(name) }
	tests := []struct {
		name    string
		mutate  func(*Request)
		wantErr string
	}{
		{"valid history", func(*Request) {}, ""},
		{"no prompt", func(r *Request) { r.Prompt = "" }, "request.Prompt is empty"},
		{"unknown prompt", func(r *Request) { r.Prompt = "nope" }, "unknown prompt"},
		{"no text", func(r *Request) { r.Text = "" }, "request.Text is empty"},
		{"negative", func(r *Request) { r.TargetChars = -1 }, "negative"},
		{"no target", func(r *Request) { r.TargetTokens = 0 }, "needs TargetTokens or TargetChars"},
		{"brief needs no target", func(r *Request) { r.Prompt = PromptBrief; r.TargetTokens = 0 }, ""},
		{"repair without missing", func(r *Request) { r.Prompt = PromptRepair; r.Missing = nil }, "no Missing items"},
		{"repair without previous", func(r *Request) { r.Prompt = PromptRepair; r.Context = "" }, "previous summary"},
		{"session without archive", func(r *Request) { r.Prompt = PromptSession; r.ArchiveRef = "" }, "no ArchiveRef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := ok(PromptHistory)
			tc.mutate(&r)
			err := r.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestMaxTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		req    Request
		factor float64
		want   int
	}{
		{Request{TargetTokens: 8000}, 1.2, 9600},
		{Request{TargetTokens: 8000}, 0, 9600},
		{Request{TargetTokens: 7}, 1.2, 9},
		{Request{TargetTokens: 100, TargetChars: 999999}, 1.2, 120},
		{Request{TargetChars: 5000}, 1.2, 1500},
		{Request{TargetChars: 5001}, 1.2, 1502},
		{Request{}, 1.2, 0},
		{Request{TargetTokens: 1000}, 1.5, 1500},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%+v×%v", tc.req, tc.factor), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, MaxTokens(tc.req, tc.factor))
		})
	}
}
