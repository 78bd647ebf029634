package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// step executes one S3/Postgres step of the run as a local activity,
// its step record kept for the commit (or the failure) to write.
//
// Why local activities: a regular activity costs a round trip through the
// Temporal server on each side (schedule, dispatch, complete, a new
// workflow task), about 20 ms on a loaded 2-core machine, for steps that
// themselves take a few milliseconds. A local activity runs in the worker
// that runs the workflow and is recorded as a marker with the next
// workflow task. It still retries under the same policy, and if the
// worker dies, the steps since the last completed workflow task run again
// on another worker; every step is idempotent (content-addressed writes,
// step rows keyed by attempt and execution), so that is safe. The
// summarizer calls stay regular activities: they are long, need
// heartbeats and are bounded per task queue.
func (r *compactionRun) step(ctx workflow.Context, activity, in any) workflow.Future {
	return r.recording(workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localStepOptions()), activity, in))
}

// stepLog gathers the step records that successful steps return instead
// of writing them; commit or the failure writes them all in one round
// trip. It is only appended to and read in
// order, never ranged as a map, so replay sees the same list.
type stepLog struct {
	steps []contract.Step
	seen  map[string]bool // by execution id: a result read twice counts once
}

// newStepLog is a run's step log; it answers ProgressQuery.
func newStepLog(ctx workflow.Context) *stepLog {
	log := &stepLog{seen: map[string]bool{}}
	if err := workflow.SetQueryHandler(ctx, contract.ProgressQuery, func() (contract.Progress, error) {
		p := contract.Progress{Steps: []contract.StepDone{}}
		for _, st := range log.steps {
			p.Steps = append(p.Steps, contract.StepDone{Name: st.Name, Attempt: st.Attempt})
		}
		return p, nil
	}); err != nil {
		workflow.GetLogger(ctx).Warn("no progress query", "error", err)
	}
	return log
}

func (l *stepLog) add(st *contract.Step) {
	if l == nil || st == nil || l.seen[st.Execution] {
		return
	}
	l.seen[st.Execution] = true
	l.steps = append(l.steps, *st)
}

// all returns a copy of the gathered records.
func (l *stepLog) all() []contract.Step {
	if l == nil || len(l.steps) == 0 {
		return nil
	}
	return append([]contract.Step(nil), l.steps...)
}

// recordCarrier is a step result that may carry its step record
// (activities.Recorded, embedded).
type recordCarrier interface {
	TakeStepRecord() *contract.Step
}

// recordingFuture is a step's future that hands the step record in its
// result to the run's step log when the result is read.
type recordingFuture struct {
	workflow.Future
	log *stepLog
}

// Get reads the result into valuePtr and moves its step record, if any,
// to the log.
func (f recordingFuture) Get(ctx workflow.Context, valuePtr interface{}) error {
	err := f.Future.Get(ctx, valuePtr)
	if c, ok := valuePtr.(recordCarrier); ok && err == nil {
		f.log.add(c.TakeStepRecord())
	}
	return err
}

// recording wraps a step's future for the run's step log.
func (r *compactionRun) recording(f workflow.Future) workflow.Future {
	return recordingFuture{Future: f, log: r.steps}
}

// stepRetry is the retry policy of every S3/Postgres step: without a cap
// on attempts, so that an outage of either delays a run rather than
// failing it, bounded by the steps' hour-long schedule-to-close timeout.
func stepRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        500 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		NonRetryableErrorTypes: []string{activities.TypeBadInput, activities.TypeConfig},
	}
}

// stepOptions are the workflow's default activity options, for a regular
// activity that no step sets its own for. They heartbeat, so that a
// worker that dies mid-step is noticed in seconds, not at the 2-minute
// timeout.
func stepOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            stepRetry(),
	}
}

// localStepOptions are the local-activity options of the same steps. A
// local activity cannot heartbeat; a dead worker is noticed by the
// workflow task timeout instead, and the SDK keeps the workflow task alive
// while a step runs longer than that.
func localStepOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            stepRetry(),
	}
}
