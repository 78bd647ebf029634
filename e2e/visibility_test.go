package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// TestRunsAreFoundByWhatTheyMean: with search attributes on, the session
// and its run are found in Temporal by tenant, session, preset and
// outcome, and the run's memo holds its figures, no conversation text.
func TestRunsAreFoundByWhatTheyMean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	e.gw.SearchAttributes = true
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	sub, res := e.compact(gateway.Event{Session: "visible", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 20000, Conversation: input})
	checkRun(t, e, input, sub, res)

	ctx := context.Background()
	list := func(query string) []string {
		resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(t, err)
		var ids []string
		for _, w := range resp.GetExecutions() {
			ids = append(ids, w.GetExecution().GetWorkflowId())
		}
		return ids
	}
	byRun := fmt.Sprintf(`CompactionTenant=%q and CompactionSession="visible" and CompactionPreset="three-tier" and CompactionOutcome="succeeded"`, e.tenant)
	require.Eventually(t, func() bool {
		ids := list(byRun)
		return len(ids) == 1 && ids[0] == sub.RunID
	}, 30*time.Second, 200*time.Millisecond, "the run is found by tenant, session, preset and outcome")
	require.Eventually(t, func() bool {
		return len(list(fmt.Sprintf(`CompactionTenant=%q and WorkflowType="Session"`, e.tenant))) == 1
	}, 30*time.Second, 200*time.Millisecond, "the session is found by tenant")

	desc, err := e.client.DescribeWorkflowExecution(ctx, sub.RunID, "")
	require.NoError(t, err)
	var ratio float64
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["ratio"], &ratio))
	require.InDelta(t, res.Ratio, ratio, 1e-9, "the memo holds the run's figures")
}
