package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// TestClientRecoversWhatWasOffloaded is the integrator's path through the
// Go client: an event answered 202, waited for, its output fetched; the
// offloaded result listed and recovered byte for byte by the id its
// reference names; another tenant gets 404; the tools are valid
// definitions for both providers.
func TestClientRecoversWhatWasOffloaded(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(a.url, a.key, a.client)
	other := client.New(a.url, a.otherKey, a.client)

	big := hugeText(t)[:200_000]
	input, err := convtest.AppendResults(readData(t, "swe-agent-deepseek/django__django-11742.json"), big)
	require.NoError(t, err)
	res, acc, err := c.Submit(ctx, "agent", client.Event{Preset: "three-tier", Model: "gpt-4o", ContextLimit: 128000, Conversation: input})
	require.NoError(t, err)
	require.Nil(t, res, "no wait: 202")
	run, err := c.WaitFinal(ctx, acc.RunID)
	require.NoError(t, err)
	require.True(t, run.Final())
	require.Equal(t, "succeeded", run.Status, run.Error)
	// One answer per run: the wait answers the outcome and the
	// conversation, as a finished run's answer to its event does.
	require.Equal(t, acc.RunID, run.RunID)
	require.Equal(t, acc.RunID, run.Run.ID)
	require.Positive(t, run.TokensBefore)
	require.NotEmpty(t, run.OutputSHA256)
	require.NotEmpty(t, run.Passes)

	out, err := c.Output(ctx, acc.RunID)
	require.NoError(t, err)
	require.JSONEq(t, string(out), string(run.Conversation), "the wait answered the output")
	require.NotContains(t, string(out), big[1000:1200], "the big result is offloaded")
	_, err = other.Output(ctx, acc.RunID)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status, "another tenant's run is not found")

	offs, err := c.Offloads(ctx, "agent")
	require.NoError(t, err)
	require.Len(t, offs, 1)
	require.Equal(t, "call_big_0", offs[0].ToolCallID)
	require.Contains(t, string(out), strategy.RecoverTool+" tool, id: "+offs[0].ID, "the reference names the tool and the id")

	got, err := c.Recover(ctx, "agent", offs[0].ID, "")
	require.NoError(t, err)
	require.Equal(t, big, string(got), "recovered byte for byte")
	lines, err := c.Recover(ctx, "agent", offs[0].ID, "2-3")
	require.NoError(t, err)
	require.Equal(t, strings.Join(strings.SplitAfter(big, "\n")[1:3], ""), string(lines))

	_, err = other.Recover(ctx, "agent", offs[0].ID, "")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status, "another tenant gets 404")
	_, err = c.Recover(ctx, "other-session", offs[0].ID, "")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status, "another session gets 404")

	for _, format := range []string{"openai", "anthropic"} {
		tools, err := c.Tools(ctx, format)
		require.NoError(t, err)
		require.Len(t, tools, 2)
		names := map[string]bool{}
		for _, raw := range tools {
			var def struct {
				Type     string `json:"type"`
				Function *struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parameters"`
				} `json:"function"`
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			}
			require.NoError(t, json.Unmarshal(raw, &def))
			if format == "openai" {
				require.Equal(t, "function", def.Type)
				require.NotNil(t, def.Function)
				require.Equal(t, "object", def.Function.Parameters["type"])
				names[def.Function.Name] = true
			} else {
				require.Equal(t, "object", def.InputSchema["type"])
				names[def.Name] = true
			}
		}
		require.Equal(t, map[string]bool{"recover_context": true, "search_context": true}, names)
	}
	_, err = c.Tools(ctx, "gemini")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "format", ae.Field)
}

// TestHTTPInspectReportsTheConversationSent: the three-tier design's status report of
// the caller's current conversation, with nothing run or stored.
func TestHTTPInspectReportsTheConversationSent(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	input, err := convtest.AppendResults(readData(t, "swe-agent-deepseek/django__django-11742.json"), convtest.SingleLine(412_000))
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"preset": "three-tier", "model": "gpt-4o", "context_limit": 128000, "conversation": json.RawMessage(input)})
	require.NoError(t, err)
	var out struct {
		Format string `json:"format"`
		Report struct {
			Level          string  `json:"level"`
			Usage          float64 `json:"usage"`
			Recommendation string  `json:"recommendation"`
			UsageAfter     float64 `json:"usage_after_deterministic"`
			Budget         string  `json:"budget"`
		} `json:"report"`
	}
	resp, _ := a.call("POST", "/v1/sessions/now/inspect", a.key, body, &out)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "openai", out.Format)
	require.Equal(t, "CRITICAL", out.Report.Level)
	require.Greater(t, out.Report.Usage, 1.0)
	require.Less(t, out.Report.UsageAfter, 0.5, "tier 1 offloads the fresh result")
	require.NotEmpty(t, out.Report.Recommendation)
	runs, err := a.store.ListRuns(context.Background(), store.RunFilter{Tenant: a.tenant})
	require.NoError(t, err)
	require.Empty(t, runs, "nothing was run")

	resp, _ = a.call("POST", "/v1/sessions/now/inspect", a.key, []byte(`{"conversation":{"messages":[{"role":"tool"}]}}`), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestHandoffOnCheckpointAndAtCritical: a checkpoint event, and a run that
// ends over its limit (CRITICAL), answer with the three-tier design's recommendation and
// the fresh-session conversation; an ordinary run has no handoff.
func TestHandoffOnCheckpointAndAtCritical(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(a.url, a.key, a.client)
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	in := parse(t, input)

	res, _, err := c.Submit(ctx, "handoff", client.Event{Kind: "checkpoint", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 128000,
		Conversation: input, WaitSeconds: 60})
	require.NoError(t, err)
	require.Equal(t, "succeeded", res.Status, res.Error)
	require.NotEmpty(t, res.Handoff, "a checkpoint event hands off")
	fresh := parse(t, res.Handoff)
	require.Equal(t, in.Messages[1], fresh.Messages[1], "the task, verbatim")
	require.True(t, strings.HasPrefix(textOf(fresh.Messages[2]), "## Session Handoff"))
	_, _, archiveSHA, err := blob.ParseContentKey(res.ArchiveKey)
	require.NoError(t, err)
	require.Contains(t, textOf(fresh.Messages[2]), "recover_context id "+archiveSHA, "the handoff names the archive by its id")
	require.NotContains(t, textOf(fresh.Messages[2]), res.ArchiveKey, "never by its storage key")
	require.Equal(t, "Continue normally", res.Recommendation)

	res, _, err = c.Submit(ctx, "ordinary", client.Event{Kind: "threshold", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 128000,
		Conversation: input, WaitSeconds: 60})
	require.NoError(t, err)
	require.Empty(t, res.Handoff)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(input, &doc))
	msgs := doc["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	for _, tc := range last["tool_calls"].([]any) {
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": tc.(map[string]any)["id"], "content": "done"})
	}
	doc["messages"] = append(msgs, map[string]any{"role": "user", "content": hugeText(t)[:600_000]})
	big, err := json.Marshal(doc)
	require.NoError(t, err)
	res, _, err = c.Submit(ctx, "critical", client.Event{Kind: "threshold", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 128000,
		Conversation: big, WaitSeconds: 60})
	require.NoError(t, err)
	require.Equal(t, "over_limit", res.Status)
	require.Equal(t, "Checkpoint + fresh session", res.Recommendation)
	require.NotEmpty(t, res.Handoff, "CRITICAL hands off")
}

// TestSessionDriftChecksAreStored: a history summary is checked by the
// three-tier design's four drift checks besides identifier retention, and
// each verdict is in the run's audit record.
func TestSessionDriftChecksAreStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	sub, res := e.compact(gatewayEvent("three-tier", 20000, input))
	checkRun(t, e, input, sub, res)
	drift, err := e.store.ListDrift(context.Background(), sub.RunID)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, d := range drift {
		seen[d.Step] = true
		require.NotEmpty(t, d.Verdict)
	}
	for _, check := range []string{"intent", "trajectory", "premature-completion", "clarification"} {
		require.True(t, seen["history/drift/0/"+check], "verdict of %s stored; have %v", check, seen)
	}
}

// gatewayEvent is a threshold event of session s1 with the preset and limit.
func gatewayEvent(preset string, limit int, conv []byte) gateway.Event {
	return gateway.Event{Preset: preset, Model: "gpt-4o", ContextLimit: limit, Conversation: conv}
}

// TestLLMJudgeVerdictsAreStored: with an LLM configured, the judge's
// structured verdict decides the three-tier design's checks of a history summary, and
// each is stored as the judge's.
func TestLLMJudgeVerdictsAreStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gw.Judge = true
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	sub, res := e.compact(gatewayEvent("three-tier", 20000, input))
	checkRun(t, e, input, sub, res)
	drift, err := e.store.ListDrift(context.Background(), sub.RunID)
	require.NoError(t, err)
	judged := 0
	for _, d := range drift {
		if strings.Contains(d.Verdict, "LLM judge: ") {
			judged++
		}
	}
	require.GreaterOrEqual(t, judged, 4, "the four checks were the judge's")
	steps, err := e.store.ListSteps(context.Background(), sub.RunID)
	require.NoError(t, err)
	var judgeCall bool
	for _, s := range steps {
		judgeCall = judgeCall || (strings.Contains(s.Name, "/judge/") && s.Kind == "llm" && s.Error == "")
	}
	require.True(t, judgeCall, "the judge call is a recorded summarizer step")
}
