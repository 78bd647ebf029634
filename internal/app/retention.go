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
// retention sweep every RETENTION_SWEEP_EVERY on the task queue, unless it
// exists. Every worker calls it at start: the first one creates it; a
// sweep never overlaps another.
func EnsureRetentionSchedule(ctx context.Context, c client.Client, cfg config.Config) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      contract.RetentionScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.RetentionSweepEvery}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID: contract.RetentionScheduleID, Workflow: contract.RetentionWorkflow, TaskQueue: cfg.TaskQueue,
			Args: []any{contract.RetentionInput{}},
		},
	})
	var exists *serviceerror.AlreadyExists
	if err == nil || errors.As(err, &exists) || errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return nil
	}
	return fmt.Errorf("create the retention schedule: %w", err)
}
