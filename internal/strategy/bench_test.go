package strategy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/textcut"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// benchConversation loads the ~1 MB SWE-agent run with one 868K-character
// tool result; b.SetBytes uses the file size, so the results read in MB/s
// of wire JSON.
func benchConversation(b *testing.B) (conversation.Conversation, int) {
	b.Helper()
	path := filepath.Join(dataDir, "swe-agent-gemini", "psf__requests-1142.json")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("test data %s: %v", path, err)
	}
	c, err := conversation.Parse(data, conversation.FormatOpenAI)
	require.NoError(b, err)
	return c, len(data)
}

func benchCounters(b *testing.B) []tokens.Counter {
	var out []tokens.Counter
	for _, name := range []string{"chars", "o200k_base"} {
		c, err := tokens.New(name)
		require.NoError(b, err)
		out = append(out, c)
	}
	return out
}

func BenchmarkOffload(b *testing.B) {
	c, n := benchConversation(b)
	for _, count := range benchCounters(b) {
		b.Run(count.Name(), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				mask := Protected(c, Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers})
				cands := PlanOffload(c, count, 1000, mask)
				placed := make([]Placed, len(cands))
				for i, cand := range cands {
					placed[i] = Placed{OffloadCandidate: cand, Key: fmt.Sprintf("t/offload/%d", i),
						Preview: Preview(c.Messages[cand.Msg].Blocks[cand.Block].Text)}
				}
				if _, err := ApplyOffload(c, placed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTruncateInputs(b *testing.B) {
	c, n := benchConversation(b)
	for _, count := range benchCounters(b) {
		b.Run(count.Name(), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, _, err := TruncateInputs(c, count, TruncateOptions{MinTokens: 100}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPruneAtWatermark(b *testing.B) {
	c, n := benchConversation(b)
	pairs := c.ToolIndex().Pairs
	mid := pairs[len(pairs)/2].Use
	wm := c.Messages[mid.Msg].Blocks[mid.Block].ToolID
	b.SetBytes(int64(n))
	for b.Loop() {
		if _, _, err := PruneAtWatermark(c, wm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPostProcessResults(b *testing.B) {
	c, n := benchConversation(b)
	for _, count := range benchCounters(b) {
		b.Run(count.Name(), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, _, err := PostProcessResults(c, count, textcut.DefaultPostRules(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
