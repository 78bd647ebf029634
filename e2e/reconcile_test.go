package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
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
	require.Equal(t, store.ErrorInterrupted, mustRun(t, e, lost).ErrorClass)

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

// TestClaimedWhileTemporalIsDownStillRuns: issue 20's lost event. An
// event submitted while Temporal cannot be reached is refused (the caller
// gets the outage) but its claimed run stays pending, not failed; the
// caller's retry with the same event id starts it, and a run whose caller
// never retries is started by the reconciler. Both end succeeded, once.
func TestClaimedWhileTemporalIsDownStillRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dead, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	down := e.deps.Gateway(dead)

	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	event := func(id string) gateway.Event {
		return gateway.Event{Tenant: e.tenant, Session: "outage-" + id, EventID: id, Preset: policy.AutoSummarize,
			Model: "gpt-4o", ContextLimit: 60000, Conversation: input}
	}
	for _, id := range []string{"retried", "abandoned"} {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := down.Submit(sctx, event(id))
		scancel()
		require.Error(t, err, "Temporal is down")
		run := mustRun(t, e, gateway.RunID(e.tenant, "outage-"+id, id))
		require.Equal(t, store.RunPending, run.Status, "the claim is kept, not failed")
	}

	// The caller retries once Temporal is back.
	sub, err := e.gw.Submit(ctx, event("retried"))
	require.NoError(t, err)
	require.True(t, sub.Existing, "the same claim")
	res, err := e.gw.Wait(ctx, sub.RunID)
	require.NoError(t, err)
	checkRun(t, e, input, sub, res)

	// The other caller never retries: the reconciler starts its run.
	abandoned := gateway.RunID(e.tenant, "outage-abandoned", "abandoned")
	rec, err := e.gw.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Contains(t, rec.Started, abandoned)
	require.NotContains(t, rec.Failed, abandoned)
	res, err = e.gw.Wait(ctx, abandoned)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, mustRun(t, e, abandoned).Status)
	require.NotEmpty(t, res.OutputKey)

	again, err := e.gw.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.NotContains(t, again.Started, abandoned, "started once")
}
