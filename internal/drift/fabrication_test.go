package drift_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// TestFabricationCheck: an extractive summary of a real result invents
// nothing; a summary that quotes the user with words never written, or
// names a path, URL or id the source lacks, fails and lists each; the
// service's own keys and re-wrapped quotes pass.
func TestFabricationCheck(t *testing.T) {
	t.Parallel()
	source := convtest.LargestResult(t, "swe-agent-gemini/django__django-15629.json")
	source = "[user]\nPlease fix the \"db_collation\" handling, and never touch the tests.\n\n[tool tool result bash]\n" + source
	honest := textcut.KeepLines(source, len(source)/10)
	const key = "tenants/acme/archive/ab/abababababababababababababababababababababababababababababababab"

	cases := []struct {
		name    string
		summary string
		passed  bool
		missing []string
	}{
		{"extractive summary of the source", honest, true, nil},
		{"a quote of the user, re-spaced and re-cased", "The user said \"Never  touch the   tests\" twice.", true, nil},
		{"a quote of the user, on one line", "The user said: \"never touch the tests.\"", true, nil},
		{"an invented instruction", honest + "\nThe user asked: \"please rewrite the whole project in Rust and delete the tests\".", false,
			[]string{"fabricated quote: please rewrite the whole project in Rust and delete the tests"}},
		{"an invented path", honest + "\nEdited /src/orchestrator/rust_port/main.rs to finish.", false,
			[]string{"fabricated path: /src/orchestrator/rust_port/main.rs"}},
		{"an invented URL", "See https://example.invalid/totally-new-page for details.", false, []string{"fabricated url: https://example.invalid/totally-new-page"}},
		{"the service's own archive key", honest + "\n- Full conversation: " + key, true, nil},
		{"short quotes are words, not quotations", `The "fix" was "done".`, true, nil},
		{"a command copied from an escaped tool input", `- ran: grep -rn \"never touch the tests\" .`, true, nil},
		{"the summary's own clip and arrow inside a quote", `- {"Please fix the db_collation handling… → {"`, true, nil},
		{"an invented piece beside the summary's arrow", `- {"Please fix the db_collation handling → and ship it to production today"}`, false,
			[]string{"fabricated quote: Please fix the db_collation handling → and ship it to production today"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := drift.FabricationCheck(source, tc.summary)
			require.Equal(t, drift.CheckFabrication, c.Name)
			require.Equal(t, tc.passed, c.Passed, "missing: %v", c.Missing)
			if tc.passed {
				require.Empty(t, c.Missing)
				require.Equal(t, 1.0, c.Score)
				return
			}
			require.Less(t, c.Score, 1.0)
			for _, want := range tc.missing {
				found := false
				for _, m := range c.Missing {
					found = found || strings.HasPrefix(m, want)
				}
				require.True(t, found, "want %q in %v", want, c.Missing)
			}
		})
	}
}
