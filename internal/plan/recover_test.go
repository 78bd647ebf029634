package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

const testArchive = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// idsIn finds the archive ids a text names.
var idsIn = regexp.MustCompile(testArchive + `\.m[0-9]+(?:-[0-9]+|b[0-9]+)`)

// listing is a numbered file listing of n lines, which post-processing
// reduces to a summary with line ranges.
func listing(n int) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, "%6d\tfunc f%d() { return %d } // line of the file\n", i, i, i*7)
	}
	return sb.String()
}

// TestCutsNameTheirOriginal: a result post-processing reduces, an input
// tier 2 truncates and a result the ladder cuts each name the id of their
// original, and that id gives the original back verbatim.
func TestCutsNameTheirOriginal(t *testing.T) {
	t.Parallel()
	orig := overflowing(t, "../../testdata/conversations/django__django-11742.json", listing(700))
	// check parses every id of the given blocks of out and asserts that it
	// gives back the original of that very block; it counts them.
	check := func(t *testing.T, out conversation.Conversation, kind conversation.Kind) int {
		t.Helper()
		named := 0
		for i, m := range out.Messages {
			for j, b := range m.Blocks {
				if b.Kind != kind {
					continue
				}
				text := b.Text
				if kind == conversation.KindToolUse {
					text = b.Input
				}
				for _, raw := range idsIn.FindAllString(text, -1) {
					id, err := recoverid.Parse(raw)
					require.NoError(t, err)
					require.True(t, id.IsBlock(), raw)
					got, err := recoverid.Text(orig, id)
					require.NoError(t, err)
					ob := orig.Messages[id.From].Blocks[id.Block]
					require.Equal(t, ob.Kind, kind)
					require.Equal(t, ob.ToolID, b.ToolID, "message %d block %d names its own original", i, j)
					if kind == conversation.KindToolUse {
						require.Equal(t, ob.Input, got)
					} else {
						require.Equal(t, ob.Text, got)
					}
					named++
				}
			}
		}
		return named
	}

	t.Run("post-process and truncate inputs", func(t *testing.T) {
		t.Parallel()
		p := preset(t, policy.Adaptive, `{"stop_at_target":false}`)
		p.PostProcess.Enabled, p.Truncate.Enabled = true, true
		p.Truncate.TriggerUsage = 0
		b, err := NewBudget(p, "gpt-4o", 40000, tokens.DefaultLimits())
		require.NoError(t, err)
		res, err := Deterministic(Input{Conv: orig, Preset: p, Budget: b, OffloadKey: key, Original: &orig, Archive: testArchive})
		require.NoError(t, err)
		var passes []string
		for _, ps := range res.Passes {
			if ps.Applied {
				passes = append(passes, ps.Name)
			}
		}
		require.Contains(t, passes, "post-process")
		require.Contains(t, passes, "truncate-inputs")
		require.Positive(t, check(t, res.Conv, conversation.KindToolResult), "the reduced listing names its id")
		require.Positive(t, check(t, res.Conv, conversation.KindToolUse), "truncated inputs name their id")
		for _, m := range res.Conv.Messages {
			for _, b := range m.Blocks {
				if b.Kind == conversation.KindToolUse && strings.Contains(b.Input, "truncated_input") {
					var in struct {
						Truncated string `json:"truncated_input"`
					}
					require.NoError(t, json.Unmarshal([]byte(b.Input), &in))
					require.Contains(t, in.Truncated, "**Recover:** the full input with the recover_context tool, id: "+testArchive+".m")
				}
			}
		}

		// Without an original nothing is named (starter inspect).
		plain, err := Deterministic(Input{Conv: orig, Preset: p, Budget: b, OffloadKey: key})
		require.NoError(t, err)
		for _, m := range plain.Conv.Messages {
			for _, b := range m.Blocks {
				require.NotContains(t, b.Text+b.Input, testArchive)
			}
		}
	})

	t.Run("budget truncation", func(t *testing.T) {
		t.Parallel()
		p := preset(t, policy.ThreeTier, "")
		b, err := NewBudget(p, "gpt-4o", 30000, tokens.DefaultLimits())
		require.NoError(t, err)
		// A working copy whose positions moved (its system prompt
		// dropped): the ids still point into the original.
		work := orig.Clone()
		work.Messages = work.Messages[1:]
		m := recoverid.Align(orig, work, testArchive)
		out, pass, err := FitTruncateWith(work, p, b, "tenants/t/archive/x", func(msg, block int) string {
			id, ok := m.Block(msg, block)
			require.True(t, ok)
			return id.String()
		})
		require.NoError(t, err)
		require.True(t, pass.Applied)
		require.Equal(t, pass.Count, check(t, out, conversation.KindToolResult), "every cut names its id once")
		for _, msg := range out.Messages {
			for _, blk := range msg.Blocks {
				if strings.Contains(blk.Text, "cut by the budget check") {
					require.Contains(t, blk.Text, "recover the whole result with the "+strategy.RecoverTool+" tool, id: "+testArchive)
					require.Contains(t, blk.Text, "tenants/t/archive/x", "and the archive")
				}
			}
		}
	})
}
