package app

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/config"
)

// EnsureRetentionSchedule creates the Temporal Schedule that starts the
// retention sweep every RETENTION_SWEEP_EVERY on the erasure task queue,
// unless it exists. Every worker calls it at start: the first one creates
// it; a sweep never overlaps another. A schedule made before the erasure
// queue existed (it started sweeps on the task queue) is moved to it.
func EnsureRetentionSchedule(ctx context.Context, c client.Client, cfg config.Config) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      contract.RetentionScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.RetentionSweepEvery}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID: contract.RetentionScheduleID, Workflow: contract.RetentionWorkflow, TaskQueue: cfg.EraseTaskQueue,
			Args: []any{contract.RetentionInput{}},
		},
	})
	var exists *serviceerror.AlreadyExists
	if err == nil {
		return nil
	}
	if errors.As(err, &exists) || errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return moveRetentionSchedule(ctx, c, cfg.EraseTaskQueue)
	}
	return fmt.Errorf("create the retention schedule: %w", err)
}

// moveRetentionSchedule sets the task queue of the retention schedule's
// action to queue, when it names another.
func moveRetentionSchedule(ctx context.Context, c client.Client, queue string) error {
	err := c.ScheduleClient().GetHandle(ctx, contract.RetentionScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			action, ok := in.Description.Schedule.Action.(*client.ScheduleWorkflowAction)
			if !ok || action.TaskQueue == queue {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			action.TaskQueue = queue
			return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("move the retention schedule to task queue %s: %w", queue, err)
	}
	return nil
}
