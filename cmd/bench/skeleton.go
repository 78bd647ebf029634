package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The skeleton has the pipeline's shape on Temporal and none of its work:
// a long-lived session workflow that takes events by signal and runs each
// as a child workflow of 13 no-op local activities and 2 no-op activities
// on the LLM task queue, in the order a run of the ceiling's preset takes
// them (plan with the archive, deterministic, prepare-history | summarize |
// drift, apply-history, then the budget ladder: offload, prepare-history |
// summarize | drift, apply-history, truncate, offload the small results,
// commit, then the release of the intermediates behind its version
// marker; see the activities per run by type in the report, 12.8 local
// ones in the pipeline, and the history events of both, which the report
// gives side by side). Its rate is the most this Temporal setup allows a
// pipeline of that shape; the full pipeline against it is what the
// orchestrator's own work costs.
const (
	skeletonSessionName = "bench-skeleton-session"
	skeletonRunName     = "bench-skeleton-run"
	skeletonStepName    = "bench-skeleton-step"
	skeletonSignal      = "event"
	// skeletonRunsPerSession bounds a skeleton session's history, like
	// the real session's continue-as-new.
	skeletonRunsPerSession = 50
)

// skeletonEvent names the child to run and the task queue of its
// no-op "summarizer" activity.
type skeletonEvent struct {
	RunID    string `json:"run_id"`
	LLMQueue string `json:"llm_queue"`
}

func skeletonSession(ctx workflow.Context, pending []skeletonEvent) error {
	ch := workflow.GetSignalChannel(ctx, skeletonSignal)
	for i := 0; i < skeletonRunsPerSession; i++ {
		var ev skeletonEvent
		if len(pending) > 0 {
			ev, pending = pending[0], pending[1:]
		} else {
			ch.Receive(ctx, &ev)
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: ev.RunID})
		if err := workflow.ExecuteChildWorkflow(cctx, skeletonRunName, ev).Get(ctx, nil); err != nil {
			return err
		}
	}
	// Events that arrived meanwhile go on with the next run, as the
	// real session's queue does.
	for {
		var ev skeletonEvent
		if !ch.ReceiveAsync(&ev) {
			break
		}
		pending = append(pending, ev)
	}
	return workflow.NewContinueAsNewError(ctx, skeletonSessionName, pending)
}

func skeletonRun(ctx workflow.Context, ev skeletonEvent) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	local := func(n int) error {
		for i := 0; i < n; i++ {
			if err := workflow.ExecuteLocalActivity(lctx, skeletonStepName).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, TaskQueue: ev.LLMQueue})
	llm := func() error { return workflow.ExecuteActivity(actx, skeletonStepName).Get(ctx, nil) }
	// plan, deterministic, prepare | summary | drift, apply, ladder
	// offload, ladder prepare | ladder summary | drift, apply, ladder
	// truncate, ladder offload of the small results, commit.
	for _, step := range []func() error{func() error { return local(3) }, llm, func() error { return local(4) }, llm, func() error { return local(5) }} {
		if err := step(); err != nil {
			return err
		}
	}
	// The release of the intermediates, behind the one version marker
	// the pipeline records for its run's shape.
	if workflow.GetVersion(ctx, "run-shape", workflow.DefaultVersion, 1) == 1 {
		return local(1)
	}
	return nil
}

func skeletonStep(context.Context) error { return nil }

// registerSkeleton puts the skeleton on the scenario's two workers.
func registerSkeleton(main, llm worker.Worker) {
	main.RegisterWorkflowWithOptions(skeletonSession, workflow.RegisterOptions{Name: skeletonSessionName})
	main.RegisterWorkflowWithOptions(skeletonRun, workflow.RegisterOptions{Name: skeletonRunName})
	opts := activity.RegisterOptions{Name: skeletonStepName}
	main.RegisterActivityWithOptions(skeletonStep, opts)
	llm.RegisterActivityWithOptions(skeletonStep, opts)
}

// skeletonCall submits one event to caller w's skeleton session and waits
// for its run, as gateway.Submit and gateway.Wait do for the pipeline; it
// returns the run's workflow id.
func skeletonCall(ctx context.Context, c client.Client, sc *scenario, w, i int) (string, error) {
	ev := skeletonEvent{RunID: fmt.Sprintf("%s-skeleton-%d-%d", sc.queue, w, i), LLMQueue: sc.queue + "-llm"}
	session := fmt.Sprintf("%s-skeleton-session-%d", sc.queue, w)
	if _, err := c.SignalWithStartWorkflow(ctx, session, skeletonSignal, ev,
		client.StartWorkflowOptions{ID: session, TaskQueue: sc.queue}, skeletonSessionName, []skeletonEvent(nil)); err != nil {
		return "", fmt.Errorf("signal skeleton session: %w", err)
	}
	// The same wait as the pipeline's: its result decodes to nothing.
	_, err := sc.gw.Wait(ctx, ev.RunID)
	return ev.RunID, err
}
