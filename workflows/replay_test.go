package workflows

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// The histories in testdata/histories were recorded from real runs on the
// e2e stack (e2e.TestRecordHistories, RECORD_HISTORIES=1). Replaying them
// fails when a change to workflow code would break runs in flight: such a
// change needs workflow.GetVersion and a recording of its own (see the
// docs/testing.md, "Changing a workflow"). The files here are the v1 baseline:
// every history recorded after the input flags and the branches for
// older runs were removed.
func recordedHistories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/histories/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	return files
}

func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	for _, file := range recordedHistories(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(Compaction)
			r.RegisterWorkflow(Session)
			r.RegisterWorkflow(WebhookDelivery)
			r.RegisterWorkflow(SessionErasure)
			r.RegisterWorkflow(RetentionSweep)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(quietLogger(), file))
		})
	}
}

// TestReplayDetectsChangedWorkflow proves the replay test can fail: a
// Compaction that skips the plan step does not replay a recorded run.
func TestReplayDetectsChangedWorkflow(t *testing.T) {
	t.Parallel()
	changed := func(ctx workflow.Context, in contract.CompactionInput) (contract.Outcome, error) {
		var a *activities.Activities
		ctx = workflow.WithActivityOptions(ctx, stepOptions())
		var archive activities.ArchiveResult
		err := workflow.ExecuteActivity(ctx, a.Archive, activities.ArchiveInput{Run: in.Run, InputKey: in.InputKey, InputSHA256: in.InputSHA256}).Get(ctx, &archive)
		return contract.Outcome{RunID: in.Run.ID, Stats: contract.Stats{ArchiveKey: archive.Key}}, err
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: "Compaction"})
	err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger(), filepath.Join("testdata", "histories", "compaction-watermark.json"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "TMPRL1100", "a nondeterminism error")
}

// TestEveryWorkflowHasARecordedHistory: each workflow the worker runs has
// (as Register names it) at least one recorded history, so that a change to any of them is
// caught by the replay test above.
func TestEveryWorkflowHasARecordedHistory(t *testing.T) {
	t.Parallel()
	recorded := map[string]bool{}
	for _, file := range recordedHistories(t) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var h struct {
			Events []struct {
				Started *struct {
					WorkflowType struct {
						Name string `json:"name"`
					} `json:"workflowType"`
				} `json:"workflowExecutionStartedEventAttributes"`
			} `json:"events"`
		}
		require.NoError(t, json.Unmarshal(data, &h), file)
		require.NotEmpty(t, h.Events, file)
		require.NotNil(t, h.Events[0].Started, "%s starts with its workflow's start", file)
		recorded[h.Events[0].Started.WorkflowType.Name] = true
	}
	for _, name := range []string{contract.CompactionWorkflow, contract.SessionWorkflow, contract.DeliveryWorkflow, contract.EraseWorkflow, contract.RetentionWorkflow} {
		require.True(t, recorded[name], "no recorded history of %s", name)
	}
}
