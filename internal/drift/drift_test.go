package drift

import (
	"strings"
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
			for _, c := range SessionChecks(driftTranscript, tt.summary) {
				if c.Name == tt.failing {
					require.False(t, c.Passed, "%s: %s", c.Name, c.Note)
					require.NotEmpty(t, c.Missing)
				}
			}
		})
	}
	for _, c := range SessionChecks(driftTranscript, good) {
		require.True(t, c.Passed, "%s on the good summary: %s %v", c.Name, c.Note, c.Missing)
	}
	for _, c := range SessionChecks("", "anything") {
		require.True(t, c.Passed, "%s on an empty transcript", c.Name)
	}
}

// TestParseTranscriptBlocks pins how a transcript splits into blocks:
// text before the first header is dropped, a "[…]" line that is not a
// known header is text, and a block's text is trimmed, whether or not the
// transcript ends with a newline.
func TestParseTranscriptBlocks(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("line of a long result\n", 5000)
	tests := []struct {
		name string
		in   string
		want []transcriptBlock
	}{
		{name: "empty", in: "", want: nil},
		{name: "no header", in: "just text\nmore\n", want: nil},
		{name: "text before the first header", in: "preamble\n[user]\nhello\n", want: []transcriptBlock{{head: "user", text: "hello"}}},
		{name: "blocks", in: driftTranscript[:strings.Index(driftTranscript, "[assistant tool call")],
			want: []transcriptBlock{
				{head: "user", text: "Please migrate the billing service from Flask to FastAPI, keeping the invoice endpoints backwards compatible."},
				{head: "assistant", text: "I will start with the invoice routes."},
			}},
		{name: "unknown bracket line is text", in: "[tool tool result bash]\n[1/3] building\n[notes]\nok", want: []transcriptBlock{
			{head: "tool tool result bash", text: "[1/3] building\n[notes]\nok"}}},
		{name: "empty block and header at the end", in: "[assistant]\n\n[assistant tool call bash]\n{}\n[user]",
			want: []transcriptBlock{{head: "assistant"}, {head: "assistant tool call bash", text: "{}"}, {head: "user"}}},
		{name: "long result", in: "[tool tool result bash]\n" + long + "\n[assistant]\ndone\n",
			want: []transcriptBlock{{head: "tool tool result bash", text: strings.TrimSpace(long)}, {head: "assistant", text: "done"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, parseTranscriptBlocks(tt.in))
		})
	}
}

// TestLastErrorsCheck: each required error line must be in the summary
// as written, white space, case and quoting aside; another wording misses
// it.
func TestLastErrorsCheck(t *testing.T) {
	t.Parallel()
	required := []string{
		"ERROR: test_DIGEST_HTTP_200_OK_GET (__main__.RequestsTestCase)",
		"SyntaxError: '(' was never closed",
	}
	for _, tc := range []struct {
		name    string
		summary string
		passed  bool
		missing int
	}{
		{"all kept", "- error:   test_digest_http_200_ok_get (__main__.RequestsTestCase) — open\n- SyntaxError: ( was never closed", true, 0},
		{"told in other words", "A digest test failed and a syntax error remains.", false, 2},
		{"half", "SyntaxError: '(' was never closed", false, 1},
	} {
		c := LastErrorsCheck(required, tc.summary)
		require.Equal(t, tc.passed, c.Passed, tc.name)
		require.Len(t, c.Missing, tc.missing, tc.name)
		for _, m := range c.Missing {
			require.True(t, strings.HasPrefix(m, "last error: "), m)
		}
	}
	none := LastErrorsCheck(nil, "anything")
	require.True(t, none.Passed)
	require.Equal(t, CheckLastErrors, none.Name)
}
