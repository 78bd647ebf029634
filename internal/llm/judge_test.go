package llm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJudgeVerdict(t *testing.T) {
	t.Parallel()
	transcript := "[user]\nMigrate billing from Flask to FastAPI, keep invoices compatible.\n\n[assistant]\nShould I keep the legacy /v1/refund route, or do you want it removed?\n"
	checks, err := ParseJudgeVerdict(HeuristicVerdict(transcript, "All done."))
	require.NoError(t, err)
	require.Len(t, checks, 4)
	require.False(t, checks[0].Passed, "intent is not in the summary")
	require.False(t, checks[3].Passed, "the open question is lost")

	for _, bad := range []string{`prose`, `{"checks":[]}`, `{"checks":[{"name":"intent","passed":true,"missing":[],"note":""},{"name":"intent","passed":true,"missing":[],"note":""}]}`} {
		_, err := ParseJudgeVerdict(bad)
		require.Error(t, err, bad)
	}

	resp, err := Extractive{}.Summarize(context.Background(), Request{Prompt: PromptJudge, TargetTokens: 800, Text: transcript, Context: "Migrate billing from Flask to FastAPI; open question: keep the legacy /v1/refund route or remove it?"})
	require.NoError(t, err)
	checks, err = ParseJudgeVerdict(resp.Text)
	require.NoError(t, err, "the offline judge answers in the schema")
	require.True(t, checks[0].Passed)
}
