package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/examples/agent"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// TestExampleAgentRecoversAnOffloadedResult runs the example agent loop
// (examples/agent) on the real stack: its conversation overflows, it sends
// a threshold event and swaps in the compacted conversation, and its model
// (llmtest playing one) recovers the offloaded result through the
// recover_context tool, served by the API.
func TestExampleAgentRecoversAnOffloadedResult(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	big := hugeText(t)[:200_000]
	conv, err := convtest.AppendResults(readData(t, "swe-agent-deepseek/django__django-11742.json"), big)
	require.NoError(t, err)

	oc := openai.DefaultConfig("test-key")
	oc.BaseURL = a.llm.URL()
	api := client.New(a.url, a.key, a.client)
	rep, err := agent.Run(ctx, agent.Config{
		API: api, Session: "example", LLM: openai.NewClientWithConfig(oc), Model: "gpt-4o",
		ContextLimit: 128000, Threshold: 0.5, MaxTurns: 12, MaxRecoverLines: 40, Log: t.Logf,
	}, conv)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Events, "the agent asked for a compaction")

	offs, err := api.Offloads(ctx, "example")
	require.NoError(t, err)
	var bigID string
	for _, o := range offs {
		if o.ToolCallID == "call_big_0" {
			bigID = o.ID
		}
	}
	require.NotEmpty(t, bigID, "the big result was offloaded")
	require.Contains(t, rep.Recovered, bigID, "the agent recovered it through the tool")
	got, err := api.Recover(ctx, "example", bigID, "1-40")
	require.NoError(t, err)
	require.Equal(t, strings.Join(strings.SplitAfter(big, "\n")[:40], ""), string(got))
}

// TestExampleAgentOfflineRecoversAnOffload runs the example's offline mode
// (`go run ./examples/agent/cmd/agent -offline`, package agent's
// RunOffline) on the real stack with no LLM: its scripted model runs the
// test tool, the log puts the small context over the threshold, the
// compaction offloads it with the offline overrides, and the model reads
// it back through recover_context. What the API recovers is the test log
// byte for byte, and the model's answer quotes what the tool returned.
// With no overrides ({}) the default preset offloads it too: the log puts
// the 4,000-token context over the budget ladder's 90%, whose offload
// threshold (budget.offload_min_tokens) is 1,000 tokens.
func TestExampleAgentOfflineRecoversAnOffload(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	tests := []struct {
		name      string
		overrides json.RawMessage // nil: the offline mode's
	}{
		{"offline overrides", nil},
		{"default preset", json.RawMessage(`{}`)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			session := fmt.Sprintf("offline-%d", i)
			api := client.New(a.url, a.key, a.client)
			rep, err := agent.RunOffline(ctx, agent.Config{API: api, Session: session, Overrides: tc.overrides, Log: t.Logf}, nil)
			require.NoError(t, err)
			require.Len(t, rep.Events, 1, "the test log put the conversation over the threshold once")
			offs, err := api.Offloads(ctx, session)
			require.NoError(t, err)
			require.Len(t, offs, 1, "the test log was offloaded")
			require.Equal(t, agent.TestTool, offs[0].ToolName)
			require.Equal(t, []string{offs[0].ID}, rep.Recovered, "the model recovered it through the tool")
			got, err := api.Recover(ctx, session, offs[0].ID, "")
			require.NoError(t, err)
			require.Equal(t, agent.TestLog(), string(got), "the recovered text is the tool's result")
			first, _, _ := strings.Cut(agent.TestLog(), "\n")
			require.Contains(t, rep.Final, "It starts: "+first, "the model saw the recovered log")
		})
	}
}
