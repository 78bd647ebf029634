package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// Retention sweep bounds: runs per listing, listings per workflow run
// (then it continues as new, so its history stays small).
const (
	retentionBatch    = 200
	retentionListings = 25
)

// RetentionSweep deletes the runs past their tenant's retention, a batch
// at a time (short transactions, no long lock): for each batch the
// objects are listed, the rows go through erase_runs_rows, then the
// objects no remaining run or offload names. Started by the Temporal
// Schedule contract.RetentionScheduleID, never by a timer in the API.
func RetentionSweep(ctx workflow.Context, in contract.RetentionInput) (contract.RetentionResult, error) {
	var a *activities.Erasure
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	batch := in.Batch
	if batch <= 0 {
		batch = retentionBatch
	}
	var res contract.RetentionResult
	// Proxy snapshots past retention go first, a listing at a time; a
	// history recorded before they existed has no such step.
	if workflow.GetVersion(ctx, "retention-snapshots", workflow.DefaultVersion, 1) == 1 {
		for i := 0; i < retentionListings; i++ {
			var out activities.SnapshotSweep
			if err := workflow.ExecuteActivity(ctx, a.SweepExpiredSnapshots, activities.ExpiredRunsInput{Limit: batch}).Get(ctx, &out); err != nil {
				return res, err
			}
			res.Snapshots += out.Rows
			res.ObjectsDeleted, res.ObjectsKept = res.ObjectsDeleted+out.Deleted, res.ObjectsKept+out.Kept
			if out.Listed < batch {
				break
			}
		}
	}
	for i := 0; i < retentionListings; i++ {
		var batches []activities.ExpiredBatch
		if err := workflow.ExecuteActivity(ctx, a.ListExpiredRuns, activities.ExpiredRunsInput{Limit: batch}).Get(ctx, &batches); err != nil {
			return res, err
		}
		if len(batches) == 0 {
			return res, nil
		}
		for _, b := range batches {
			var objs activities.SessionObjects
			if err := workflow.ExecuteActivity(ctx, a.CollectRunObjects, b).Get(ctx, &objs); err != nil {
				return res, err
			}
			var gone []string
			if err := workflow.ExecuteActivity(ctx, a.EraseExpiredRuns, b).Get(ctx, &gone); err != nil {
				return res, err
			}
			res.Runs += len(gone)
			if len(gone) == 0 {
				continue
			}
			erase := contract.EraseInput{Tenant: b.Tenant}
			objs.Runs = gone
			var out activities.EraseObjectsResult
			if err := workflow.ExecuteActivity(ctx, a.EraseSessionObjects, activities.EraseObjectsInput{Erase: erase, Objects: objs}).Get(ctx, &out); err != nil {
				return res, err
			}
			res.ObjectsDeleted, res.ObjectsKept = res.ObjectsDeleted+out.Deleted, res.ObjectsKept+out.Kept
			if err := workflow.ExecuteActivity(ctx, a.RecordSweepObjects, activities.FinishErasureInput{Erase: erase, Objects: out}).Get(ctx, nil); err != nil {
				return res, err
			}
		}
	}
	return res, workflow.NewContinueAsNewError(ctx, RetentionSweep, in)
}
