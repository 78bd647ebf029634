package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

func newOpenAI(t *testing.T, srv *llmtest.Server) llm.Summarizer {
	t.Helper()
	s, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL(), APIKey: "k", Model: "gpt-4o-mini", Timeout: 5 * time.Second})
	require.NoError(t, err)
	return s
}

func TestSummarizeSplitsOnContextLength(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(llmtest.WithContextLimit(30000))
	t.Cleanup(srv.Close)
	a := &Activities{Summarizer: newOpenAI(t, srv)}
	var sb strings.Builder
	for i := 0; sb.Len() < 50000; i++ {
		sb.WriteString("line of build output with /src/pkg/file.go:42 and error E1234\n")
	}
	resp, err := a.summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: sb.String(), TargetChars: 5000}, 0)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Text)
	var rejected, accepted int
	for _, c := range srv.Calls() {
		if c.Status == 400 {
			rejected++
		} else if c.Status == 200 {
			accepted++
		}
	}
	require.Equal(t, 1, rejected, "the whole input was refused once")
	require.GreaterOrEqual(t, accepted, 2, "then its halves were summarized")
}

func TestSummarizeGivesUpSplittingAtDepth(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(llmtest.WithContextLimit(10))
	t.Cleanup(srv.Close)
	a := &Activities{Summarizer: newOpenAI(t, srv)}
	_, err := a.summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: strings.Repeat("abc def\n", 4000), TargetChars: 100}, 0)
	require.Equal(t, llm.ContextLength, llm.KindOf(err))
}

func TestLLMErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		fault        llmtest.Fault
		nonRetryable bool
		delay        time.Duration
	}{
		{"429 honours Retry-After", llmtest.Fault429{RetryAfter: 7 * time.Second}, false, 7 * time.Second},
		{"500 retries with backoff", llmtest.Fault500{}, false, 0},
		{"401 stops", llmtest.Fault401{}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.New(llmtest.WithScript(tc.fault))
			t.Cleanup(srv.Close)
			_, err := newOpenAI(t, srv).Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: "x", TargetChars: 10})
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(llmErr(err), &appErr))
			require.Equal(t, tc.nonRetryable, appErr.NonRetryable())
			require.Equal(t, tc.delay, appErr.NextRetryDelay())
			require.NotContains(t, appErr.Error(), "Bearer k")
		})
	}
}

// TestSummarizerModelFromTheWorkflow: the model the workflow gives wins
// (even "", the worker's); without one, the run's preset snapshot decides.
func TestSummarizerModelFromTheWorkflow(t *testing.T) {
	t.Parallel()
	given := func(s string) *string { return &s }
	tests := []struct {
		name  string
		in    SummarizeInput
		model string
	}{
		{name: "given by the workflow", in: SummarizeInput{Run: contract.Run{Preset: "offload-compact"}, SummarizerModel: given("small-model")}, model: "small-model"},
		{name: "the worker's, as given", in: SummarizeInput{Run: contract.Run{Preset: "no-such-preset"}, SummarizerModel: given("")}, model: ""},
		{name: "else the run's snapshot", in: SummarizeInput{Run: contract.Run{Preset: "offload-compact",
			Resolved: &policy.Preset{Name: "offload-compact", SummarizerModel: "from-overrides"}}}, model: "from-overrides"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := (&Activities{}).summarizerModel(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.model, got)
		})
	}
	_, err := (&Activities{}).summarizerModel(SummarizeInput{Run: contract.Run{Preset: "no-such-preset"}})
	require.Error(t, err, "a run without a snapshot has no model to use")
}
