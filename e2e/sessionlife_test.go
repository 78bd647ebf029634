package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
	"github.com/ctxcompact/orchestrator/internal/testkit/sessionlife"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// sessionLimit is the agent's context limit of the session-life tests
// (the platform: 20,000 tokens, an event at 65%).
const sessionLimit = 20_000

// replaySession replays file's conversation (in format) turn by turn on
// e's stack under preset, with the deployment's loop breaker on, for
// compactions events.
func replaySession(t *testing.T, e *env, file string, format conversation.Format, model, preset string, compactions int) sessionlife.Result {
	t.Helper()
	data := readData(t, file)
	if format == conversation.FormatAnthropic {
		var err error
		data, err = convtest.Anthropic(data)
		require.NoError(t, err)
	}
	src, err := conversation.Parse(data, format)
	require.NoError(t, err)
	counter, err := tokens.New("o200k_base")
	require.NoError(t, err)
	e.gw.Breaker = gateway.DefaultBreaker
	session := fmt.Sprintf("life-%s-%s", format, preset)
	res, err := sessionlife.Replay(t.Context(), src, sessionlife.Options{
		Limit: sessionLimit, Trigger: 0.65, Counter: counter, Compactions: compactions, Cycle: true,
	}, func(ctx context.Context, le sessionlife.Event) (contract.Outcome, []byte, error) {
		ev := gateway.Event{Tenant: e.tenant, Session: session, EventID: fmt.Sprintf("%s-%d", session, le.N), Kind: "threshold",
			Preset: preset, Model: model, ContextLimit: sessionLimit, Conversation: le.Data}
		sub, err := e.gw.Submit(ctx, ev)
		if err != nil {
			return contract.Outcome{}, nil, err
		}
		out, err := e.gw.Wait(ctx, sub.RunID)
		if err != nil || out.OutputKey == "" {
			return out, nil, err
		}
		_, data := e.output(out)
		return out, data, nil
	})
	require.NoError(t, err)
	require.Len(t, res.Compactions, compactions)
	return res
}

// TestLongSessionIsNeverLockedOut: fifty compactions in a row of one
// growing session at a 20,000-token limit, each continued from the
// previous output with the next real turns, all end succeeded and under
// the limit, under the loop breaker a deployment runs with. Earlier log
// blocks come back byte-identical in every output until a reflection
// condenses them (announced in the run), so the prompt cache keeps the
// prefix up to the log's end; the task stays verbatim throughout.
func TestLongSessionIsNeverLockedOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, preset string
		format             conversation.Format
		model              string
		compactions        int
	}{
		// The lock-out seen before the session log: Anthropic Messages,
		// where a summary is rendered into the task's own message.
		{"anthropic", "swe-agent-gemini/psf__requests-1142.json", policy.Adaptive, conversation.FormatAnthropic, "claude-sonnet-4-5", 50},
		{"openai", "swe-agent-deepseek/django__django-13265.json", policy.Adaptive, conversation.FormatOpenAI, "gpt-4o", 20},
		{"auto-summarize", "swe-agent-deepseek/django__django-11910.json", policy.AutoSummarize, conversation.FormatAnthropic, "claude-sonnet-4-5", 12},
		{"three-tier", "swe-agent-gemini/django__django-15629.json", policy.ThreeTier, conversation.FormatOpenAI, "gpt-4o", 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withoutLLM())
			res := replaySession(t, e, tc.file, tc.format, tc.model, tc.preset, tc.compactions)
			task := probe.Derive(res.Original, policy.DefaultPinMarkers()).Task
			require.NotEmpty(t, task)
			var prevBlocks []string
			reflections, kept := 0, 0
			for i, c := range res.Compactions {
				o := c.Outcome
				require.Equal(t, "succeeded", o.Status, "compaction %d: %s; passes %+v", i+1, o.OverLimitReason+o.Error, o.Passes)
				require.LessOrEqual(t, o.TokensAfter, sessionLimit, "compaction %d", i+1)
				require.NotNil(t, o.Cache, "compaction %d reports its cache figures", i+1)
				require.NotNil(t, o.SessionLog, "compaction %d reports its log", i+1)
				require.NotNil(t, o.Cost, "compaction %d is priced", i+1)
				require.True(t, o.Cost.Priced, "compaction %d: %s has a price", i+1, tc.model)
				require.Equal(t, o.Cache.RewriteTokens, o.Cost.CacheRewriteTokens)
				require.True(t, probe.Measure(probe.Set{Task: task}, c.Output, nil).TaskVerbatim, "compaction %d keeps the task verbatim", i+1)
				blocks := sessionlife.Blocks(c.Output)
				t.Logf("compaction %d: %d → %d tokens, log %d blocks %d tokens (appended %d, reflected %v), prefix %d (%.2f), rewrite %d",
					i+1, o.TokensBefore, o.TokensAfter, o.SessionLog.Blocks, o.SessionLog.Tokens, o.SessionLog.Appended, o.SessionLog.Reflected,
					o.Cache.PrefixTokens, o.Cache.PrefixShare, o.Cache.RewriteTokens)
				if o.SessionLog.Appended == 0 {
					for _, p := range o.Passes {
						t.Logf("   %s applied=%v %s", p.Name, p.Applied, p.Note)
					}
				}
				require.Equal(t, o.SessionLog.Blocks, len(blocks), "compaction %d", i+1)
				for _, b := range blocks {
					require.Equal(t, 1, strings.Count(b, "<session-log block="), "compaction %d: a block never holds another", i+1)
				}
				if o.SessionLog.Reflected {
					reflections++
				} else if len(prevBlocks) > 0 {
					// Every earlier block is still there, byte for byte, and
					// in the same order, ahead of the new one.
					require.GreaterOrEqual(t, len(blocks), len(prevBlocks), "compaction %d", i+1)
					require.Equal(t, prevBlocks, blocks[:len(prevBlocks)], "compaction %d keeps the earlier blocks verbatim", i+1)
					require.Positive(t, o.Cache.PrefixTokens, "compaction %d keeps a cached prefix", i+1)
					kept++
				}
				prevBlocks = blocks
			}
			require.Positive(t, kept, "compactions kept the log between reflections")
			t.Logf("%d compactions, %d reflections, %d kept the whole log verbatim", len(res.Compactions), reflections, kept)
		})
	}
}

// TestSummarizerCostStaysFlat: with a summarizer and its judge behind an
// OpenAI-compatible endpoint that counts what it is sent, the LLM input of
// each compaction of a long session is what is new since the last block
// (plus the summary being judged), not the session's whole history: it
// does not grow with the session's age. The judge never reads the same
// prompt twice.
func TestSummarizerCostStaysFlat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gw.Judge = true
	const compactions = 20
	var perCompaction []int
	var sent []int
	calls := 0
	data := readData(t, "swe-agent-deepseek/django__django-13265.json")
	src, err := conversation.Parse(data, conversation.FormatOpenAI)
	require.NoError(t, err)
	counter, err := tokens.New("o200k_base")
	require.NoError(t, err)
	_, err = sessionlife.Replay(t.Context(), src, sessionlife.Options{Limit: sessionLimit, Trigger: 0.65, Counter: counter, Compactions: compactions, Cycle: true},
		func(ctx context.Context, le sessionlife.Event) (contract.Outcome, []byte, error) {
			sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "flat", EventID: fmt.Sprintf("flat-%d", le.N),
				Preset: policy.Adaptive, Model: "gpt-4o", ContextLimit: sessionLimit, Conversation: le.Data})
			if err != nil {
				return contract.Outcome{}, nil, err
			}
			out, err := e.gw.Wait(ctx, sub.RunID)
			if err != nil {
				return out, nil, err
			}
			all := e.llm.Calls()
			chars := 0
			for _, c := range all[calls:] {
				chars += c.PromptChars
			}
			calls = len(all)
			perCompaction, sent = append(perCompaction, chars), append(sent, len(le.Data))
			if chars > 0 {
				require.Positive(t, out.Cost.SummarizerInputTokens, "compaction %d counts its summarizer's usage", le.N)
				require.Positive(t, out.Cost.SummarizerUSD)
			}
			_, outData := e.output(out)
			return out, outData, nil
		})
	require.NoError(t, err)
	require.Len(t, perCompaction, compactions)
	judged := map[string]bool{}
	for _, c := range e.llm.Calls() {
		if c.Judge {
			require.False(t, judged[c.PromptSHA256], "the judge read the same prompt twice")
			judged[c.PromptSHA256] = true
		}
	}
	early, late := 0, 0
	for i, chars := range perCompaction {
		t.Logf("compaction %d: LLM input %d chars, event %d bytes", i+1, chars, sent[i])
		require.Less(t, chars, 2*sent[i], "compaction %d reads less than twice the context it was sent", i+1)
		if i < compactions/2 {
			early = max(early, chars)
		} else {
			late = max(late, chars)
		}
	}
	require.LessOrEqual(t, late, early*3/2, "the LLM input per compaction stays flat as the session ages")
}
