package strategy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// checkpointTools are the watermark prune's checkpoint tool names.
var checkpointTools = []string{"deactivate_augments", "compress_to_checkpoint"}

// TestPropertyStrategies runs every strategy over generated conversations
// in both shapes and checks the invariants: the input is never changed, no
// tool call or result is orphaned, protected messages are byte-identical,
// and the output is never larger than the input.
func TestPropertyStrategies(t *testing.T) {
	t.Parallel()
	for i, tc := range genCases(20260129, 300) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			in := tc.c
			before := in.Clone()
			checkAllProperties(t, r, in, tc.p)
			require.Equal(t, before, in, "a strategy changed its input")
		})
	}
}

// checkAllProperties runs every strategy's property check on one
// conversation.
func checkAllProperties(t *testing.T, r *rand.Rand, in conversation.Conversation, p Protection) {
	require.NoError(t, checkPairing(in), "generator produced an invalid conversation")
	checkRenders(t, in)
	mask := Protected(in, p)
	t.Run("protected", func(t *testing.T) { propProtected(t, in, p, mask) })
	t.Run("watermark", func(t *testing.T) { propWatermark(t, r, in, mask) })
	t.Run("offload", func(t *testing.T) { propOffload(t, in, mask) })
	t.Run("truncate", func(t *testing.T) { propTruncate(t, in, mask) })
	t.Run("compact", func(t *testing.T) { propCompact(t, r, in, mask) })
	t.Run("replace", func(t *testing.T) { propReplace(t, r, in) })
	t.Run("postprocess", func(t *testing.T) { propPostProcess(t, in, mask) })
}

// FuzzStrategies explores more generated conversations than the fixed
// batch: go test -fuzz FuzzStrategies ./internal/strategy/
func FuzzStrategies(f *testing.F) {
	f.Add(uint64(1), uint8(10), uint8(3), false)
	f.Add(uint64(42), uint8(40), uint8(0), true)
	f.Fuzz(func(t *testing.T, seed uint64, turns, lastN uint8, anthropic bool) {
		r := rand.New(rand.NewPCG(seed, uint64(turns)))
		format := conversation.FormatOpenAI
		if anthropic {
			format = conversation.FormatAnthropic
		}
		in := genConversation(r, genConfig{format: format, turns: int(turns % 60)})
		before := in.Clone()
		p := Protection{System: seed%2 == 0, FirstUser: seed%3 == 0, LastN: int(lastN % 8), PinMarkers: DefaultPinMarkers}
		checkAllProperties(t, r, in, p)
		require.Equal(t, before, in, "a strategy changed its input")
	})
}

func propProtected(t *testing.T, in conversation.Conversation, p Protection, mask []bool) {
	require.Len(t, mask, len(in.Messages))
	n := len(in.Messages)
	for i := max(0, n-p.LastN); i < n; i++ {
		require.True(t, mask[i], "last-N message %d not protected", i)
	}
	idx := indexTools(in)
	for i, m := range in.Messages {
		if p.System && m.Role == conversation.RoleSystem {
			require.True(t, mask[i], "system message %d not protected", i)
		}
		if !mask[i] {
			continue
		}
		for _, j := range idx.partners(i) {
			require.True(t, mask[j], "message %d pairs with protected message %d but is not protected", j, i)
		}
	}
}

func propWatermark(t *testing.T, r *rand.Rand, in conversation.Conversation, mask []bool) {
	wm := ""
	for {
		id, found := FindCheckpoint(in, checkpointTools, wm)
		if !found {
			break
		}
		require.NotEqual(t, wm, id, "the watermark must advance")
		wm = id
		opts := WatermarkOptions{KeepBefore: r.IntN(3), Protected: mask}
		out, stats, err := PruneAtWatermarkWith(in, wm, opts)
		require.NoError(t, err)
		require.True(t, stats.Found)
		checkRenders(t, out)
		require.NoError(t, checkProtectedKept(in, out, mask))
		require.LessOrEqual(t, convSize(out), convSize(in))
		require.Equal(t, len(in.Messages)-stats.MessagesRemoved, len(out.Messages))
		require.Equal(t, in.Messages[stats.Boundary:], out.Messages[len(out.Messages)-(len(in.Messages)-stats.Boundary):],
			"messages from the boundary on must be unchanged")
		// A pruned message holds no tool block and is not empty.
		for _, m := range out.Messages[:len(out.Messages)-(len(in.Messages)-stats.Boundary)] {
			if containsMessage(in, m) {
				continue
			}
			require.False(t, isEmpty(m.Blocks), "pruning left an empty message")
			for _, b := range m.Blocks {
				require.NotContains(t, []conversation.Kind{conversation.KindToolUse, conversation.KindToolResult}, b.Kind)
			}
		}

		// The watermark is applied on every request: applying it again to
		// the pruned conversation changes nothing more.
		plain, _, err := PruneAtWatermark(in, wm)
		require.NoError(t, err)
		again, st2, err := PruneAtWatermark(plain, wm)
		require.NoError(t, err)
		require.True(t, st2.Found)
		require.Equal(t, plain, again)
	}
}

func containsMessage(c conversation.Conversation, m conversation.Message) bool {
	for _, x := range c.Messages {
		if reflect.DeepEqual(x, m) {
			return true
		}
	}
	return false
}

func propOffload(t *testing.T, in conversation.Conversation, mask []bool) {
	cands := PlanOffload(in, charCounter{}, 100, mask)
	store := map[string]string{}
	placed := make([]Placed, 0, len(cands))
	for _, cand := range cands {
		require.False(t, mask[cand.Msg], "planned a protected result")
		b := in.Messages[cand.Msg].Blocks[cand.Block]
		require.Equal(t, conversation.KindToolResult, b.Kind)
		require.False(t, b.IsError, "planned an error result")
		require.Greater(t, cand.Tokens, 100)
		key := fmt.Sprintf("tenants/t1/sessions/s1/offloads/%d-%d.txt", cand.Msg, cand.Block)
		store[referenceID(key)] = b.Text // a reference names the id
		placed = append(placed, Placed{OffloadCandidate: cand, Key: key, Preview: Preview(b.Text)})
	}
	out, err := ApplyOffload(in, placed)
	require.NoError(t, err)
	checkRenders(t, out)
	require.NoError(t, checkProtectedSameIndex(in, out, mask))
	require.LessOrEqual(t, convSize(out), convSize(in))
	if len(placed) > 0 {
		require.Less(t, convSize(out), convSize(in))
	}
	require.Empty(t, PlanOffload(out, charCounter{}, 100, mask), "references must not be offloaded again")

	restored, stats, err := Restore(out, func(key string) (string, error) {
		s, ok := store[key]
		if !ok {
			return "", fmt.Errorf("no object %q", key)
		}
		return s, nil
	}, nil)
	require.NoError(t, err)
	require.Len(t, stats.Restored, len(placed))
	require.Empty(t, stats.Unavailable)
	require.Equal(t, in, restored, "restore must give back the original")
}

func propTruncate(t *testing.T, in conversation.Conversation, mask []bool) {
	out, stats, err := TruncateInputs(in, charCounter{}, TruncateOptions{MinTokens: 50, Protected: mask})
	require.NoError(t, err)
	checkRenders(t, out)
	require.NoError(t, checkProtectedSameIndex(in, out, mask))
	require.Equal(t, convSize(in)-stats.TokensSaved, convSize(out))
	changed := 0
	for i, m := range out.Messages {
		for j, b := range m.Blocks {
			if b.Input == in.Messages[i].Blocks[j].Input {
				continue
			}
			changed++
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(b.Input), &obj), "truncated input must be a JSON object")
			ref, _ := obj[truncatedKey].(string)
			require.True(t, strings.HasPrefix(ref, "## Tool Call: "+b.ToolName+"\n"))
			require.Contains(t, ref, "**Status:** Content persisted to disk")
		}
	}
	require.Equal(t, stats.Count, changed)
	again, st2, err := TruncateInputs(out, charCounter{}, TruncateOptions{MinTokens: 50, Protected: mask})
	require.NoError(t, err)
	require.Zero(t, st2.Count, "truncation must not apply twice")
	require.Equal(t, out, again)
}

func propCompact(t *testing.T, r *rand.Rand, in conversation.Conversation, mask []bool) {
	keep := r.IntN(6)
	n := len(in.Messages)
	head := headEnd(in)
	s := SplitPoint(in, keep, mask)
	require.GreaterOrEqual(t, s, head)
	require.LessOrEqual(t, s, n)
	if s > head {
		require.LessOrEqual(t, s, n-keep)
	}
	// A summary a tenth the size of what it replaces.
	replaced := 0
	var sb strings.Builder
	for i := head; i < s; i++ {
		if !mask[i] {
			replaced += convSize(conversation.Conversation{Messages: in.Messages[i : i+1]})
			sb.WriteString(textOf(in.Messages[i], false))
		}
	}
	summary := []rune(sb.String())
	summary = append([]rune("s"), summary[:len(summary)/10]...)
	for _, style := range []SummaryStyle{StyleCompressedHistory, StyleSummaryFirst, StyleSessionSummary} {
		out, stats, err := Compact(in, s, string(summary), style, mask)
		require.NoError(t, err)
		checkRenders(t, out)
		require.NoError(t, checkProtectedKept(in, out, mask))
		require.Equal(t, n, stats.Summarized+stats.Preserved)
		if stats.Summarized == 0 {
			require.Equal(t, in, out)
			continue
		}
		msg, err := SummaryMessage(string(summary), style)
		require.NoError(t, err)
		wrapped := convSize(conversation.Conversation{Messages: []conversation.Message{msg}})
		require.Equal(t, convSize(in)-replaced+wrapped, convSize(out))
		if wrapped <= replaced {
			require.LessOrEqual(t, convSize(out), convSize(in))
		}
		require.Equal(t, in.Messages[s:], out.Messages[len(out.Messages)-(n-s):], "the tail must be verbatim")
		require.Equal(t, in.Messages[:head], out.Messages[:head], "the system head must stay first")
		require.Equal(t, msg, out.Messages[len(out.Messages)-(n-s)-1], "the summary must precede the tail")
	}
}

func propReplace(t *testing.T, r *rand.Rand, in conversation.Conversation) {
	locs := ToolResults(in)
	if len(locs) == 0 {
		return
	}
	loc := locs[r.IntN(len(locs))]
	text := in.Messages[loc.Msg].Blocks[loc.Block].Text
	out, err := ReplaceToolResult(in, loc.Msg, loc.Block, Preview(text))
	require.NoError(t, err)
	checkRenders(t, out)
	require.LessOrEqual(t, convSize(out), convSize(in))
	for i := range in.Messages {
		if i != loc.Msg {
			require.Equal(t, in.Messages[i], out.Messages[i])
		}
	}
}

// TestGeneratorExercisesStrategies guards the property test against a
// generator that stops producing the cases it is meant to cover.
func TestGeneratorExercisesStrategies(t *testing.T) {
	t.Parallel()
	var pending, pinned, checkpoints, offloads, truncations, compactions, system int
	for _, tc := range genCases(20260129, 300) {
		c := tc.c
		for _, p := range c.ToolIndex().Pairs {
			if p.Pending {
				pending++
			}
		}
		if len(c.Messages) > 0 && c.Messages[0].Role == conversation.RoleSystem {
			system++
		}
		mask := Protected(c, tc.p)
		for i, m := range c.Messages {
			if m.Role == conversation.RoleUser && strings.Contains(textOf(m, false), "[pinned]") && mask[i] && i < len(c.Messages)-tc.p.LastN {
				pinned++
			}
		}
		if _, found := FindCheckpoint(c, checkpointTools, ""); found {
			checkpoints++
		}
		offloads += len(PlanOffload(c, charCounter{}, 100, mask))
		_, ts, err := TruncateInputs(c, charCounter{}, TruncateOptions{MinTokens: 50, Protected: mask})
		require.NoError(t, err)
		truncations += ts.Count
		_, cs, err := Compact(c, SplitPoint(c, 3, mask), "s", StyleCompressedHistory, mask)
		require.NoError(t, err)
		if cs.Summarized > 0 {
			compactions++
		}
	}
	for name, n := range map[string]int{"pending calls": pending, "pinned messages": pinned, "checkpoints": checkpoints,
		"offloads": offloads, "truncations": truncations, "compactions": compactions, "system prompts": system} {
		require.Greater(t, n, 20, "the generator must produce %s", name)
	}
}

func propPostProcess(t *testing.T, in conversation.Conversation, mask []bool) {
	rules := textcut.DefaultPostRules()
	rules.FileLines = 20
	out, stats, err := PostProcessResults(in, charCounter{}, rules, mask)
	require.NoError(t, err)
	checkRenders(t, out)
	require.NoError(t, checkProtectedSameIndex(in, out, mask))
	require.Equal(t, convSize(in)-stats.TokensSaved, convSize(out))
}
