package digest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const driftTranscript = `[user]
Please migrate the billing service from Flask to FastAPI, keeping the invoice endpoints backwards compatible.

[assistant]
I will start with the invoice routes.

[assistant tool call bash]
{"command": "pytest tests/test_invoices.py"}

[tool tool result bash]
FAILED tests/test_invoices.py::test_refund - AssertionError: 402 != 200
1 failed, 12 passed

[assistant]
Should I keep the legacy /v1/refund route, or do you want it removed?

`

// TestSessionDriftChecks: each check fails on a summary crafted to miss
// what it looks for, and passes on a good one.
func TestSessionDriftChecks(t *testing.T) {
	t.Parallel()
	good := "Task: migrate the billing service from Flask to FastAPI, invoice endpoints backwards compatible. " +
		"Ran pytest tests/test_invoices.py: test_refund still fails (402 != 200). " +
		"Open question to the user: keep the legacy /v1/refund route or remove it?"
	tests := []struct {
		name    string
		summary string
		failing string
	}{
		{"intent lost", "Ran pytest tests/test_invoices.py; test_refund fails. Open question: keep the legacy /v1/refund route or remove it?", CheckIntent},
		{"trajectory lost", "Task: migrate the billing service from Flask to FastAPI with backwards compatible invoice endpoints. Open question: keep the legacy /v1/refund route or remove it?", CheckTrajectory},
		{"claims done", good + " All tests pass and the task is complete.", CheckPremature},
		{"question lost", "Task: migrate the billing service from Flask to FastAPI, invoice endpoints backwards compatible. Ran pytest tests/test_invoices.py.", CheckClarification},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range SessionDriftChecks(driftTranscript, tt.summary) {
				if c.Name == tt.failing {
					require.False(t, c.Passed, "%s: %s", c.Name, c.Note)
					require.NotEmpty(t, c.Missing)
				}
			}
		})
	}
	for _, c := range SessionDriftChecks(driftTranscript, good) {
		require.True(t, c.Passed, "%s on the good summary: %s %v", c.Name, c.Note, c.Missing)
	}
	for _, c := range SessionDriftChecks("", "anything") {
		require.True(t, c.Passed, "%s on an empty transcript", c.Name)
	}
}
