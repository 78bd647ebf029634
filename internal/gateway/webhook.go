package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// RotationOverlap is how long a rotated-out webhook secret keeps signing
// beside the new one.
const RotationOverlap = 24 * time.Hour

// MaxWebhooks bounds a tenant's live endpoints: every run's final state
// is one delivery per endpoint.
const MaxWebhooks = 10

// AddWebhook registers url for tenant's completion webhooks and returns
// the endpoint with its secret (shown once). A URL already registered
// answers its endpoint without the secret (created false); a new secret
// is RotateWebhook's, asked for explicitly.
func (g *Gateway) AddWebhook(ctx context.Context, tenant, url, description string) (w store.Webhook, created bool, err error) {
	if err := g.WebhookPolicy.CheckURL(url); err != nil {
		return store.Webhook{}, false, &InputError{Field: "url", Err: err}
	}
	// One receiver, one endpoint, however its URL is spelled
	// (LOCALHOST, a trailing dot, :0443, [::ffff:127.0.0.1]): each
	// endpoint is a delivery of every run.
	url, err = webhook.Normalize(url)
	if err != nil {
		return store.Webhook{}, false, &InputError{Field: "url", Err: err}
	}
	if len(description) > 200 {
		return store.Webhook{}, false, &InputError{Field: "description", Err: errors.New("is longer than 200 bytes")}
	}
	if description != "" {
		if err := idcheck.Check("description", description); err != nil {
			return store.Webhook{}, false, &InputError{Field: "description", Err: err.(*idcheck.Error).Unnamed()}
		}
	}
	live, err := g.Store.ListWebhooks(ctx, tenant)
	if err != nil {
		return store.Webhook{}, false, err
	}
	for _, w := range live {
		if same, err := webhook.Normalize(w.URL); w.URL == url || (err == nil && same == url) {
			return w, false, nil // its secret was shown once, at registration
		}
	}
	if len(live) >= MaxWebhooks {
		return store.Webhook{}, false, &InputError{Field: "url", Err: fmt.Errorf("tenant already has %d endpoints, the most allowed", MaxWebhooks)}
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return store.Webhook{}, false, err
	}
	return g.Store.AddWebhook(ctx, tenant, url, description, secret)
}

// RotateWebhook gives tenant's endpoint id a new secret (shown once); the
// old one signs beside it for RotationOverlap.
func (g *Gateway) RotateWebhook(ctx context.Context, tenant, id string) (store.Webhook, error) {
	secret, err := webhook.NewSecret()
	if err != nil {
		return store.Webhook{}, err
	}
	return g.Store.RotateWebhook(ctx, tenant, id, secret, RotationOverlap)
}

// Redeliver sends tenant's delivery id again, with the same webhook-id,
// in a workflow of its own (retried as the first delivery was).
func (g *Gateway) Redeliver(ctx context.Context, tenant, id string) (workflowID string, err error) {
	d, err := g.Store.Redeliver(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	workflowID = contract.RedeliveryWorkflowID(d.ID, strconv.FormatInt(time.Now().UnixNano(), 36))
	_, err = g.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: g.deliveryQueue(), Priority: g.priority(tenant)},
		contract.DeliveryWorkflow, contract.DeliveryInput{Tenant: tenant, RunID: d.RunID, DeliveryID: d.ID})
	if err != nil {
		return "", fmt.Errorf("start redelivery of %s: %w", id, err)
	}
	return workflowID, nil
}
