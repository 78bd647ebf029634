package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/llm/llmtest"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestReconcilerMarksRunsNoWorkflowWillFinish: a run whose workflow was
// terminated, and a run that never started, are marked failed with the
// reason; a run whose workflow is running is left alone.
func TestReconcilerMarksRunsNoWorkflowWillFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLLM(llmtest.WithLatency(3*time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Never started: a live row with no workflow and no session.
	lost := "run-never-started-" + e.tenant
	_, _, err := e.store.CreateRun(ctx, store.Run{ID: lost, Tenant: e.tenant, Session: "lost", Status: store.RunPending})
	require.NoError(t, err)

	// Running: its history summary waits on the slow summarizer.
	sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "slow", EventID: "ev-slow", Kind: gateway.KindManual,
		Preset: policy.OffloadCompact, Model: "gpt-4o", ContextLimit: 60000,
		Conversation: readData(t, "swe-agent-deepseek/django__django-11564.json")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := e.store.GetRun(ctx, sub.RunID)
		return err == nil && r.Status == store.RunRunning
	}, time.Minute, 50*time.Millisecond)

	res, err := e.gw.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Contains(t, res.Failed, lost)
	require.NotContains(t, res.Failed, sub.RunID, "a running workflow is left alone")
	require.Equal(t, store.RunFailed, mustRun(t, e, lost).Status)
	require.Contains(t, mustRun(t, e, lost).Error, "never started")

	require.NoError(t, e.client.TerminateWorkflow(ctx, sub.RunID, "", "operator"))
	res, err = e.gw.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Contains(t, res.Failed[sub.RunID], "terminated")
	run := mustRun(t, e, sub.RunID)
	require.Equal(t, store.RunFailed, run.Status)

	again, err := e.gw.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, again.Failed, "a run is marked once")
}
