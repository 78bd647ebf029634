package llm

import (
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
}
