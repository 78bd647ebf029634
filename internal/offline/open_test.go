package offline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenErrors: of the last errors, the ones a later command of the same
// kind resolved are not required; an error of a tool that answers
// "Error: …" counts; a transcript larger than the tail read keeps the
// errors of its end.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	call := func(cmd, out string) string {
		return "[assistant tool call bash]\n" + cmd + "\n\n[tool tool result bash]\n" + out + "\n\n"
	}
	transcript := "[user]\nFix the tests.\n\n" +
		call("python3 test_a.py", "<returncode>1</returncode>\nERROR: test_one (__main__.Case)\nFAILED (errors=1)") +
		call("python3 run.py", "<returncode>1</returncode>\nKeyError: 'indexes'") +
		call("python3 test_a.py", "<returncode>0</returncode>\nRan 3 tests\nOK") +
		"[assistant tool call book_reservation]\n{\"user_id\":\"mia\"}\n\n[tool tool result book_reservation]\nError: payment amount does not add up\n\n"
	require.Equal(t, []string{"KeyError: 'indexes'", "Error: payment amount does not add up"}, OpenErrors(transcript),
		"test_a.py passed later; run.py and the booking did not")

	filler := strings.Repeat(call("ls", "<returncode>0</returncode>\nREADME.md"), openErrorsTail/40)
	require.Equal(t, []string{"KeyError: 'indexes'", "Error: payment amount does not add up"}, OpenErrors(filler+transcript),
		"the end of a long transcript")
	require.Nil(t, OpenErrors("a tool result, not a transcript"))
}
