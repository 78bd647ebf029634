package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// localStepsChange names the workflow change that runs the S3 and Postgres
// steps as local activities. Runs recorded before it (DefaultVersion)
// replay with the regular activities they were started with.
const localStepsChange = "local-steps"

// localStepsVersion is the version of localStepsChange that new runs get.
const localStepsVersion = 1

type stepModeKey struct{}

// withStepMode decides once per run how steps execute and keeps the
// decision in the context, so every step of a run executes the same way.
//
// Why local activities: a regular activity costs a round trip through the
// Temporal server on each side (schedule, dispatch, complete, a new
// workflow task), about 20 ms on a loaded 2-core machine, for steps that
// themselves take a few milliseconds. A local activity runs in the worker
// that runs the workflow and is recorded as a marker with the next
// workflow task. It still retries under the same policy, and if the
// worker dies, the steps since the last completed workflow task run again
// on another worker; every step is idempotent (content-addressed writes,
// step rows keyed by attempt), so that is safe. The summarizer calls stay
// regular activities: they are long, need heartbeats and are bounded per
// task queue.
func withStepMode(ctx workflow.Context) workflow.Context {
	v := workflow.GetVersion(ctx, localStepsChange, workflow.DefaultVersion, localStepsVersion)
	return workflow.WithValue(ctx, stepModeKey{}, v >= localStepsVersion)
}

// runStep executes one S3/Postgres step: a local activity for runs that
// started at localStepsVersion, a regular activity (under the context's
// activity options) for older ones.
func runStep(ctx workflow.Context, activity, in any) workflow.Future {
	if local, _ := ctx.Value(stepModeKey{}).(bool); local {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localStepOptions()), activity, in)
	}
	return workflow.ExecuteActivity(ctx, activity, in)
}

// stepRetry is the retry policy of every S3/Postgres step: without a cap
// on attempts, so that an outage of either delays a run rather than
// failing it, bounded by the steps' hour-long schedule-to-close timeout.
func stepRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        500 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		NonRetryableErrorTypes: []string{ErrBadInput, ErrConfig},
	}
}

// stepOptions are the regular-activity options of the S3/Postgres steps
// (runs from before localStepsChange). They heartbeat, so that a worker
// that dies mid-step is noticed in seconds, not at the 2-minute timeout.
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
