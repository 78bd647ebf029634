package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Reconciled is what one reconciliation pass found.
type Reconciled struct {
	// Checked is how many live runs were looked at.
	Checked int `json:"checked"`
	// Failed lists the runs marked failed, with why.
	Failed map[string]string `json:"failed"`
	// Started lists the claimed runs that never reached Temporal (it was
	// down when they were submitted) and were handed to it now.
	Started []string `json:"started,omitempty"`
}

// Reconcile marks failed every run that is still live in Postgres (pending
// or running, started more than olderThan ago) although no workflow will
// ever finish it: its Compaction workflow ended without recording it
// (terminated, timed out, history limit), or no longer exists (retention),
// or it never started and its session does not have it queued. A pending
// run that never started but holds its input (claimed while Temporal was
// down) is started instead. Without this a run would stay "running"
// forever.
func (g *Gateway) Reconcile(ctx context.Context, olderThan time.Duration) (Reconciled, error) {
	out := Reconciled{Failed: map[string]string{}}
	before := time.Now().Add(-olderThan)
	for _, status := range []store.RunStatus{store.RunPending, store.RunRunning} {
		// Page through them all: a backlog of more live runs than one
		// page must not hide the orphans behind it.
		after := ""
		for {
			runs, err := g.Store.ListRuns(ctx, store.RunFilter{Status: status, To: before, Limit: store.MaxListLimit, AfterID: after})
			if err != nil {
				return out, fmt.Errorf("list %s runs: %w", status, err)
			}
			for _, r := range runs {
				if err := g.reconcileRun(ctx, r, &out); err != nil {
					return out, err
				}
			}
			if len(runs) < store.MaxListLimit {
				break
			}
			after = runs[len(runs)-1].ID
		}
	}
	return out, nil
}

// reconcileRun looks at one live run r: it starts it when it was claimed
// while Temporal was down, marks it failed when no workflow will finish
// it, and records either in out.
func (g *Gateway) reconcileRun(ctx context.Context, r store.Run, out *Reconciled) error {
	out.Checked++
	why, err := g.orphaned(ctx, r)
	if err != nil {
		return fmt.Errorf("reconcile run %s: %w", r.ID, err)
	}
	if why == "" {
		return nil
	}
	if r.Status == store.RunPending && r.InputKey != "" && r.InputSHA256 != "" && strings.Contains(why, "never started") {
		// Claimed while Temporal was down: its row holds all it
		// needs, so it runs now rather than fail.
		in, ierr := g.inputOf(r)
		if ierr == nil {
			if err := g.start(ctx, in); err != nil {
				return fmt.Errorf("reconcile run %s: %w", r.ID, err)
			}
			out.Started = append(out.Started, r.ID)
			return nil
		}
		why = "it cannot be started: " + ierr.Error()
	}
	marked, err := g.Store.FailRun(ctx, r.ID, store.Failure{Class: store.ErrorInterrupted, Message: why})
	if err != nil {
		return fmt.Errorf("reconcile run %s: %w", r.ID, err)
	}
	if marked {
		out.Failed[r.ID] = why
	}
	return nil
}

// orphaned says why no workflow will finish run r, or "" when one may.
func (g *Gateway) orphaned(ctx context.Context, r store.Run) (string, error) {
	desc, err := g.Temporal.DescribeWorkflowExecution(ctx, r.ID, "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		st := desc.GetWorkflowExecutionInfo().GetStatus()
		if st == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return "", nil
		}
		return fmt.Sprintf("reconciler: the run's workflow ended %s without recording the run", workflowStatus(st)), nil
	case !errors.As(err, &nf):
		return "", fmt.Errorf("describe workflow: %w", err)
	}
	if r.Status == store.RunRunning {
		return "reconciler: the run's workflow no longer exists (terminated or past retention)", nil
	}
	// Pending without a workflow: fine while its session has it queued.
	sessionID := contract.SessionWorkflowID(r.Tenant, r.Session)
	sdesc, err := g.Temporal.DescribeWorkflowExecution(ctx, sessionID, "")
	switch {
	case errors.As(err, &nf):
		return "reconciler: the run never started and its session workflow is gone", nil
	case err != nil:
		return "", fmt.Errorf("describe session workflow: %w", err)
	case sdesc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "reconciler: the run never started and its session workflow ended", nil
	}
	val, err := g.Temporal.QueryWorkflow(ctx, sessionID, "", contract.QueueQuery)
	if err != nil {
		return "", fmt.Errorf("query session queue: %w", err)
	}
	var queued []string
	if err := val.Get(&queued); err != nil {
		return "", fmt.Errorf("read session queue: %w", err)
	}
	if slices.Contains(queued, r.ID) {
		return "", nil
	}
	// It may be starting right now: look once more before calling it lost.
	if _, err := g.Temporal.DescribeWorkflowExecution(ctx, r.ID, ""); err == nil {
		return "", nil
	}
	return "reconciler: the run never started and its session does not have it queued", nil
}

func workflowStatus(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued-as-new"
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return s.String()
}
