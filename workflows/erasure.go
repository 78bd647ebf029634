package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// Waiting for a session's live runs: every eraseWaitEvery, at most
// eraseWaitMax (a run that never ends is failed by the reconciler well
// before).
const (
	eraseWaitEvery = 2 * time.Second
	eraseWaitMax   = time.Hour
)

// SessionErasure erases a session: once its runs are final (a run in
// flight ends first, then its objects go), its rows go through the one
// path past the append-only triggers, then its objects (except bytes
// another session of the tenant still holds), then its Temporal
// executions, then the tombstone is finished with the counts and digests. Each step is safe to repeat, so a
// worker or server killed mid-way resumes where it was.
func SessionErasure(ctx workflow.Context, in contract.EraseInput) (contract.EraseResult, error) {
	var a *activities.Erasure
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	var res contract.EraseResult
	waited := time.Duration(0)
	for {
		var live int
		if err := workflow.ExecuteActivity(ctx, a.CountLiveRuns, in).Get(ctx, &live); err != nil {
			return res, err
		}
		if live == 0 {
			break
		}
		if waited >= eraseWaitMax {
			return res, errors.New("the session's runs are still live after an hour")
		}
		if err := workflow.Sleep(ctx, eraseWaitEvery); err != nil {
			return res, err
		}
		waited += eraseWaitEvery
	}
	var objs activities.SessionObjects
	if err := workflow.ExecuteActivity(ctx, a.CollectSessionObjects, in).Get(ctx, &objs); err != nil {
		return res, err
	}
	if err := workflow.ExecuteActivity(ctx, a.EraseSessionRows, in).Get(ctx, &res.Rows); err != nil {
		return res, err
	}
	var gone activities.EraseObjectsResult
	err := workflow.ExecuteActivity(ctx, a.EraseSessionObjects, activities.EraseObjectsInput{Erase: in, Objects: objs}).Get(ctx, &gone)
	if err != nil {
		return res, err
	}
	res.ObjectsDeleted, res.ObjectsKept = gone.Deleted, gone.Kept
	// The session's executions hold its name and event ids: they go too.
	// Erasures recorded before this step finish without it.
	if workflow.GetVersion(ctx, "erase-executions", workflow.DefaultVersion, 1) >= 1 {
		err := workflow.ExecuteActivity(ctx, a.EraseSessionExecutions,
			activities.EraseExecutionsInput{Erase: in, Runs: objs.Runs}).Get(ctx, &res.Executions)
		if err != nil {
			return res, err
		}
	}
	err = workflow.ExecuteActivity(ctx, a.FinishErasure, activities.FinishErasureInput{Erase: in, Objects: gone}).Get(ctx, nil)
	return res, err
}
