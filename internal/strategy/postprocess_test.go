package strategy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// numberedFile is a numbered listing of a long Python file (editor view
// style; textcut reads cat -n's tab-separated form as a table).
func numberedFile(lines int) string {
	var sb strings.Builder
	for i := 1; i <= lines; i++ {
		if i%50 == 0 {
			fmt.Fprintf(&sb, "%6d  def handler_%d(request):\n", i, i)
		} else {
			fmt.Fprintf(&sb, "%6d      value = compute(%d)  # body line\n", i, i)
		}
	}
	return sb.String()
}

func TestPostProcessResults(t *testing.T) {
	t.Parallel()
	file := numberedFile(800)
	traceback := "Traceback (most recent call last):\n" + strings.Repeat("  File \"x.py\", line 1, in f\n", 200) + "ValueError: bad"
	c := conv(conversation.FormatOpenAI,
		sysMsg("sys"),
		userMsg("task"),
		asstMsg("Read it.", use("c1", "read_file", `{"path":"big.py"}`)),
		toolMsg("c1", file),
		asstMsg("Run it.", use("c2", "bash", `{"command":"python x.py"}`)),
		toolMsg("c2", traceback),
		asstMsg("Small.", use("c3", "bash", `{"command":"ls"}`)),
		toolMsg("c3", "a.py b.py"),
		asstMsg("Offloaded.", use("c4", "read_file", `{"path":"o.py"}`)),
		toolMsg("c4", Reference(OffloadRef{Key: "k", ToolName: "read_file", Preview: "x"})),
		asstMsg("Again.", use("c5", "read_file", `{"path":"big.py"}`)),
		toolMsg("c5", file),
	)
	mask := Protected(c, Protection{System: true, LastN: 1})
	out, stats, err := PostProcessResults(c, charCounter{}, textcut.DefaultPostRules(), mask)
	require.NoError(t, err)
	require.Equal(t, 1, stats.Changed, "only the unprotected long file read")
	require.Equal(t, map[string]int{textcut.PostFile: 1, textcut.PostKeptError: 1, textcut.PostKeptSmall: 1}, stats.ByKind)
	require.Equal(t, charCounter{}.Count(file)-charCounter{}.Count(out.Messages[3].Blocks[0].Text), stats.TokensSaved)
	require.Positive(t, stats.TokensSaved)
	require.Contains(t, out.Messages[3].Blocks[0].Text, "def handler_400(request):", "definition lines survive")
	require.Equal(t, c.Messages[5], out.Messages[5], "errors are always kept")
	require.Equal(t, c.Messages[9], out.Messages[9], "references are left alone")
	require.Equal(t, c.Messages[11], out.Messages[11], "protected")
	require.NoError(t, checkPairing(out))

	// Debug verbosity keeps everything (auto-summarize).
	rules := textcut.DefaultPostRules()
	rules.Debug = true
	out, stats, err = PostProcessResults(c, nil, rules, nil)
	require.NoError(t, err)
	require.Zero(t, stats.Changed)
	require.Equal(t, c, out)

	_, _, err = PostProcessResults(c, nil, rules, []bool{true})
	require.ErrorContains(t, err, "1 entries for 12 messages")
}
