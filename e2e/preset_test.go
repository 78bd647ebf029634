package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// checkRun asserts what every successful run guarantees: the run row is
// committed once, the original is restorable byte for byte from the
// archive, the output keeps tool calls paired, and no step attempt was
// recorded twice.
func checkRun(t *testing.T, e *env, input []byte, sub gateway.Submitted, res contract.Outcome) conversation.Conversation {
	t.Helper()
	ctx := context.Background()
	run, err := e.store.GetRun(ctx, sub.RunID)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, run.Status, "run error: %s", run.Error)
	require.Equal(t, res.ArchiveKey, run.ArchiveKey)
	archived, err := e.blob.GetVerified(ctx, run.ArchiveKey, run.ArchiveSHA256)
	require.NoError(t, err)
	require.Equal(t, input, archived, "the archive restores the original byte for byte")

	out, _ := e.output(res)
	require.NoError(t, conversation.CheckPairing(out))
	require.Equal(t, int64(res.TokensAfter), run.TokensAfter)

	steps, err := e.store.ListSteps(ctx, sub.RunID)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	seen := map[string]bool{}
	for _, s := range steps {
		k := fmt.Sprintf("%s#%d", s.Name, s.Attempt)
		require.False(t, seen[k], "step %s recorded twice", k)
		seen[k] = true
	}
	return out
}

func parse(t *testing.T, data []byte) conversation.Conversation {
	t.Helper()
	c, err := conversation.ParseAny(data)
	require.NoError(t, err)
	return c
}

// sameMessage compares two canonical messages by value.
func sameMessage(t *testing.T, want, got conversation.Message, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want, got, msgAndArgs...)
}

func textOf(m conversation.Message) string {
	var sb strings.Builder
	for _, b := range m.Blocks {
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// hugeText is the 868,167-character output that ends the psf__requests-1142
// run (the agent's final submission), the largest single text in the data.
func hugeText(t *testing.T) string {
	t.Helper()
	var doc struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(readData(t, "swe-agent-gemini/psf__requests-1142.json"), &doc))
	last := doc.Messages[len(doc.Messages)-1].Content
	require.Greater(t, len(last), 800000)
	return last
}

// withHugeResult inserts, after message at, a tool call whose result is
// text: a real conversation with one huge tool result in its middle.
func withHugeResult(t *testing.T, data []byte, at int, text string) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	msgs := doc["messages"].([]any)
	call := map[string]any{"role": "assistant", "content": "Let me look at the whole output.", "tool_calls": []any{
		map[string]any{"id": "call_huge", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"cat build.log"}`}},
	}}
	result := map[string]any{"role": "tool", "tool_call_id": "call_huge", "content": text}
	out := append([]any{}, msgs[:at+1]...)
	out = append(out, call, result)
	out = append(out, msgs[at+1:]...)
	doc["messages"] = out
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return b
}

func TestOffloadCompactKeepsLastFiveAndDeletesRestoredOffloads(t *testing.T) {
	t.Parallel()
	// Offline: the extractive summarizer renders offload-compact's eight
	// sections the way the prompt asks an LLM to.
	e := newEnv(t, withoutLLM())
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	in := parse(t, input)

	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	out := checkRun(t, e, input, sub, res)

	require.Less(t, res.TokensAfter, res.TokensBefore)
	// System prompt, the task, then offload-compact's summary message, then the
	// last 5.
	sameMessage(t, in.Messages[0], out.Messages[0])
	sameMessage(t, in.Messages[1], out.Messages[1], "the task statement stays verbatim beside the summary")
	summary := out.Messages[2]
	require.Equal(t, conversation.RoleUser, summary.Role)
	require.True(t, strings.HasPrefix(textOf(summary), "[Compressed History]\n\n"), "summary starts as offload-compact's")
	// The sections in the prompt's order; one with nothing to say is
	// left out, never filled with a placeholder.
	at := -1
	for _, section := range offline.HistorySections {
		i := strings.Index(textOf(summary), "## "+section+"\n")
		if i < 0 {
			continue
		}
		require.Greater(t, i, at, "section %s in the prompt's order", section)
		at = i
	}
	for _, section := range []string{"Technical Context", "Code Changes", "Current Status"} {
		require.Contains(t, textOf(summary), "## "+section+"\n", "a run of this length fills it")
	}
	require.NotContains(t, textOf(summary), "(none found)")
	tail := out.Messages[len(out.Messages)-5:]
	for i, m := range tail {
		sameMessage(t, in.Messages[len(in.Messages)-5+i], m, "kept message %d", i)
	}
	// Offloads restored into the summary are deleted after the commit.
	offs, err := e.store.ListOffloads(context.Background(), e.tenant, "s1", true)
	require.NoError(t, err)
	for _, o := range offs {
		require.False(t, o.DeletedAt.IsZero(), "offload %s restored into the summary is marked deleted", o.Key)
		ok, err := e.blob.Exists(context.Background(), o.Key)
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.Equal(t, "extractive", mustRun(t, e, sub.RunID).Model)
	require.Equal(t, "history-v2", mustRun(t, e, sub.RunID).PromptVersion)
}

func mustRun(t *testing.T, e *env, id string) store.Run {
	t.Helper()
	r, err := e.store.GetRun(context.Background(), id)
	require.NoError(t, err)
	return r
}

func TestAutoSummarizeProtectsSystemIntentAndRecent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	in := parse(t, input)

	sub, res := e.compact(gateway.Event{Preset: "auto-summarize", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	out := checkRun(t, e, input, sub, res)

	require.Less(t, res.TokensAfter, res.TokensBefore)
	sameMessage(t, in.Messages[0], out.Messages[0], "system prompt untouched")
	sameMessage(t, in.Messages[1], out.Messages[1], "first user message (intent) untouched")
	var summaries int
	for _, m := range out.Messages {
		if m.Role == conversation.RoleAssistant && strings.HasPrefix(textOf(m), "[SUMMARY]: ") {
			summaries++
		}
	}
	require.Equal(t, 1, summaries)
	for i := 1; i <= 3; i++ {
		sameMessage(t, in.Messages[len(in.Messages)-i], out.Messages[len(out.Messages)-i])
	}
	drift, err := e.store.ListDrift(context.Background(), sub.RunID)
	require.NoError(t, err)
	require.NotEmpty(t, drift, "the summary was drift-checked")
}

func TestThreeTierOffloadsHugeResultAndWritesSessionSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := readData(t, "swe-agent-deepseek/django__django-11742.json")
	input := withHugeResult(t, base, 20, hugeText(t)[:151582])

	sub, res := e.compact(gateway.Event{Preset: "three-tier", Model: "gpt-4o", ContextLimit: 28000, Conversation: input})
	out := checkRun(t, e, input, sub, res)
	require.Less(t, res.TokensAfter, res.TokensBefore)

	offs, err := e.store.ListOffloads(context.Background(), e.tenant, "s1", true)
	require.NoError(t, err)
	require.Len(t, offs, 1, "only the 151K-character result is over 15,000 tokens: tier 1 offloads it")
	for _, o := range offs {
		require.Greater(t, o.Tokens, 15000)
	}
	var session bool
	for _, m := range out.Messages {
		if strings.HasPrefix(textOf(m), "## Session Summary") {
			session = true
			require.Contains(t, textOf(m), res.ArchiveKey, "recovery references name the archive")
		}
	}
	require.True(t, session, "tier 3 wrote a session summary; passes: %+v", res.Passes)
}

// reactFromOpenAI builds a ReAct trajectory (the ReAct two-layer design's format) from an OpenAI
// conversation: one turn per tool call, with the assistant's text as the
// thought.
func reactFromOpenAI(t *testing.T, data []byte) []byte {
	t.Helper()
	var doc struct {
		Messages []struct {
			Role      string `json:"role"`
			Content   any    `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	type turn struct {
		Thought string         `json:"thought"`
		Action  map[string]any `json:"action"`
		Result  string         `json:"result"`
	}
	var turns []turn
	pending := map[string]int{}
	for _, m := range doc.Messages {
		switch m.Role {
		case "assistant":
			thought, _ := m.Content.(string)
			for _, c := range m.ToolCalls {
				pending[c.ID] = len(turns)
				turns = append(turns, turn{Thought: thought, Action: map[string]any{"tool": c.Function.Name, "arguments": c.Function.Arguments}})
			}
		case "tool":
			if i, ok := pending[m.ToolCallID]; ok {
				turns[i].Result, _ = m.Content.(string)
			}
		}
	}
	out, err := json.Marshal(map[string]any{
		"metadata":        map[string]any{"query": "fix the bug", "agent": "react"},
		"reasoning_trace": []any{},
		"execution":       map[string]any{"final_response": "done", "tool_calls": turns},
	})
	require.NoError(t, err)
	return out
}

func TestReactTwoLayerMapReducesHugeResultInParallel(t *testing.T) {
	t.Parallel()
	// Calls that take a while, as a real summarizer's do: an answer given
	// at once could end before the next chunk's call arrives, and the
	// chunks would look sequential although they were sent together.
	e := newEnv(t, withLLM(llmtest.WithLatency(300*time.Millisecond)))
	input := reactFromOpenAI(t, withHugeResult(t, readData(t, "swe-agent-deepseek/django__django-11742.json"), 30, hugeText(t)))
	in := parse(t, input)
	require.Equal(t, conversation.FormatReAct, in.Format)

	sub, res := e.compact(gateway.Event{Preset: "react-two-layer", Conversation: input})
	out := checkRun(t, e, input, sub, res)

	require.Equal(t, conversation.FormatReAct, out.Format)
	require.Len(t, out.Messages, len(in.Messages), "no turn is ever dropped")
	for i, m := range in.Messages {
		if m.Role == conversation.RoleAssistant {
			sameMessage(t, m, out.Messages[i], "thought and action of turn message %d untouched", i)
		}
	}
	require.Less(t, res.TokensAfter, res.TokensBefore/2)
	require.Greater(t, e.llm.MaxConcurrent(), 1, "chunks were summarized in parallel")
	var stats struct {
		ContextCompression struct {
			Stats map[string]any `json:"stats"`
		} `json:"context_compression"`
	}
	_, raw := e.output(res)
	require.NoError(t, json.Unmarshal(raw, &stats))
	for _, k := range []string{"total_size", "model_limit", "usage_percent", "turns_count", "compression_threshold", "needs_compression"} {
		require.Contains(t, stats.ContextCompression.Stats, k)
	}
	require.EqualValues(t, 200000, stats.ContextCompression.Stats["model_limit"])
	require.EqualValues(t, 160000, stats.ContextCompression.Stats["compression_threshold"])
}

// anthropicWithCheckpoint is the watermark design's execution-flow example, grown by
// n exploration turns before the checkpoint.
func anthropicWithCheckpoint(n int, after ...map[string]any) []byte {
	var msgs []map[string]any
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("toolu_explore_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Look at module %d", i)}}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": fmt.Sprintf("Reading module %d.", i)},
				map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": fmt.Sprintf("src/mod%d.py", i)}},
			}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": strings.Repeat(fmt.Sprintf("def f%d(): pass\n", i), 200)}}},
		)
	}
	msgs = append(msgs,
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Can you deactivate refactoring/* augments?"}}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_abc123xyz", "name": "mcp__nisaba__deactivate_augments", "input": map[string]any{"patterns": []string{"refactoring/*"}}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_abc123xyz", "content": "unloaded 3 augments"}}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Deactivated 3 augments..."}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Now help me with feature X"}}},
	)
	for _, m := range after {
		msgs = append(msgs, m)
	}
	data, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4", "system": "You are a careful engineer.", "max_tokens": 4096, "messages": msgs})
	return data
}

func TestWatermarkPrunesBeforeCheckpointAndPersists(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := anthropicWithCheckpoint(6)
	sub, res := e.compact(gateway.Event{Session: "wm", Kind: gateway.KindCheckpoint, Preset: "watermark", Model: "claude-sonnet-4", Conversation: input})
	out := checkRun(t, e, input, sub, res)

	for _, m := range out.Messages {
		for _, b := range m.Blocks {
			if (b.Kind == conversation.KindToolUse || b.Kind == conversation.KindToolResult) && b.ToolID != "toolu_abc123xyz" {
				t.Fatalf("tool block %s before the watermark survived", b.ToolID)
			}
		}
	}
	require.Contains(t, textOf(out.Messages[1]), "Look at module 0", "conversational text is kept")
	wm, err := e.store.GetWatermark(context.Background(), e.tenant, "wm")
	require.NoError(t, err)
	require.Equal(t, "toolu_abc123xyz", wm)

	// The next request of the session, without a new checkpoint, is pruned
	// at the persisted watermark.
	next := anthropicWithCheckpoint(6, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Working on feature X."}}})
	sub2, res2 := e.compact(gateway.Event{Session: "wm", Preset: "watermark", Model: "claude-sonnet-4", Conversation: next})
	out2 := checkRun(t, e, next, sub2, res2)
	require.Equal(t, len(out.Messages)+1, len(out2.Messages))
}

func TestAdaptiveStopsAtTargetWithoutLLM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := readData(t, "swe-agent-deepseek/django__django-11742.json")
	input := withHugeResult(t, base, 20, hugeText(t)[:151582])
	// Offloading the one huge result is enough to get under 50%.
	sub, res := e.compact(gateway.Event{Model: "gpt-4o", ContextLimit: 128000, Conversation: input})
	checkRun(t, e, input, sub, res)
	require.Less(t, res.TokensAfter, res.TokensBefore)
	// The cheap passes reached the target: no LLM call compacted it. The
	// run started CRITICAL, so the summarizer wrote its handoff's summary
	// (and only that).
	steps, err := e.store.ListSteps(context.Background(), sub.RunID)
	require.NoError(t, err)
	for _, s := range steps {
		if s.Kind == "llm" {
			require.True(t, strings.HasPrefix(s.Name, "handoff/"), "summarizer step %s", s.Name)
		}
	}
	require.Equal(t, "CRITICAL", res.LevelBefore)
	require.NotEmpty(t, res.HandoffKey, "a run that starts CRITICAL hands off")
}

func TestDeploymentOverridesTravelWithTheRun(t *testing.T) {
	t.Parallel()
	// As SYNAPSE_COMPACT_PRESERVE_COUNT=7 would configure it.
	e := newEnv(t, withoutLLM(), withOverrides(policy.Overrides{"offload-compact": json.RawMessage(`{"history":{"keep_last":7}}`)}))
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	in := parse(t, input)
	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 30000, Conversation: input})
	out := checkRun(t, e, input, sub, res)
	for i := 1; i <= 7; i++ {
		sameMessage(t, in.Messages[len(in.Messages)-i], out.Messages[len(out.Messages)-i])
	}
	require.True(t, strings.HasPrefix(textOf(out.Messages[len(out.Messages)-8]), "[Compressed History]"), "exactly 7 kept after the summary")
}

// TestReplayAfterLLMOutage is the operator's path for offload-compact's "success
// false": while the summarizer is down the run commits with its history
// unchanged; once it is back, a replay from the archive compacts it.
func TestReplayAfterLLMOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	e.llm.SetDown(true)
	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 30000, Conversation: input})
	out := checkRun(t, e, input, sub, res)
	require.True(t, res.HistoryFailed, "summarizer down: history left unchanged")
	require.Len(t, out.Messages, len(parse(t, input).Messages))

	e.llm.SetDown(false)
	ctx := context.Background()
	replay, err := e.gw.Replay(ctx, e.tenant, sub.RunID, gateway.ReplayRequest{RequestID: "after-outage"})
	require.NoError(t, err)
	again, err := e.gw.Replay(ctx, e.tenant, sub.RunID, gateway.ReplayRequest{RequestID: "after-outage"})
	require.NoError(t, err)
	require.Equal(t, replay.RunID, again.RunID, "the same request id never runs twice")
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res2, err := e.gw.Wait(wctx, replay.RunID)
	require.NoError(t, err)
	out2 := checkRun(t, e, input, replay, res2)
	require.False(t, res2.HistoryFailed)
	require.Less(t, res2.TokensAfter, res.TokensAfter)
	require.True(t, strings.HasPrefix(textOf(out2.Messages[2]), "[Compressed History]"), "after the system prompt and the task")
	require.Equal(t, sub.RunID, mustRun(t, e, replay.RunID).ReplayOf)
}
