// Package workflows holds the deterministic Temporal workflow code: the
// per-run Compaction workflow and the per-session Session workflow that
// serializes runs. No I/O, clocks, goroutines or map ranging here; every
// effect is an activity in package activities.
//
// A Compaction run is one struct, compactionRun, whose methods are its
// stages, one file each: this file (the run and its end), passes.go (the
// deterministic and LLM passes), history.go (the history summary and the
// budget ladder), drift.go (the drift gate), summarize.go (the summarizer
// calls), handoff.go (the fresh-session handoff) and step.go (the steps
// and their records).
package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// Compaction runs one compaction: plan → archive → deterministic passes →
// LLM passes → drift check → commit. A failure marks the run failed.
func Compaction(ctx workflow.Context, in contract.CompactionInput) (contract.Outcome, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	r := newCompactionRun(ctx, in)
	ans := &answer{}
	if err := workflow.SetUpdateHandler(ctx, contract.OutcomeUpdate, ans.wait); err != nil {
		return r.res, fmt.Errorf("set the outcome update handler: %w", err)
	}
	// A waiter's update completes once the answer is set; the workflow
	// does not close under it.
	defer func() { _ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }) }()
	res, err := r.execute(ctx)
	return r.finish(ctx, ans, res, err)
}

// answer is a run's outcome for the waiters of contract.OutcomeUpdate,
// set once the run's final state is recorded.
type answer struct {
	done bool
	res  contract.Outcome
	err  error
}

func (a *answer) set(res contract.Outcome, err error) {
	a.done, a.res, a.err = true, res, err
}

// wait is the update's handler: it returns the outcome once set. A
// waiter that arrives after it is set is answered at once.
func (a *answer) wait(ctx workflow.Context) (contract.Outcome, error) {
	if err := workflow.Await(ctx, func() bool { return a.done }); err != nil {
		return contract.Outcome{}, err
	}
	return a.res, a.err
}

// compactionRun is one Compaction run and everything its stages share:
// the run's input, the preset snapshot it works with, what the plan step
// found, the commit its steps build, and the run's own state (its step
// records, the fallbacks it went through, the judge's verdicts). Each
// method is a stage or a part of one; each reads and moves on this state
// (the working key, the passes, the figures), so none passes it along.
// Coroutines of the run (parallel summaries, the handoff and the drift
// gate's replacement beside the repairs) share it too: they are
// deterministic, so replay meets the same order.
type compactionRun struct {
	in      contract.CompactionInput
	run     contract.Run
	preset  policy.Preset
	plan    activities.PlanResult
	archive activities.ArchiveResult
	// commit is what the commit step will record; its WorkKey is the
	// working conversation as the stages leave it.
	commit activities.CommitInput
	// res is the outcome so far: the input's figures and the last size
	// a stage measured.
	res contract.Outcome
	// notify is set when the run's tenant wants its final state told
	// (webhooks), as the commit or failure step answered.
	notify bool
	// steps gathers the step records the steps return (step.go).
	steps *stepLog
	// degraded are the fallbacks the run went through, in the order its
	// coroutines met them. They are plain words: an error's text may
	// name the operator's hosts, and a tenant reads these.
	degraded []string
	// judged remembers the verdict key of each (source, summary) pair
	// the LLM judge read in this run: keys are content-addressed, so the
	// same pair is the same prompt, and it is never sent twice (a repair
	// that gives back the summary it repaired, a check run again after a
	// last resort). Only looked up by key, never ranged.
	judged map[string]string
	// current is set when the run records the run-shape marker (see
	// changed): it takes every branch of the run's versions without a
	// marker of its own.
	current bool
}

// runShapeChange is the change id of the run's current shape. A run
// started since it records this one marker, rather than one per branch,
// and takes every branch that a version of the run gates (plan-final,
// manual-compacts, judge-once, replacement-beside-repair,
// admission-handoff, intermediates, release-after-commit, webhooks,
// delivery-queue); it also waits, before it closes, for the admission
// signals it sent (awaitTold), which no run recorded before it did. The
// SDK upserts a search attribute beside each marker: four branches cost a
// run eight history events and four billable actions. A change to come
// takes its own GetVersion (or this one's version 2); the branches of
// this one keep their change ids for the runs recorded before it.
const runShapeChange = "run-shape"

// changed reports whether the run takes the branch of version changeID
// (each has version 1 as its latest): always for a run of the current
// shape, else as the marker the run recorded, or records now, says.
func (r *compactionRun) changed(ctx workflow.Context, changeID string) bool {
	if r.current {
		return true
	}
	return workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, 1) >= 1
}

// newCompactionRun starts the run's state, and answers ProgressQuery
// from its step records.
func newCompactionRun(ctx workflow.Context, in contract.CompactionInput) *compactionRun {
	return &compactionRun{in: in, run: in.Run, res: contract.Outcome{RunID: in.Run.ID},
		steps: newStepLog(ctx), judged: map[string]string{},
		current: workflow.GetVersion(ctx, runShapeChange, workflow.DefaultVersion, 1) >= 1}
}

// degrade records that the run fell back, once per reason.
func (r *compactionRun) degrade(reason string) {
	if !slices.Contains(r.degraded, reason) {
		r.degraded = append(r.degraded, reason)
	}
}

// execute runs the stages: plan, the passes and the ladder, the handoff,
// commit. It sets notify from the commit.
func (r *compactionRun) execute(ctx workflow.Context) (contract.Outcome, error) {
	// The gateway resolved the preset once, at submit: every step works
	// with that snapshot and none resolves it again.
	if r.run.Resolved == nil {
		return r.res, temporal.NewNonRetryableApplicationError("the run carries no resolved preset", activities.TypeConfig, nil)
	}
	r.preset = *r.run.Resolved
	if final, err := r.planRun(ctx); err != nil || final != nil {
		if final != nil {
			return *final, nil
		}
		return r.res, err
	}
	// A run that starts CRITICAL hands off whatever its passes reach.
	// Without a history summary of its own to reuse, its handoff's
	// summary (of the input) is made beside the passes, not after them.
	var besidePasses workflow.Future
	if r.plan.LevelBefore == string(strategy.LevelCritical) && !r.preset.History.Enabled && canHandOff(r.plan) {
		besidePasses = r.startHandoffSummary(ctx, r.in.InputKey)
	}
	if !r.plan.Skip {
		if err := r.passesAndBudget(ctx); err != nil {
			return r.res, err
		}
	} else {
		workflow.GetLogger(ctx).Info("nothing to do", "run", r.run.ID, "reason", r.plan.Reason)
	}
	if err := r.handoffSummary(ctx, besidePasses); err != nil {
		return r.res, err
	}
	return r.commitRun(ctx)
}

// planRun runs the plan step, which archives the original and verifies
// its checksum before anything is replaced. final is the run's recorded
// outcome when it is already final.
func (r *compactionRun) planRun(ctx workflow.Context) (final *contract.Outcome, err error) {
	var a *activities.Activities
	planIn := activities.PlanInput{Run: r.run, InputKey: r.in.InputKey, InputSHA256: r.in.InputSHA256}
	if err := r.step(ctx, a.Plan, planIn).Get(ctx, &r.plan); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	r.res.Format, r.res.TokensBefore, r.res.LevelBefore = r.plan.Format, r.plan.TokensBefore, r.plan.LevelBefore
	if r.plan.Final != nil && r.changed(ctx, "plan-final") {
		// Committed by an execution of these steps whose workflow task
		// was lost: the run ends as recorded, its webhook told (the lost
		// task's delivery never started).
		workflow.GetLogger(ctx).Warn("run already final when planned; ending with its recorded outcome", "run", r.run.ID, "status", r.plan.Final.Status)
		r.notify = true
		return r.plan.Final, nil
	}
	if r.plan.Archive == nil {
		return nil, temporal.NewNonRetryableApplicationError("plan: no archive of the original", activities.TypeConfig, nil)
	}
	r.archive = *r.plan.Archive
	r.res.ArchiveKey = r.archive.Key
	r.commit = activities.CommitInput{Run: r.run, WorkKey: r.in.InputKey, ArchiveKey: r.archive.Key}
	return nil, nil
}

// commitRun records the run's result: the commit step's outcome is the
// run's row as it now reads, so the workflow's result and every later
// answer are the same.
func (r *compactionRun) commitRun(ctx workflow.Context) (contract.Outcome, error) {
	var a *activities.Activities
	var out activities.CommitResult
	r.commit.TokensBefore, r.commit.LevelBefore, r.commit.Drift = r.plan.TokensBefore, r.plan.LevelBefore, r.res.Drift
	r.commit.Steps = r.steps.all()
	r.commit.Degraded = append([]string(nil), r.degraded...)
	if err := r.step(ctx, a.Commit, r.commit).Get(ctx, &out); err != nil {
		return r.res, fmt.Errorf("commit: %w", err)
	}
	r.notify = out.Notify
	return out.Outcome, nil
}

// finish is the run's one end, whatever it was: a failure is recorded
// (on a disconnected context, so that a cancelled run still records it),
// then the outcome goes to the run's search attributes and its waiters,
// its admission slot to the tenant's next run, its intermediates are
// released and its webhook delivery starts when the tenant wants one.
func (r *compactionRun) finish(ctx workflow.Context, ans *answer, res contract.Outcome, err error) (contract.Outcome, error) {
	outcome := "succeeded"
	switch {
	case err != nil:
		outcome = "failed"
		ctx, _ = workflow.NewDisconnectedContext(ctx)
		r.recordFailure(ctx, err)
	case res.OverLimit:
		outcome = "over_limit"
	}
	recordOutcome(ctx, r.in, outcome, res)
	if err != nil {
		res = contract.Outcome{RunID: r.run.ID}
	}
	ans.set(res, err)
	told := r.handOnSlot(ctx)
	r.releaseIntermediates(ctx)
	if r.notify {
		r.startDelivery(ctx)
	}
	if r.current {
		// Last, so that the release and the delivery are not behind them:
		// most are out by the time the release is done.
		awaitTold(ctx, told)
	}
	return res, err
}

// recordFailure marks the run failed: its row gets the public
// description, and the whole error is in a log line (and Temporal's
// history). notify says whether the tenant wants it told.
func (r *compactionRun) recordFailure(ctx workflow.Context, err error) {
	var a *activities.Activities
	class, msg := activities.Describe(err)
	workflow.GetLogger(ctx).Warn("run failed", "run", r.run.ID, "class", string(class), "error", err)
	fail := activities.FailInput{RunID: r.run.ID, Class: class, Message: msg, Cause: activities.Cause(err), Steps: r.steps.all()}
	var failed activities.FailResult
	if ferr := r.step(ctx, a.FailRun, fail).Get(ctx, &failed); ferr != nil {
		workflow.GetLogger(ctx).Error("record run failure", "run", r.run.ID, "error", ferr)
	}
	r.notify = failed.Notify
}

// releaseIntermediates deletes the final run's intermediate objects
// (ReleaseIntermediates). The run's outcome is already recorded: a
// failure here is logged, never the run's.
func (r *compactionRun) releaseIntermediates(ctx workflow.Context) {
	if !r.changed(ctx, "intermediates") {
		return
	}
	run := r.run
	var a *activities.Activities
	var res activities.ReleaseResult
	var fut workflow.Future
	// As a regular activity, scheduled only once the workflow task that
	// ran the commit has completed: the markers of every step up to the
	// commit are then in the history, so a timed-out workflow task never
	// runs those steps again after their intermediates are gone (which
	// failed a committed run's workflow under a slow link to Temporal).
	// Runs recorded before this keep the local activity.
	if r.changed(ctx, "release-after-commit") {
		fut = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, stepOptions()), a.ReleaseIntermediates, activities.ReleaseInput{Run: run})
	} else {
		fut = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localStepOptions()), a.ReleaseIntermediates, activities.ReleaseInput{Run: run})
	}
	if err := fut.Get(ctx, &res); err != nil {
		workflow.GetLogger(ctx).Warn("release intermediates", "run", run.ID, "error", err)
	}
}
