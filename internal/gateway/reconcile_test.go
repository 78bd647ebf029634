package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// liveRun records a live run of session s1 of tenant acme, started now.
func liveRun(t *testing.T, g *Gateway, id string, status store.RunStatus, withInput bool) store.Run {
	t.Helper()
	r := store.Run{ID: id, Tenant: "acme", Session: "s1", EventID: "ev-" + id, Trigger: KindThreshold, Preset: policy.AutoSummarize,
		Status: status, AgentModel: "gpt-4o", ContextLimit: 64000, Overrides: json.RawMessage(`{"history":{"attempts":2}}`)}
	if withInput {
		sha := blob.SHA256Hex([]byte(id))
		r.InputKey, r.InputSHA256 = blob.ContentKey("acme", blob.KindArchive, sha), sha
		preset, err := policy.Resolve(r.Preset, r.Overrides)
		require.NoError(t, err)
		r.ResolvedPreset, err = json.Marshal(preset)
		require.NoError(t, err)
	}
	stored, created, err := g.Store.CreateRun(context.Background(), r)
	require.NoError(t, err)
	require.True(t, created)
	return stored
}

// describe sets what DescribeWorkflowExecution answers for workflow id:
// NotFound when status is unspecified.
func describe(tc *mocks.Client, id string, status enums.WorkflowExecutionStatus) *mock.Call {
	call := tc.On("DescribeWorkflowExecution", mock.Anything, id, "")
	if status == enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return call.Return(nil, serviceerror.NewNotFound("workflow not found"))
	}
	return call.Return(&workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status}}, nil)
}

// requireFailed checks that run id failed as interrupted, with why.
func requireFailed(t *testing.T, g *Gateway, id, why string) {
	t.Helper()
	r, err := g.Store.GetRun(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, r.Status)
	require.Equal(t, store.ErrorInterrupted, r.ErrorClass)
	require.Equal(t, why, r.Error)
	require.False(t, r.FinishedAt.IsZero())
}

// requireStatus checks run id's status.
func requireStatus(t *testing.T, g *Gateway, id string, want store.RunStatus) {
	t.Helper()
	r, err := g.Store.GetRun(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, r.Status, id)
}

// TestReconcileStartsPendingRunWithInput: a pending run whose workflow
// and session workflow do not exist (it was claimed while Temporal was
// down) and that holds its input is handed to its session (signal with
// start, with the input its row recorded) and listed as Started, not
// failed; a pending run in the same state without an input cannot be
// started and fails as interrupted. Runs younger than olderThan are not
// looked at.
func TestReconcileStartsPendingRunWithInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	g.LLMTaskQueue, g.Judge = "llm", true
	withInput := liveRun(t, g, "run-with-input", store.RunPending, true)
	liveRun(t, g, "run-without-input", store.RunPending, false)

	// Nothing is old enough yet: Temporal is not asked.
	out, err := g.Reconcile(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, Reconciled{Failed: map[string]string{}}, out)

	describe(tc, "run-with-input", enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED)
	describe(tc, "run-without-input", enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED)
	describe(tc, contract.SessionWorkflowID("acme", "s1"), enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, nil).Once()

	out, err = g.Reconcile(ctx, -time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, out.Checked)
	require.Equal(t, []string{"run-with-input"}, out.Started)
	why := "reconciler: the run never started and its session workflow is gone"
	require.Equal(t, map[string]string{"run-without-input": why}, out.Failed)

	require.Len(t, signalled, 1)
	want, err := g.inputOf(withInput)
	require.NoError(t, err)
	require.Equal(t, want, signalled[0])
	require.Equal(t, withInput.InputKey, signalled[0].InputKey)
	require.Equal(t, withInput.InputSHA256, signalled[0].InputSHA256)
	require.Equal(t, "llm", signalled[0].LLMTaskQueue)
	require.True(t, signalled[0].Judge)
	requireStatus(t, g, "run-with-input", store.RunPending)
	requireFailed(t, g, "run-without-input", why)
	tc.AssertNumberOfCalls(t, "SignalWithStartWorkflow", 1)
}

// TestReconcileFailsRunningRunWithoutWorkflow: a running run whose
// workflow no longer exists, or ended without recording it, fails as
// interrupted (store.ErrorInterrupted), saying why; a running run whose
// workflow is running is left alone. Nothing is started for them.
func TestReconcileFailsRunningRunWithoutWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	liveRun(t, g, "run-gone", store.RunRunning, true)
	liveRun(t, g, "run-terminated", store.RunRunning, true)
	liveRun(t, g, "run-alive", store.RunRunning, true)
	describe(tc, "run-gone", enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED)
	describe(tc, "run-terminated", enums.WORKFLOW_EXECUTION_STATUS_TERMINATED)
	describe(tc, "run-alive", enums.WORKFLOW_EXECUTION_STATUS_RUNNING)

	out, err := g.Reconcile(ctx, -time.Minute)
	require.NoError(t, err)
	gone := "reconciler: the run's workflow no longer exists (terminated or past retention)"
	terminated := "reconciler: the run's workflow ended terminated without recording the run"
	require.Equal(t, Reconciled{Checked: 3, Failed: map[string]string{"run-gone": gone, "run-terminated": terminated}}, out)
	requireFailed(t, g, "run-gone", gone)
	requireFailed(t, g, "run-terminated", terminated)
	requireStatus(t, g, "run-alive", store.RunRunning)
	tc.AssertNotCalled(t, "SignalWithStartWorkflow")

	// A failed run is final: the next pass does not look at it again.
	out, err = g.Reconcile(ctx, -time.Minute)
	require.NoError(t, err)
	require.Equal(t, Reconciled{Checked: 1, Failed: map[string]string{}}, out)
}

// queue is the session's answer to QueueQuery.
type queue []string

func (q queue) HasValue() bool { return true }
func (q queue) Get(ptr any) error {
	*ptr.(*[]string) = q
	return nil
}

// TestReconcileLeavesQueuedRuns: a pending run without a workflow whose
// running session has it queued is waiting its turn and is left alone;
// one its session does not have queued (and whose workflow is still
// absent when looked at again) fails as interrupted; a Temporal error
// other than NotFound stops the pass without failing anything.
func TestReconcileLeavesQueuedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	liveRun(t, g, "run-queued", store.RunPending, false)
	liveRun(t, g, "run-lost", store.RunPending, false)
	session := contract.SessionWorkflowID("acme", "s1")

	// Temporal down: an error, and nothing marked.
	tc.On("DescribeWorkflowExecution", mock.Anything, mock.Anything, "").
		Return(nil, serviceerror.NewUnavailable("temporal is down")).Once()
	_, err := g.Reconcile(ctx, -time.Minute)
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, err, &unavailable)
	requireStatus(t, g, "run-queued", store.RunPending)
	requireStatus(t, g, "run-lost", store.RunPending)

	describe(tc, "run-queued", 0)
	describe(tc, "run-lost", 0)
	describe(tc, session, enums.WORKFLOW_EXECUTION_STATUS_RUNNING)
	tc.On("QueryWorkflow", mock.Anything, session, "", contract.QueueQuery).Return(queue{"run-other", "run-queued"}, nil)
	out, err := g.Reconcile(ctx, -time.Minute)
	require.NoError(t, err)
	why := "reconciler: the run never started and its session does not have it queued"
	require.Equal(t, Reconciled{Checked: 2, Failed: map[string]string{"run-lost": why}}, out)
	requireStatus(t, g, "run-queued", store.RunPending)
	requireFailed(t, g, "run-lost", why)
	tc.AssertNotCalled(t, "SignalWithStartWorkflow")
}
