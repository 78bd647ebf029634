package strategy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// dataDir holds the real agent conversations, copied into the repository
// (testdata/conversations/README.md gives their provenance and licence).
const dataDir = "../../testdata/conversations"

// readData reads path, a file under dataDir. A missing file fails the test:
// the data is part of the repository.
func readData(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("test data %s: %v", path, err)
	}
	return data
}

// realConversations loads the SWE-agent runs and the first tau-bench
// trajectories of dataDir; missing data fails the test.
func realConversations(t testing.TB) map[string]conversation.Conversation {
	t.Helper()
	out := map[string]conversation.Conversation{}
	for _, dir := range []string{"swe-agent-deepseek", "swe-agent-gemini"} {
		files, err := filepath.Glob(filepath.Join(dataDir, dir, "*.json"))
		require.NoError(t, err)
		if len(files) == 0 {
			t.Fatalf("test data %s: no conversations", filepath.Join(dataDir, dir))
		}
		for _, f := range files {
			c, err := conversation.Parse(readData(t, f), conversation.FormatOpenAI)
			require.NoError(t, err, f)
			out[dir+"/"+filepath.Base(f)] = c
		}
	}
	data := readData(t, filepath.Join(dataDir, "tau-bench", "gpt-4o-airline.json"))
	var runs []struct {
		Traj json.RawMessage `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(data, &runs))
	for i, r := range runs[:min(len(runs), 40)] {
		c, err := conversation.Parse(r.Traj, conversation.FormatOpenAI)
		require.NoError(t, err, "tau-bench %d", i)
		out[fmt.Sprintf("tau-bench/%03d", i)] = c
	}
	return out
}

// convTokens sums the sizes of everything a model reads.
func convTokens(count tokens.Counter, c conversation.Conversation) int {
	n := 0
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			n += count.Count(b.Text) + count.Count(b.Input) + count.Count(b.ToolName)
		}
	}
	return n
}

// checkRenders asserts that a strategy's output is still a valid
// conversation of its format: it renders, parses back and keeps pairing.
func checkRenders(t *testing.T, c conversation.Conversation) {
	t.Helper()
	require.NoError(t, conversation.CheckPairing(c))
	data, err := conversation.Render(c)
	require.NoError(t, err)
	back, err := conversation.Parse(data, c.Format)
	require.NoError(t, err)
	require.NoError(t, conversation.CheckPairing(back))
	// Anthropic outputs merge same-role neighbours (roles alternate).
	require.Len(t, back.Messages, len(c.MergeSameRole().Messages))
}

// TestRealConversations runs every strategy over real agent runs and checks
// the invariants plus the wire format: outputs render, parse back and pair.
func TestRealConversations(t *testing.T) {
	t.Parallel()
	convs := realConversations(t)
	// Offload plans in o200k tokens, as production does; the size checks
	// use characters, which is much cheaper on megabytes of text and makes
	// the same point.
	o200k, err := tokens.New("o200k_base")
	require.NoError(t, err)
	count, err := tokens.New("chars")
	require.NoError(t, err)
	var truncated, offloaded, pruned, compacted int
	for name, in := range convs {
		before := in.Clone()
		require.NoError(t, conversation.CheckPairing(in), name)
		mask := Protected(in, Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers})
		inTokens := convTokens(count, in)

		// Watermark at the middle tool call.
		pairs := in.ToolIndex().Pairs
		if len(pairs) > 2 {
			mid := pairs[len(pairs)/2]
			wm := in.Messages[mid.Use.Msg].Blocks[mid.Use.Block].ToolID
			out, stats, err := PruneAtWatermarkWith(in, wm, WatermarkOptions{Protected: mask})
			require.NoError(t, err, name)
			require.True(t, stats.Found, name)
			checkRenders(t, out)
			require.NoError(t, checkProtectedKept(in, out, mask), name)
			require.Less(t, convTokens(count, out), inTokens, name)
			pruned++
		}

		// Offload results above 1,000 tokens, then restore them.
		cands := PlanOffload(in, o200k, 1000, mask)
		store := map[string]string{}
		var placed []Placed
		for _, cand := range cands {
			text := in.Messages[cand.Msg].Blocks[cand.Block].Text
			key := fmt.Sprintf("tenants/t/offload/%s-%d", strings.ReplaceAll(name, "/", "_"), cand.Msg)
			store[referenceID(key)] = text // a reference names the id
			placed = append(placed, Placed{OffloadCandidate: cand, Key: key, Preview: Preview(text)})
		}
		out, err := ApplyOffload(in, placed)
		require.NoError(t, err, name)
		checkRenders(t, out)
		require.NoError(t, checkProtectedSameIndex(in, out, mask), name)
		require.LessOrEqual(t, convTokens(count, out), inTokens, name)
		offloaded += len(placed)
		restored, rs, err := Restore(out, func(k string) (string, error) { return store[k], nil }, nil)
		require.NoError(t, err)
		require.Len(t, rs.Restored, len(placed))
		require.Equal(t, convTokens(count, in), convTokens(count, restored), name)

		// Truncate persisted heredoc writes.
		out, ts, err := TruncateInputs(in, count, TruncateOptions{MinTokens: 100, Protected: mask})
		require.NoError(t, err, name)
		checkRenders(t, out)
		require.NoError(t, checkProtectedSameIndex(in, out, mask), name)
		require.Equal(t, inTokens-ts.TokensSaved, convTokens(count, out), name)
		truncated += ts.Count

		// Compact all but the last 5 with a summary far shorter than the
		// history it replaces.
		split := SplitPoint(in, 5, mask)
		out, cs, err := Compact(in, split, "## Technical Context\nsummary of the history", StyleCompressedHistory, mask)
		require.NoError(t, err, name)
		checkRenders(t, out)
		require.NoError(t, checkProtectedKept(in, out, mask), name)
		if cs.Summarized > 0 {
			compacted++
			require.Less(t, convTokens(count, out), inTokens, name)
		}

		propPostProcess(t, in, mask)
		require.Equal(t, before, in, "%s: a strategy changed its input", name)
	}
	t.Logf("%d conversations: %d pruned, %d results offloaded, %d inputs truncated, %d compacted",
		len(convs), pruned, offloaded, truncated, compacted)
	require.Positive(t, pruned)
	require.Positive(t, offloaded)
	require.Positive(t, truncated, "the SWE-agent runs write files with heredocs")
	require.Positive(t, compacted)
}
