package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/stretchr/testify/require"
)

const transcript = `system: You are a coding agent.
user: Please add retries to the uploader in internal/blob/upload.go. Always use table tests.
assistant: I will read the file first.
tool: package blob
tool: func Upload(ctx context.Context, key string) error { return put(key) }
assistant: I decided to use exponential backoff because S3 throttles with 503 SlowDown.
{"command": "go test ./internal/blob/..."}
tool: go test ./internal/blob/... FAIL: TestUpload timeout after 30s (exit status 1)
assistant: The test failed because the fake server never answers; I fixed it by closing the listener.
assistant: I modified internal/blob/upload.go and created internal/blob/upload_test.go.
user: Now also log the request id req_8812734 and push to https://git.example.com/team/repo.
assistant: Done with the code; the log line is in place and go vet is clean.
`

func headings(text, level string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(level)+` (.+)$`).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// bodyOf returns the body under a heading, up to the next heading.
func bodyOf(text, level, heading string) string {
	_, rest, ok := strings.Cut(text, level+" "+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n"+level+" "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func TestExtractiveEveryPrompt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat(transcript, 20)
	tests := []struct {
		name  string
		req   llm.Request
		check func(t *testing.T, out string)
	}{
		{"chunk", llm.Request{Prompt: llm.PromptChunk, Text: long, TargetChars: 600}, nil},
		{"merge", llm.Request{Prompt: llm.PromptMerge, Text: long, TargetChars: 600}, nil},
		{"result", llm.Request{Prompt: llm.PromptResult, Text: long, Context: "thought/action", TargetTokens: 150}, nil},
		{"brief", llm.Request{Prompt: llm.PromptBrief, Text: long}, func(t *testing.T, out string) {
			// A conversation gets the structured summary, within the
			// target plus its headings.
			require.Equal(t, StructuredSections, headings(out, "##"))
			require.LessOrEqual(t, utf8.RuneCountInString(out), len(long)/10+headingsOverhead("##", StructuredSections))
			require.Contains(t, bodyOf(out, "##", "Files Touched"), "internal/blob/upload.go")
			require.Contains(t, bodyOf(out, "##", "Errors and Resolutions"), "FAIL: TestUpload")
		}},
		{"history", llm.Request{Prompt: llm.PromptHistory, Text: transcript, TargetTokens: 400}, func(t *testing.T, out string) {
			require.Equal(t, HistorySections, headings(out, "##"))
			require.Contains(t, bodyOf(out, "##", "Project Overview"), "add retries to the uploader")
			require.Contains(t, bodyOf(out, "##", "Pending Tasks"), "req_8812734", "the last user request is pending")
			require.Contains(t, bodyOf(out, "##", "Current Status"), "go vet is clean")
			require.Contains(t, bodyOf(out, "##", "Debugging & Issues"), "FAIL: TestUpload")
			require.Contains(t, bodyOf(out, "##", "Code Changes"), "internal/blob/upload.go")
			require.Contains(t, bodyOf(out, "##", "User Preferences"), "Always use table tests")
			require.Contains(t, bodyOf(out, "##", "Key Decisions"), "exponential backoff")
			require.Contains(t, bodyOf(out, "##", "Technical Context"), "go test ./internal/blob/... → exit 1")
		}},
		{"session", llm.Request{Prompt: llm.PromptSession, Text: transcript, TargetTokens: 400, ArchiveRef: "s3://b/t1/archive/9f2c.json"}, func(t *testing.T, out string) {
			require.Equal(t, SessionSections, headings(out, "###"))
			require.Contains(t, bodyOf(out, "###", "Session Intent"), "add retries to the uploader")
			require.Contains(t, bodyOf(out, "###", "Artifacts Created"), "| upload_test.go | internal/blob/upload_test.go | created |")
			require.Contains(t, bodyOf(out, "###", "Critical Facts"), "FAIL: TestUpload", "errors are critical facts")
			require.Contains(t, bodyOf(out, "###", "Critical Facts"), "Always use table tests", "so are constraints")
			require.Contains(t, bodyOf(out, "###", "Next Steps"), "req_8812734")
			require.Contains(t, bodyOf(out, "###", "Next Steps"), "https://git.example.com/team/repo")
			require.Contains(t, bodyOf(out, "###", "Key Decisions"), "exponential backoff")
			require.Equal(t, "- Full conversation: s3://b/t1/archive/9f2c.json", strings.TrimSpace(bodyOf(out, "###", "Recovery References")))
		}},
		{"repair", llm.Request{Prompt: llm.PromptRepair, Text: transcript, TargetTokens: 400, Context: "## Current Status\n- done",
			Missing: []string{"req_8812734", "not-in-source-42"}}, func(t *testing.T, out string) {
			require.True(t, strings.HasPrefix(out, "## Current Status\n- done"), "the previous summary is kept")
			omitted := bodyOf(out, "##", "Omitted Items")
			require.Contains(t, omitted, "log the request id req_8812734", "an item comes with its source line")
			require.Contains(t, omitted, "- not-in-source-42")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := Summarizer{}.Summarize(context.Background(), tc.req)
			require.NoError(t, err)
			p, err := llm.LoadPrompt(tc.req.Prompt)
			require.NoError(t, err)
			require.True(t, resp.Offline)
			require.Equal(t, ExtractiveModel, resp.Model)
			require.Equal(t, p.Version, resp.PromptVersion)
			require.NotEmpty(t, resp.Text)
			if tc.check != nil {
				tc.check(t, resp.Text)
				return
			}
			// Flat prompts: within the target, and every line comes from
			// the source or is textcut's omission marker.
			require.LessOrEqual(t, utf8.RuneCountInString(resp.Text), extractiveTarget(tc.req))
			for _, l := range strings.Split(resp.Text, "\n") {
				if !reMarker.MatchString(l) {
					require.Contains(t, tc.req.Text, l)
				}
			}
		})
	}
}

func TestExtractiveRepairUsesSummaryLevel(t *testing.T) {
	t.Parallel()
	resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{
		Prompt: llm.PromptRepair, Text: transcript, TargetTokens: 100, Context: "### Session Intent\n- x", Missing: []string{"upload.go"},
	})
	require.NoError(t, err)
	require.Contains(t, resp.Text, "\n### Omitted Items\n")
}

func TestExtractiveRefusesBadRequests(t *testing.T) {
	t.Parallel()
	_, err := Summarizer{}.Summarize(context.Background(), llm.Request{Prompt: llm.PromptHistory, Text: "x"})
	require.Equal(t, llm.BadRequest, llm.KindOf(err))
	require.ErrorContains(t, err, "needs TargetTokens")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Summarizer{}.Summarize(ctx, llm.Request{Prompt: llm.PromptBrief, Text: "x"})
	require.Equal(t, llm.Canceled, llm.KindOf(err))
}

func TestParseTranscript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []turn
	}{
		{"colon markers", "user: hi\nAssistant: hello\nthere", []turn{{"user", []string{"hi"}}, {"assistant", []string{"hello", "there"}}}},
		{"brackets", "[user] a\n[tool result bash]: b", []turn{{"user", []string{"a"}}, {"tool", []string{"b"}}}},
		{"headings", "## User\nq\n## Assistant (msg 2)\na", []turn{{"user", []string{"q"}}, {"assistant", []string{"a"}}}},
		{"parenthesised", "tool (call_1): out\nhuman: next", []turn{{"tool", []string{"out"}}, {"user", []string{"next"}}}},
		{"no markers", "just text\nmore", []turn{{"", []string{"just text", "more"}}}},
		{"prose is not a marker", "user data is kept\nthe assistant said", []turn{{"", []string{"user data is kept", "the assistant said"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, parseTranscript(tc.text))
		})
	}
}

// sweTranscript renders a real SWE-agent run as "role: content" lines.
func sweTranscript(t testing.TB) string {
	t.Helper()
	// The real conversations are part of the repository (see
	// testdata/conversations/README.md); a missing file fails the test.
	path := filepath.Join("../../testdata/conversations", "swe-agent-deepseek", "django__django-11564.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("test data %s: %v", path, err)
	}
	var run struct {
		Messages []struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(raw, &run))
	var b strings.Builder
	for _, m := range run.Messages {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "%s\n", c.Function.Arguments)
		}
	}
	return b.String()
}

func TestExtractiveOnRealConversation(t *testing.T) {
	t.Parallel()
	text := sweTranscript(t)
	for _, tc := range []struct {
		prompt, level string
		want          []string
	}{
		{llm.PromptHistory, "##", HistorySections},
		{llm.PromptSession, "###", SessionSections},
	} {
		t.Run(tc.prompt, func(t *testing.T) {
			t.Parallel()
			const target = 8000 * llm.CharsPerToken
			resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{
				Prompt: tc.prompt, Text: text, TargetTokens: 8000, ArchiveRef: "s3://archive/django-11564",
			})
			require.NoError(t, err)
			require.Equal(t, tc.want, headings(resp.Text, tc.level))
			require.LessOrEqual(t, utf8.RuneCountInString(resp.Text), target+200, "about the target")
			require.Less(t, len(resp.Text), len(text)/4)
			for _, h := range tc.want {
				require.NotEqual(t, "- (none found)", strings.TrimSpace(bodyOf(resp.Text, tc.level, h)),
					"a real run fills every section (%s)", h)
			}
			require.Contains(t, resp.Text, "SCRIPT_NAME", "the task's key identifier survives")
		})
	}
}

func BenchmarkExtractiveHistory(b *testing.B) {
	text := sweTranscript(b)
	req := llm.Request{Prompt: llm.PromptHistory, Text: text, TargetTokens: 8000}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := (Summarizer{}).Summarize(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
