package offline

import (
	"context"
	"regexp"
	"testing"

	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/stretchr/testify/require"
)

// These tests tie the offline summary to llm's prompts and judge: moved
// here from internal/llm with the summary.

func TestHistorySectionsInPromptOrder(t *testing.T) {
	t.Parallel()
	p, err := llm.LoadPrompt(llm.PromptHistory)
	require.NoError(t, err)
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(p.System, -1) {
		got = append(got, m[1])
	}
	require.Equal(t, HistorySections, got, "offline and LLM summaries share the headings")

	p, err = llm.LoadPrompt(llm.PromptSession)
	require.NoError(t, err)
	got = nil
	for _, m := range regexp.MustCompile(`(?m)^### (.+)$`).FindAllStringSubmatch(p.System, -1) {
		got = append(got, m[1])
	}
	require.Equal(t, SessionSections, got)
}

func TestOfflineJudgeAnswersInSchema(t *testing.T) {
	t.Parallel()
	transcript := "[user]\nMigrate billing from Flask to FastAPI, keep invoices compatible.\n\n[assistant]\nShould I keep the legacy /v1/refund route, or do you want it removed?\n"
	resp, err := Summarizer{}.Summarize(context.Background(), llm.Request{Prompt: llm.PromptJudge, TargetTokens: 800, Text: transcript, Context: "Migrate billing from Flask to FastAPI; open question: keep the legacy /v1/refund route or remove it?"})
	require.NoError(t, err)
	checks, err := llm.ParseJudgeVerdict(resp.Text)
	require.NoError(t, err, "the offline judge answers in the schema")
	require.True(t, checks[0].Passed)
}
