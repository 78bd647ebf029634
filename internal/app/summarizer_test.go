package app_test

import (
	"context"
	"testing"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/stretchr/testify/require"
)

const source = "user: the nightly job crashed again, see /var/log/etl/nightly.log\n" +
	"tool: retried 3 times, last exit code 137, job id job-8f3a91c\n"

// TestNewPicksOfflineWithoutBaseURL moved here from internal/llm with the
// choice (llm.New before the offline summarizer became package recap, now offline).
func TestNewPicksOfflineWithoutBaseURL(t *testing.T) {
	t.Parallel()
	sum, err := app.NewSummarizer(llm.Config{})
	require.NoError(t, err)
	require.IsType(t, offline.Summarizer{}, sum)

	s := llmtest.New()
	defer s.Close()
	sum, err = app.NewSummarizer(llm.Config{BaseURL: s.URL(), Model: "m"})
	require.NoError(t, err)
	require.IsType(t, &llm.OpenAI{}, sum)
	resp, err := sum.Summarize(context.Background(), llm.Request{Prompt: llm.PromptBrief, Text: source})
	require.NoError(t, err)
	require.False(t, resp.Offline)

	_, err = app.NewSummarizer(llm.Config{BaseURL: s.URL()})
	require.ErrorContains(t, err, "Model is empty")
}
