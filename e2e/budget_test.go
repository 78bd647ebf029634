package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// overflowInputs are real conversations of each format, which a fresh
// tool result of 100K+ tokens is about to overflow.
func overflowInputs(t *testing.T) map[string][]byte {
	t.Helper()
	anthropic, err := os.ReadFile("../internal/conversation/testdata/anthropic_sample.json")
	require.NoError(t, err)
	react, err := os.ReadFile("../internal/conversation/testdata/react_sample.json")
	require.NoError(t, err)
	return map[string][]byte{
		"openai":    readData(t, "swe-agent-deepseek/django__django-11742.json"),
		"anthropic": anthropic,
		"react":     react,
	}
}

// TestNewestOversizedResultEndsUnderLimit is issue 9's acceptance: for
// OpenAI, Anthropic and ReAct conversations whose newest tool result alone
// is 100K+ tokens (single line, multi-line, two parallel results),
// adaptive, three-tier and offload-compact end succeeded and under the
// limit, with tool pairing intact and the original restorable.
func TestNewestOversizedResultEndsUnderLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	huge := hugeText(t) // a real 868K-character `git diff`
	shapes := map[string][]string{
		"single line": {convtest.SingleLine(412_000)},
		"multi-line":  {huge[:500_000]},
		"parallel":    {convtest.SingleLine(420_000), huge[:450_000]},
	}
	for format, base := range overflowInputs(t) {
		for shape, texts := range shapes {
			for _, preset := range []string{policy.Adaptive, policy.ThreeTier, policy.OffloadCompact} {
				t.Run(format+"/"+shape+"/"+preset, func(t *testing.T) {
					t.Parallel()
					input, err := convtest.AppendResults(base, texts...)
					require.NoError(t, err)
					session := strings.NewReplacer("/", "-", " ", "-").Replace(format + "-" + shape + "-" + preset)
					sub, res := e.compact(gateway.Event{Session: session, Preset: preset, Model: "gpt-4o", ContextLimit: 128000, Conversation: input})
					out := checkRun(t, e, input, sub, res)
					require.False(t, res.OverLimit, "reason: %s", res.OverLimitReason)
					require.Greater(t, res.TokensBefore, 128000, "the input overflows")
					require.LessOrEqual(t, res.TokensAfter, 128000, "passes: %+v", res.Passes)
					require.Equal(t, "tokens", res.Unit)
					require.Equal(t, 128000, res.ContextLimit)

					// The newest results are references now, each still
					// answering its call.
					in := parse(t, input)
					last := in.Messages[len(in.Messages)-1]
					outLast := out.Messages[len(out.Messages)-1]
					require.Equal(t, last.Role, outLast.Role, "the newest turn is still there")
					for j, b := range last.Blocks {
						if b.Kind == conversation.KindToolResult {
							require.Equal(t, b.ToolID, outLast.Blocks[j].ToolID)
							require.Less(t, len(outLast.Blocks[j].Text), len(b.Text))
						}
					}
				})
			}
		}
	}
}

// TestUncuttableUserMessageEndsOverLimit: a user message larger than the
// limit cannot be cut; the run ends over_limit, never succeeded, with the
// reason in the result and in the run's record.
func TestUncuttableUserMessageEndsOverLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(readData(t, "swe-agent-deepseek/django__django-11742.json"), &doc))
	msgs := doc["messages"].([]any)
	// The original ends with a pending call: answer it first.
	last := msgs[len(msgs)-1].(map[string]any)
	for _, c := range last["tool_calls"].([]any) {
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.(map[string]any)["id"], "content": "done"})
	}
	doc["messages"] = append(msgs, map[string]any{"role": "user", "content": hugeText(t)})
	input, err := json.Marshal(doc)
	require.NoError(t, err)

	for _, preset := range []string{policy.ThreeTier, policy.ReactTwoLayer} {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			sub, res := e.compact(gateway.Event{Session: "big-user-" + preset, Preset: preset, Model: "gpt-4o", ContextLimit: 128000, Conversation: input})
			require.True(t, res.OverLimit)
			require.Contains(t, res.OverLimitReason, "user text")
			require.Contains(t, res.OverLimitReason, "no step may cut")
			run, err := e.store.GetRun(context.Background(), sub.RunID)
			require.NoError(t, err)
			require.Equal(t, store.RunOverLimit, run.Status)
			require.Equal(t, res.OverLimitReason, run.Error)
			var stats map[string]any
			require.NoError(t, json.Unmarshal(run.Stats, &stats))
			require.Equal(t, true, stats["over_limit"])
			out, _ := e.output(res)
			in := parse(t, input)
			require.Equal(t, textOf(in.Messages[len(in.Messages)-1]), textOf(out.Messages[len(out.Messages)-1]), "the user's words are kept")
			archived, err := e.blob.GetVerified(context.Background(), run.ArchiveKey, run.ArchiveSHA256)
			require.NoError(t, err)
			require.Equal(t, input, archived)
			if preset != policy.ThreeTier {
				return // react-two-layer makes the same handoff of this chat: checked once
			}
			// The fresh session fits its own limit: the huge message keeps
			// its opening and a pointer, which reads it back byte for byte.
			require.NotEmpty(t, res.HandoffKey, "an over-limit run hands off")
			data, err := e.blob.GetVerified(context.Background(), res.HandoffKey, res.HandoffSHA256)
			require.NoError(t, err)
			handoff := parse(t, data)
			p, err := policy.Builtin(preset)
			require.NoError(t, err)
			b, err := plan.NewBudget(p, "gpt-4o", 128000, tokens.DefaultLimits())
			require.NoError(t, err)
			require.LessOrEqual(t, b.Measure(handoff), b.Limit, "the handoff fits")
			kept := textOf(handoff.Messages[len(handoff.Messages)-1])
			m := regexp.MustCompile(`recover_context tool, id: ([0-9a-f]{64})`).FindStringSubmatch(kept)
			require.NotNil(t, m, "the cut user message names its id")
			key := blob.ContentKey(e.tenant, blob.KindOffload, m[1])
			live, err := e.store.LiveOffloads(context.Background(), e.tenant, "big-user-"+preset, []string{key})
			require.NoError(t, err)
			require.True(t, live[key], "the id is a live offload of this session")
			whole, err := e.blob.GetVerified(context.Background(), key, m[1])
			require.NoError(t, err)
			require.Equal(t, textOf(in.Messages[len(in.Messages)-1]), string(whole))
		})
	}
}

// TestReActCompactsUnderEveryPreset: a ReAct trajectory (object and bare
// list of turns) compacts under every preset; the bare list stays a list
// and its the ReAct two-layer design stats go to the run's stats.
func TestReActCompactsUnderEveryPreset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	turns, err := os.ReadFile("../internal/conversation/testdata/react_turns.json")
	require.NoError(t, err)
	object, err := os.ReadFile("../internal/conversation/testdata/react_sample.json")
	require.NoError(t, err)
	for shape, base := range map[string][]byte{"bare list": turns, "object": object} {
		input, err := convtest.AppendResults(base, hugeText(t)[:300_000])
		require.NoError(t, err)
		for _, preset := range policy.Names() {
			t.Run(shape+"/"+preset, func(t *testing.T) {
				t.Parallel()
				session := strings.ReplaceAll(fmt.Sprintf("react-%s-%s", shape, preset), " ", "-")
				sub, res := e.compact(gateway.Event{Session: session, Preset: preset, Model: "gpt-4o", Conversation: input})
				out := checkRun(t, e, input, sub, res)
				require.Equal(t, conversation.FormatReAct, out.Format)
				require.Equal(t, len(parse(t, input).Messages), len(out.Messages), "a ReAct trajectory never drops a turn")
				_, data := e.output(res)
				require.Equal(t, shape == "bare list", strings.HasPrefix(strings.TrimSpace(string(data)), "["), "the output keeps the input's shape")
				if preset == policy.ReactTwoLayer {
					require.Equal(t, "chars", res.Unit, "the ReAct two-layer design counts characters and says so")
					run, err := e.store.GetRun(context.Background(), sub.RunID)
					require.NoError(t, err)
					var stats struct {
						CC struct {
							Stats conversation.ReActStats `json:"stats"`
						} `json:"context_compression"`
					}
					require.NoError(t, json.Unmarshal(run.Stats, &stats))
					require.Equal(t, res.TokensAfter, stats.CC.Stats.TotalSize)
				}
			})
		}
	}
}
