package probe

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// realChat is the repository's real SWE-agent slice (provenance in
// testdata/conversations/README.md).
func realChat(t *testing.T) conversation.Conversation {
	t.Helper()
	return convtest.Load(t, "django__django-11742.json")
}

func TestDerive(t *testing.T) {
	t.Parallel()
	c := realChat(t)
	s := Derive(c, policy.DefaultPinMarkers())
	first := ""
	for _, m := range c.Messages {
		if m.Role == conversation.RoleUser {
			first = m.Blocks[0].Text
			break
		}
	}
	require.Equal(t, first, s.Task)
	require.NotEmpty(t, s.Artifacts)
	require.Len(t, s.Commands, Recent)
	require.LessOrEqual(t, len(s.Errors), Recent)
	require.NotEmpty(t, s.Plan)
	require.NotEmpty(t, s.Current)
	for _, p := range s.Artifacts {
		require.NotContains(t, p, `\`, "no escaped-JSON fragments in %q", p)
	}
	// Deterministic.
	require.Equal(t, s, Derive(c, policy.DefaultPinMarkers()))
}

func TestCommand(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"command":"cd /repo && grep -n \"foo\" x.py"}`, `cd /repo && grep -n "foo" x.py`},
		{`{"command":"view","path":"/repo/a.py"}`, "view /repo/a.py"},
		{`{"cmd":"ls -la\nmore"}`, "ls -la"},
		{`not json at all`, "not json at all"},
		{`{"other":1}`, ""},
		{``, ""},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, Command(tc.in), tc.in)
	}
}

// TestMeasure: the original keeps every probe; a copy without the middle
// loses the probes only the middle held, unless the recovery tool gives
// them back for an id the output names.
func TestMeasure(t *testing.T) {
	t.Parallel()
	c := realChat(t)
	set := Derive(c, policy.DefaultPinMarkers())

	all := Measure(set, c, nil)
	require.True(t, all.TaskVerbatim)
	require.Empty(t, all.Lost)
	require.Equal(t, all.Artifacts.Total, all.Artifacts.Kept)
	require.Equal(t, 1.0, all.Commands.KeptShare())

	// Keep the system prompt and the last two messages only.
	cut := c.Clone()
	middle := cut.Messages[1 : len(cut.Messages)-2]
	var removed strings.Builder
	for _, m := range middle {
		for _, b := range m.Blocks {
			removed.WriteString(b.Text + "\n" + b.Input + "\n" + Command(b.Input) + "\n")
		}
	}
	cut.Messages = append(cut.Messages[:1:1], cut.Messages[len(cut.Messages)-2:]...)
	lost := Measure(set, cut, nil)
	require.False(t, lost.TaskVerbatim)
	require.NotEmpty(t, lost.Lost)
	require.Contains(t, lost.Lost[0], "task: ")
	require.Less(t, lost.Artifacts.KeptShare(), 1.0)

	// A pointer in the output brings the middle back.
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cut.Messages = append(cut.Messages, conversation.Message{Role: conversation.RoleUser,
		Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "recover_context id: " + id}}})
	back := Measure(set, cut, func(got string) (string, error) {
		if got != id {
			return "", errors.New("unknown id")
		}
		return removed.String(), nil
	})
	require.Equal(t, 1, back.IDs)
	require.Equal(t, back.Artifacts.Total, back.Artifacts.Kept+back.Artifacts.Recovered)
	require.Positive(t, back.Artifacts.Recovered)
	require.Less(t, back.LostCount(), lost.LostCount())
}

func TestSharedPrefix(t *testing.T) {
	t.Parallel()
	c := realChat(t)
	counter, err := tokens.New(tokens.O200kBase)
	require.NoError(t, err)
	size := func(m conversation.Message) int { return tokens.Message(counter, m) }
	n, units := SharedPrefix(c, c, size)
	require.Equal(t, len(c.Messages), n)
	require.Equal(t, tokens.Conversation(counter, c)-tokens.ReplyPrimingTokens, units)

	changed := c.Clone()
	changed.Messages[2].Blocks[0].Text += " changed"
	n, _ = SharedPrefix(c, changed, size)
	require.Equal(t, 2, n)
}

func TestRegion(t *testing.T) {
	t.Parallel()
	c := realChat(t)
	size := func(m conversation.Message) int { return len(m.Blocks) }
	before, after := Region(c, c, size)
	require.Zero(t, before)
	require.Zero(t, after)

	out := c.Clone()
	summary := conversation.Message{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "summary"}}}
	out.Messages = append(append(out.Messages[:2:2], summary), out.Messages[len(out.Messages)-3:]...)
	before, after = Region(c, out, size)
	removed := 0
	for _, m := range c.Messages[2 : len(c.Messages)-3] {
		removed += size(m)
	}
	require.Equal(t, removed, before)
	require.Equal(t, 1, after)
}

func TestErrorLines(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"Traceback (most recent call last):",
		`  File "x.py", line 3, in <module>`,
		"django.core.exceptions.FieldError: Cannot resolve keyword 'x'",
		"    # For lookups spanning over relationships, show the error",
		"FAILED (failures=1, errors=1)",
		"ERROR: test_exact_lookup (tests.TestLookup)",
		"E       AssertionError: 1 != 2",
		"error: pathspec 'x' did not match",
		"no errors here, all fine",
		"ValueError",
	}, "\n")
	require.Equal(t, []string{
		"django.core.exceptions.FieldError: Cannot resolve keyword 'x'",
		"FAILED (failures=1, errors=1)",
		"ERROR: test_exact_lookup (tests.TestLookup)",
		"E       AssertionError: 1 != 2",
		"error: pathspec 'x' did not match",
		"ValueError",
	}, ErrorLines(text))
}

func TestCallPaths(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{`{"command":"cd /testbed && cat > fix.py << 'EOF'\nopen('test.db')\nEOF\npython fix.py && sed -n 1,5p django/db/x.py"}`,
			[]string{"/testbed", "fix.py", "django/db/x.py"}},
		{`{"command":"str_replace","path":"/repo/a.py","old_str":"see b/c.py","new_str":"x"}`, []string{"/repo/a.py"}},
		{`{"file_path":"src/main.go","content":"import other/pkg.go"}`, []string{"src/main.go"}},
		{`cat notes/todo.md`, []string{"notes/todo.md"}},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, CallPaths(tc.in), tc.in)
	}
}
