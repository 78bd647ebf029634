package strategy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func bigText(lines int) string {
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, "line %03d: some output of the tool\n", i)
	}
	return sb.String()
}

func offloadConv() conversation.Conversation {
	return conv(conversation.FormatOpenAI,
		sysMsg("sys"),
		userMsg("Task."),
		asstMsg("Read two files.", use("c1", "read_file", `{"path":"a"}`), use("c2", "read_file", `{"path":"b"}`)),
		toolMsg("c1", bigText(200)),
		conversation.Message{Role: conversation.RoleTool, Blocks: []conversation.Block{errResult("c2", bigText(200))}},
		asstMsg("Small one.", use("c3", "bash", `{"command":"ls"}`)),
		toolMsg("c3", "a b"),
		asstMsg("Search.", use("c4", "grep", `{"q":"x"}`)),
		toolMsg("c4", bigText(150)),
	)
}

func TestPlanOffload(t *testing.T) {
	t.Parallel()
	c := offloadConv()
	cc := charCounter{}

	got := PlanOffload(c, cc, 1000, nil)
	require.Equal(t, []OffloadCandidate{
		{Msg: 3, Block: 0, ToolID: "c1", ToolName: "read_file", Tokens: cc.Count(bigText(200))},
		{Msg: 8, Block: 0, ToolID: "c4", ToolName: "grep", Tokens: cc.Count(bigText(150))},
	}, got, "errors and small results stay")

	withErrors := PlanOffloadWith(c, cc, OffloadOptions{MinTokens: 1000, IncludeErrors: true})
	require.Len(t, withErrors, 3)
	require.Equal(t, "c2", withErrors[1].ToolID)

	// Protecting the last message protects nothing else (c4's call is in
	// message 7, which is then protected too).
	mask := Protected(c, Protection{LastN: 1})
	require.Equal(t, []OffloadCandidate{got[0]}, PlanOffload(c, cc, 1000, mask))

	// Strictly above the threshold.
	require.Len(t, PlanOffload(c, cc, cc.Count(bigText(150)), nil), 1)

	// A result too small for its reference to save anything is not offered,
	// whatever the threshold.
	small := conv(conversation.FormatOpenAI, asstMsg("", use("s", "bash", "{}")), toolMsg("s", "short output"))
	require.Empty(t, PlanOffload(small, cc, 0, nil))
}

func TestReferenceFormat(t *testing.T) {
	t.Parallel()
	ref := Reference(OffloadRef{Key: "t1/offload/abc.txt", ToolName: "read_file", TokensSaved: 15234, Preview: "first line\nsecond line"})
	require.Equal(t, `## Offloaded: read_file Result
**Id:** abc.txt
**Tokens Saved:** 15234
**Preview:**
> first line
> second line

*Recover the full content with the recover_context tool, id: abc.txt*
Tool result is at: abc.txt`, ref)
	id, ok := ParseReference(ref)
	require.True(t, ok)
	require.Equal(t, "abc.txt", id, "the offload's id")
	require.NotContains(t, ref, "t1/offload", "no storage key reaches the agent")

	require.True(t, strings.HasPrefix(Reference(OffloadRef{Key: "k"}), "## Offloaded: tool Result\n"))
}

func TestPreview(t *testing.T) {
	t.Parallel()
	long := bigText(30)
	p := Preview(long)
	require.Equal(t, PreviewMaxLines-1, strings.Count(p, "\n"), "ten lines")
	require.True(t, strings.HasPrefix(long, p))

	wide := strings.Repeat("é", 700)
	require.Equal(t, strings.Repeat("é", PreviewMaxChars), Preview(wide), "cut on characters, not bytes")
	require.Equal(t, Preview(wide), Preview(Preview(wide)))
	require.Equal(t, "a\nb", PreviewN("a\nb\nc", 2, 0))
	require.Equal(t, "ab", PreviewN("abc\nd", 0, 2))
	require.Equal(t, "", Preview(""))
}

// TestPreviewKeepsTheLastErrors: a result whose errors come after its
// first lines (a traceback, a test run's summary) shows its last error
// lines under the marker; one without errors past them is its first
// lines alone; a preview of a preview is the same preview.
func TestPreviewKeepsTheLastErrors(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "test_%d ... ok\n", i)
	}
	b.WriteString("ERROR: test_digest (tests.AuthTests)\nTraceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'realm'\n")
	b.WriteString("ERROR: test_digest (tests.AuthTests)\nFAILED (errors=2)\n")
	p := Preview(b.String())
	head, tail, ok := strings.Cut(p, "\n"+ErrorTailMarker+"\n")
	require.True(t, ok, p)
	require.Equal(t, PreviewMaxLines-1, strings.Count(head, "\n"), "the first ten lines, as before")
	require.Equal(t, "KeyError: 'realm'\nERROR: test_digest (tests.AuthTests)\nFAILED (errors=2)", tail,
		"the last distinct error lines (up to five), each at its last place, oldest first")
	require.Equal(t, p, Preview(p), "a preview of a preview")
	require.Equal(t, p, PreviewN(p, 0, 0))

	clean := bigText(30)
	require.NotContains(t, Preview(clean), ErrorTailMarker)
	early := "FAILED (errors=1)\n" + bigText(30)
	require.NotContains(t, Preview(early), ErrorTailMarker, "an error the first lines show is not repeated")

	ref := Reference(OffloadRef{Key: "k/abc", ToolName: "bash", TokensSaved: 900, Preview: p})
	require.Contains(t, ref, "> FAILED (errors=2)\n")
	id, ok := ParseReference(ref)
	require.True(t, ok)
	require.Equal(t, "abc", id)
}

func TestParseReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, key string
		ok              bool
	}{
		{"offload-compact bare pointer", "Tool result is at: offloaded/123.txt", "offloaded/123.txt", true},
		{"trailing newline", "Tool result is at: k1\n", "k1", true},
		{"the three-tier design block", Reference(OffloadRef{Key: "k2", Preview: "x"}), "k2", true},
		{"a file that quotes the pointer is not a reference", "some code\nTool result is at: k3", "", false},
		{"pointer not on the last line", "## Offloaded: x Result\nTool result is at: k4\nmore", "", false},
		{"empty key", "Tool result is at: ", "", false},
		{"plain text", "hello", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, ok := ParseReference(tt.text)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.key, key)
		})
	}
}

func TestApplyOffloadAndRestore(t *testing.T) {
	t.Parallel()
	c := offloadConv()
	cands := PlanOffload(c, charCounter{}, 1000, nil)
	placed := []Placed{
		{OffloadCandidate: cands[0], Key: "k/c1", Preview: Preview(c.Messages[3].Blocks[0].Text)},
		{OffloadCandidate: cands[1], Key: "k/c4", Preview: Preview(c.Messages[8].Blocks[0].Text)},
	}
	out, err := ApplyOffload(c, placed)
	require.NoError(t, err)
	require.NotEqual(t, c, out)
	require.Equal(t, bigText(200), c.Messages[3].Blocks[0].Text, "input unchanged")
	got := out.Messages[3].Blocks[0]
	require.Equal(t, "c1", got.ToolID)
	require.Contains(t, got.Text, "**Tokens Saved:** "+fmt.Sprint(cands[0].Tokens))
	require.Contains(t, got.Text, "> line 009: some output of the tool\n\n*Recover the full content with the recover_context tool, id: c1")
	require.NotContains(t, got.Text, "line 010")
	require.NoError(t, checkPairing(out))

	// Restore: one key readable, one not; a protected message keeps its
	// reference (offload-compact: kept messages keep their references).
	store := map[string]string{"c1": bigText(200)} // references name ids
	fetch := func(key string) (string, error) {
		if s, ok := store[key]; ok {
			return s, nil
		}
		return "", errors.New("no such key")
	}
	restored, stats, err := Restore(out, fetch, nil)
	require.NoError(t, err)
	require.Equal(t, RestoreStats{Restored: []string{"c1"}, Unavailable: []string{"c4"}}, stats)
	require.Equal(t, bigText(200), restored.Messages[3].Blocks[0].Text)
	require.Equal(t, "[Content unavailable: c4]", restored.Messages[8].Blocks[0].Text)

	mask := Protected(out, Protection{LastN: 1})
	restored, stats, err = Restore(out, fetch, mask)
	require.NoError(t, err)
	require.Equal(t, RestoreStats{Restored: []string{"c1"}}, stats)
	require.Equal(t, out.Messages[8], restored.Messages[8])

	_, _, err = Restore(out, nil, nil)
	require.ErrorContains(t, err, "fetch is nil")
	_, _, err = Restore(out, fetch, []bool{true})
	require.ErrorContains(t, err, "1 entries for 9 messages")
}

func TestApplyOffloadErrors(t *testing.T) {
	t.Parallel()
	c := offloadConv()
	good := Placed{OffloadCandidate: OffloadCandidate{Msg: 3, Block: 0, ToolID: "c1", ToolName: "read_file", Tokens: 10}, Key: "k"}
	with := func(f func(p *Placed)) []Placed {
		p := good
		f(&p)
		return []Placed{p}
	}
	tests := []struct {
		name   string
		placed []Placed
		want   string
	}{
		{"message out of range", with(func(p *Placed) { p.Msg = 99 }), "message 99 out of range"},
		{"negative block", with(func(p *Placed) { p.Block = -1 }), "block -1 out of range"},
		{"not a tool result", with(func(p *Placed) { p.Msg = 2 }), "is text, not tool_result"},
		{"stale plan", with(func(p *Placed) { p.ToolID = "c9" }), `answers call "c1", plan says "c9"`},
		{"empty key", with(func(p *Placed) { p.Key = "" }), "storage key is empty"},
		{"multi-line key", with(func(p *Placed) { p.Key = "a\nTool result is at: b" }), "spans lines"},
		{"padded key", with(func(p *Placed) { p.Key = " k" }), "surrounding spaces"},
		{"huge key", with(func(p *Placed) { p.Key = strings.Repeat("k", MaxKeyLen+1) }), "limit 1024"},
		{"twice", []Placed{good, good}, "placed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ApplyOffload(c, tt.placed)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// FuzzReference checks that every reference written with a valid key reads
// back to that key, whatever the tool name and preview hold.
func FuzzReference(f *testing.F) {
	f.Add("tenants/t/offload/abc", "bash", "line 1\nTool result is at: evil", 10)
	f.Add("k", "", "", 0)
	f.Fuzz(func(t *testing.T, key, tool, preview string, saved int) {
		if checkKey(key) != nil || strings.ContainsAny(tool, "\r\n") {
			t.Skip()
		}
		got, ok := ParseReference(Reference(OffloadRef{Key: key, ToolName: tool, TokensSaved: saved, Preview: Preview(preview)}))
		require.True(t, ok)
		require.Equal(t, referenceID(key), got, "a reference names the key's id, never the key")
	})
}
