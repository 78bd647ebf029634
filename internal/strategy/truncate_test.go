package strategy

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestHeredocPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ cmd, want string }{
		{"cat > src/a.py <<'EOF'\nprint(1)\nEOF", "src/a.py"},
		{"cat >> log.txt << EOF\nx\nEOF", "log.txt"},
		{"cat <<'EOF' > /tmp/test_fix.py\nimport os\nEOF", "/tmp/test_fix.py"},
		{"cat <<-END >\"quoted.txt\"\nx\nEND", "quoted.txt"},
		{"cd repo && cat > 'b.go' <<EOF\npackage b\nEOF\ngo test ./...", "b.go"},
		{"tee -a notes.md <<EOF\nhi\nEOF", "notes.md"},
		{"tee out.txt <<EOF\nhi\nEOF", "out.txt"},
		{"cat a.py", ""},
		{"cat > a.py", ""},
		{"python - <<EOF\nprint(1)\nEOF", ""},
		{"grep -n '<<' file", ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, heredocPath(tt.cmd), "command %q", tt.cmd)
	}
}

func TestDescribeWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, input string
		ok                bool
		path, verb        string
	}{
		{"write_file", "write_file", `{"path":"a.go","content":"package a\n"}`, true, "a.go", "wrote"},
		{"Write", "Write", `{"file_path":"/r/b.ts","content":"x"}`, true, "/r/b.ts", "wrote"},
		{"Edit", "Edit", `{"file_path":"c.py","old_string":"a","new_string":"b"}`, true, "c.py", "edited"},
		{"MultiEdit", "MultiEdit", `{"file_path":"d.py","edits":[{"old_string":"a","new_string":"b"}]}`, true, "d.py", "edited"},
		{"str_replace_editor create", "str_replace_editor", `{"command":"create","path":"e.py","file_text":"x"}`, true, "e.py", "wrote"},
		{"str_replace_editor str_replace", "str_replace_editor", `{"command":"str_replace","path":"e.py","old_str":"a","new_str":"b"}`, true, "e.py", "edited"},
		{"str_replace_editor view is a read", "str_replace_editor", `{"command":"view","path":"e.py"}`, false, "", ""},
		{"apply_patch without path field", "apply_patch", `{"input":"*** Begin Patch\n*** Update File: f.go\n@@\n-a\n+b\n*** Add File: g.go\n+x\n*** End Patch"}`, true, "f.go, g.go", "patched"},
		{"apply_patch unified diff", "apply_patch", `{"patch":"--- a/h.go\n+++ b/h.go\n@@\n-a\n+b"}`, true, "h.go", "patched"},
		{"no path", "write_file", `{"content":"x"}`, false, "", ""},
		{"not JSON", "write_file", `not json`, false, "", ""},
		{"JSON but not an object", "write_file", `["a.go"]`, false, "", ""},
		{"already truncated", "write_file", `{"path":"a.go","truncated_input":"## Tool Call: write_file"}`, false, "", ""},
		{"bash heredoc", "bash", `{"command":"cat <<'EOF' > i.py\nx\nEOF"}`, true, "i.py", "wrote (heredoc)"},
		{"bash read", "bash", `{"command":"cat i.py"}`, false, "", ""},
		{"unknown tool", "read_file", `{"path":"a.go"}`, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, ok := describeWrite(tt.tool, tt.input, DefaultTruncateTools)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.path, w.path)
			require.Equal(t, tt.verb, w.verb)
		})
	}
}

func truncateConv(content string) conversation.Conversation {
	write := mustJSON(map[string]string{"path": "src/big.go", "content": content})
	heredoc := mustJSON(map[string]string{"command": "cat <<'EOF' > notes.md\n" + content + "EOF"})
	return conv(conversation.FormatAnthropic,
		userMsg("Write the files."),
		asstMsg("Writing.", use("w1", "write_file", write)),
		userResults(result("w1", "ok")),
		asstMsg("Again, fails.", use("w2", "write_file", write)),
		userResults(errResult("w2", "permission denied")),
		asstMsg("Heredoc.", use("w3", "bash", heredoc)),
		userResults(result("w3", "")),
		asstMsg("Small.", use("w4", "write_file", `{"path":"s.go","content":"x"}`)),
		userResults(result("w4", "ok")),
		asstMsg("Latest write.", use("w5", "write_file", write)),
		userResults(result("w5", "ok")),
		asstMsg("Pending.", use("w6", "write_file", write)),
	)
}

func TestTruncateInputs(t *testing.T) {
	t.Parallel()
	content := bigText(100)
	c := truncateConv(content)
	cc := charCounter{}
	mask := Protected(c, Protection{LastN: 2})

	out, stats, err := TruncateInputs(c, cc, TruncateOptions{MinTokens: 100, Protected: mask})
	require.NoError(t, err)
	require.Equal(t, 2, stats.Count, "w1 and w3; not the failed w2, the small w4, the protected w5 or the pending w6")
	require.Equal(t, convSize(c)-convSize(out), stats.TokensSaved)
	require.NoError(t, checkPairing(out))

	var in truncatedInput
	require.NoError(t, json.Unmarshal([]byte(out.Messages[1].Blocks[1].Input), &in))
	require.Equal(t, "src/big.go", in.Path)
	origTokens := cc.Count(c.Messages[1].Blocks[1].Input)
	require.Equal(t, "## Tool Call: write_file\n"+
		"**Original Size:** "+strconv.Itoa(origTokens)+" tokens\n"+
		"**Path:** src/big.go\n"+
		`**Summary:** write_file wrote src/big.go (100 lines, `+strconv.Itoa(cc.Count(content))+` chars of input); first line: "line 000: some output of the tool"`+"\n"+
		"**Status:** Content persisted to disk", in.Truncated)

	require.NoError(t, json.Unmarshal([]byte(out.Messages[5].Blocks[1].Input), &in))
	require.Equal(t, "notes.md", in.Path)
	require.Contains(t, in.Truncated, "bash wrote (heredoc) notes.md")

	for _, i := range []int{3, 7, 9, 11} {
		require.Equal(t, c.Messages[i], out.Messages[i], "message %d must be unchanged", i)
	}
	require.Equal(t, c.Messages[1].Blocks[0], out.Messages[1].Blocks[0], "the text of a call message stays")

	// Only the listed tools: with a list that leaves out write_file only
	// the heredoc remains.
	_, stats, err = TruncateInputs(c, cc, TruncateOptions{Tools: []string{"Edit"}, MinTokens: 100, Protected: mask})
	require.NoError(t, err)
	require.Equal(t, 1, stats.Count)

	// MinTokens above every input: nothing.
	_, stats, err = TruncateInputs(c, cc, TruncateOptions{MinTokens: 1 << 20})
	require.NoError(t, err)
	require.Zero(t, stats.Count)

	// An input that the reference would not shrink stays.
	_, stats, err = TruncateInputs(truncateConv("x\n"), cc, TruncateOptions{})
	require.NoError(t, err)
	require.Zero(t, stats.Count)

	_, _, err = TruncateInputs(c, cc, TruncateOptions{Protected: []bool{true}})
	require.ErrorContains(t, err, "1 entries for 12 messages")
	c.Format = conversation.FormatReAct
	_, _, err = TruncateInputs(c, cc, TruncateOptions{})
	require.ErrorIs(t, err, ErrUnsupportedFormat)
}
