package gateway

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Promote makes replay runID of tenant its session's state (see
// store.Promote): the agent continues from the replay's output, the
// session's watermark moves to the one the replay reached, and the
// tenant's webhook endpoints are told with a run.promoted event. by names
// who asked (an API key id, or "cli"). Promoting again answers the same
// promotion; the event is sent once.
func (g *Gateway) Promote(ctx context.Context, tenant, runID, by string) (p store.Promotion, fresh bool, err error) {
	if tenant == "" {
		return store.Promotion{}, false, &InputError{Field: "tenant", Err: errors.New("empty")}
	}
	p, fresh, err = g.Store.Promote(ctx, tenant, runID, by)
	if errors.Is(err, store.ErrNotFound) {
		return store.Promotion{}, false, fmt.Errorf("run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, false, err
	}
	if err := g.announcePromotion(ctx, p); err != nil {
		return p, fresh, err
	}
	return p, fresh, nil
}

// announcePromotion starts the delivery of the run.promoted event when
// the tenant has an endpoint. Its workflow id is the promotion's, so
// asking again (a retried request) starts nothing twice.
func (g *Gateway) announcePromotion(ctx context.Context, p store.Promotion) error {
	if g.Temporal == nil {
		return nil
	}
	hooks, err := g.Store.HasWebhooks(ctx, p.Tenant)
	if err != nil || !hooks {
		return err
	}
	// A delivery of this promotion still running is joined; one that
	// ended is started again and sends nothing twice (deliveries are
	// recorded per endpoint, run and event).
	_, err = g.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.PromotionWorkflowID(p.RunID), TaskQueue: g.deliveryQueue(),
		Priority: g.priority(p.Tenant)},
		contract.DeliveryWorkflow, contract.DeliveryInput{Tenant: p.Tenant, RunID: p.RunID, Event: contract.EventPromoted})
	if err != nil {
		return fmt.Errorf("announce promotion of %s: %w", p.RunID, err)
	}
	return nil
}
