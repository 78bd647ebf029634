package drift

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
)

// TestUnescape: JSON and shell escapes are undone, nested ones too; other
// backslashes stay.
func TestUnescape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`plain text`, `plain text`},
		{`grep -n \"def _check_\" f.py`, `grep -n "def _check_" f.py`},
		{`cat > x.py << 'EOF'\nimport os\n\tpass`, "cat > x.py << 'EOF'\nimport os\n\tpass"},
		{`print(\\"nested\\")\\n`, "print(\"nested\")\n"},
		{`it\'s a\/b`, `it's a/b`},
		{"ls \\\n  -la", "ls    -la"},
		{`C:\Users\x`, `C:\Users\x`},
		{`trailing\`, `trailing\`},
		{`re: \d+\s`, `re: \d+\s`},
	} {
		require.Equal(t, tc.want, Unescape(tc.in), "%q", tc.in)
	}
}

// TestComparable: the same text escaped, quoted or heredoc-marked another
// way, re-spaced or re-cased compares equal; the product's own figures
// and ids are gone.
func TestComparable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, a, b string }{
		{"JSON escapes", `{"command":"grep -n \"def _check_\" ./f.py"}`, `{command:'grep -n "def _check_" ./f.py'}`},
		{"heredoc markers", `cat > x.py << 'EOF'\nprint(1)\nEOF`, "cat > x.py <<EOF\nprint(1)\nEOF"},
		{"heredoc with dash", "cat > x.py <<-\"END\"", "cat > x.py"},
		{"line continuation", "python run.py \\\n  --fast", "python run.py --fast"},
		{"case and space", "Never  touch\tthe TESTS", "never touch the tests"},
		{"curly quotes", "“fix it” now", `"fix it" now`},
		{"reference block", "## Tool Call: bash\n**Original Size:** 879 tokens\n**Path:** x.py\n**Summary:** bash wrote (heredoc) x.py (93 lines, 2688 chars of input)",
			"x.py bash wrote (heredoc) x.py"},
		{"recovery id", "[Recover the original result with the recover_context tool, id: " + strings.Repeat("ab", 32) + ".m132b1]", ""},
		{"summary pointer", "Recover the summarized messages 0–61 with the recover_context tool, id: " + strings.Repeat("0f", 32) + ".m0-61", ""},
		{"session log label", `<session-log block="3">Done.</session-log>`, "done."},
		{"omission marker and notes", "[… 37 lines omitted …]\n- (3 more paths)\n- (40 earlier commands: grep ×12, sed ×9, …)\n| (2 more paths) | | |", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, Comparable(tc.b), Comparable(tc.a))
		})
	}
}

// TestRequired: the product's own figures and ids, and fragments of
// escaped text, are not identifiers a summary must keep; the source's own
// are, compared as a summary writes them.
func TestRequired(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("c3", 32) + ".m132b1"
	source := "[assistant tool call bash]\n" + `{"command":"cd /testbed && cat > test_issue.py << 'EOF'\nwith open(p) as f:\n    print(\"ok\")\nEOF\npython test_issue.py"}` +
		"\n\n[tool tool result bash]\n## Tool Call: bash\n**Original Size:** 879 tokens\n**Path:** django/db/models/fields/__init__.py\n" +
		"[Recover the original result with the recover_context tool, id: " + id + "]\n\n[user]\nThe flight HAT136 on 2024-05-20, card credit_card_4421486."
	ids := Identifiers(source)
	required := Required(ids, Comparable(source))
	var values []string
	for _, r := range required {
		values = append(values, r.Value)
	}
	for _, own := range []string{"879 tokens", id} {
		require.NotContains(t, values, own, "the product's own %q", own)
	}
	for _, v := range values {
		require.NotEqual(t, `f:\n`, v, "a fragment of an escaped line")
	}
	for _, want := range []string{"django/db/models/fields/__init__.py", "HAT136", "2024-05-20", "credit_card_4421486"} {
		require.Contains(t, values, want)
	}

	summary := "- cd /testbed && cat > test_issue.py << 'EOF' → exit 0\n- django/db/models/fields/__init__.py: read\nHAT136 2024-05-20 credit_card_4421486"
	require.Empty(t, MissingComparable(required, summary), "the summary keeps each as it writes it")
	missing := MissingComparable(required, "- django/db/models/fields/__init__.py: read")
	require.NotEmpty(t, missing)
	require.Contains(t, missing, Identifier{Kind: KindID, Value: "HAT136"})
}

// TestComparableHoldsFewCopies: normalising a source of megabytes
// allocates a few copies of it, once per check.
func TestComparableHoldsFewCopies(t *testing.T) {
	var sb strings.Builder
	for i := 0; sb.Len() < 4<<20; i++ {
		fmt.Fprintf(&sb, "[tool result]\n  File \"Django/DB/%d.py\", line %d\\n\\tin Test_Case\n\n", i, i%300)
	}
	src := sb.String()
	alloc := memtest.Allocated(func() { _ = Comparable(src) })
	require.Less(t, alloc, uint64(len(src))*5/2, "normalising %d bytes allocated %d", len(src), alloc)
}
