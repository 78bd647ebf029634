package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/examples/agent"
	"github.com/ctxcompact/orchestrator/internal/conversation/convtest"
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
