package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// DeliveryWindow is how long a delivery is retried before it is marked
// failed: a receiver that is down for less than a day misses nothing.
const DeliveryWindow = 24 * time.Hour

// deliveryRetry is the backoff between attempts: 2 s, 4 s, 8 s, ... then
// hourly, within DeliveryWindow.
var deliveryRetry = &temporal.RetryPolicy{
	InitialInterval:        2 * time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        time.Hour,
	NonRetryableErrorTypes: []string{activities.TypeBadInput, activities.TypeDependency, activities.TypeInternal},
}

// WebhookDelivery tells a run's final state to its tenant's endpoints,
// each delivery retried with backoff for DeliveryWindow and delivered at
// least once with a stable webhook-id; or sends one delivery again
// (DeliveryInput.DeliveryID). Every attempt is logged in Postgres by the
// step that makes it.
func WebhookDelivery(ctx workflow.Context, in contract.DeliveryInput) error {
	var a *activities.Delivery
	short := workflow.WithActivityOptions(ctx, stepOptions())
	ids := []string{in.DeliveryID}
	if in.DeliveryID == "" {
		if err := workflow.ExecuteActivity(short, a.PrepareDeliveries, in).Get(short, &ids); err != nil {
			return err
		}
	}
	send := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    45 * time.Second,
		ScheduleToCloseTimeout: DeliveryWindow,
		RetryPolicy:            deliveryRetry,
	})
	wg := workflow.NewWaitGroup(ctx)
	for _, id := range ids {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			err := workflow.ExecuteActivity(send, a.DeliverWebhook, id).Get(gctx, nil)
			if err == nil {
				return
			}
			workflow.GetLogger(gctx).Warn("webhook delivery gave up", "delivery", id, "error", err)
			fctx := workflow.WithActivityOptions(gctx, stepOptions())
			if ferr := workflow.ExecuteActivity(fctx, a.FailDelivery, id, "not accepted within "+DeliveryWindow.String()).Get(fctx, nil); ferr != nil {
				workflow.GetLogger(gctx).Error("record failed delivery", "delivery", id, "error", ferr)
			}
		})
	}
	wg.Wait(ctx)
	return nil
}

// startDelivery starts the WebhookDelivery of in's run as an abandoned
// child, so that the run ends now and its session's next run does not
// wait for a receiver. Starting it twice (a replayed failure path) is
// refused by its id, which is harmless. Since version delivery-queue it
// starts on in.DeliveryTaskQueue, whose worker's slots deliveries alone
// take: a receiver that never answers then holds none of the slots the
// compactions and erasures need. Runs recorded before start it on their
// own queue, as they did.
func (r *compactionRun) startDelivery(ctx workflow.Context) {
	in, run := r.in, r.run
	if !r.changed(ctx, "webhooks") {
		return
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:        contract.DeliveryWorkflowID(run.ID),
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
	}
	if r.changed(ctx, "delivery-queue") {
		opts.TaskQueue = in.DeliveryTaskQueue
	}
	cctx := workflow.WithChildOptions(ctx, opts)
	f := workflow.ExecuteChildWorkflow(cctx, contract.DeliveryWorkflow, contract.DeliveryInput{Tenant: run.Tenant, RunID: run.ID})
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("start webhook delivery", "run", run.ID, "error", err)
	}
}
