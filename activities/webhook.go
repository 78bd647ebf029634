package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// WebhookStore is what the delivery steps ask of Postgres (a
// *store.Store in a worker).
type WebhookStore interface {
	GetRun(ctx context.Context, id string) (store.Run, error)
	HasWebhooks(ctx context.Context, tenant string) (bool, error)
	PrepareDeliveries(ctx context.Context, tenant, runID, eventType string) ([]store.Delivery, error)
	DeliveryTarget(ctx context.Context, id string) (store.Delivery, store.Webhook, bool, error)
	RecordAttempt(ctx context.Context, id string, a store.DeliveryAttempt, delivered bool) error
	FailDelivery(ctx context.Context, id, reason string) error
}

var _ WebhookStore = (*store.Store)(nil)

// notify reports whether the tenant of run wants its final state told: a
// tenant without an endpoint gets no delivery workflow. Without a
// webhook store (a worker built without one) nothing is told.
func (a *Activities) notify(ctx context.Context, tenant string) (bool, error) {
	if a.Hooks == nil || a.Sender == nil {
		return false, nil
	}
	ok, err := a.Hooks.HasWebhooks(ctx, tenant)
	if err != nil {
		return false, storeErr(err)
	}
	return ok, nil
}

// EventType is the webhook event of a run that ended with status:
// "run.succeeded", "run.over_limit", "run.failed" or "run.skipped".
func EventType(status store.RunStatus) string { return "run." + string(status) }

// PrepareDeliveries records one delivery of run's final state per live
// endpoint of its tenant and returns their ids (safe to repeat).
func (a *Activities) PrepareDeliveries(ctx context.Context, in contract.DeliveryInput) ([]string, error) {
	run, err := a.Hooks.GetRun(ctx, in.RunID)
	if err != nil {
		return nil, storeErr(fmt.Errorf("read run %s: %w", in.RunID, err))
	}
	if run.Tenant != in.Tenant {
		return nil, badInput(fmt.Errorf("run %s is not tenant %s's", in.RunID, in.Tenant))
	}
	if !run.Status.Final() {
		return nil, badInput(fmt.Errorf("run %s is %s, not final", in.RunID, run.Status))
	}
	event := EventType(run.Status)
	if in.Event != "" {
		event = in.Event
	}
	ds, err := a.Hooks.PrepareDeliveries(ctx, in.Tenant, in.RunID, event)
	if err != nil {
		return nil, storeErr(err)
	}
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		if d.Status == store.DeliveryPending {
			ids = append(ids, d.ID)
		}
	}
	return ids, nil
}

// DeliveryPayload is the JSON body of a delivery, as the Standard
// Webhooks specification shapes it: the event type, when the event
// happened, and the run's outcome with its identity.
type DeliveryPayload struct {
	Type      string       `json:"type"`
	Timestamp time.Time    `json:"timestamp"`
	Data      DeliveryData `json:"data"`
}

// DeliveryData is the run a delivery tells of: its outcome (the same
// fields as the API's answer for a finished run, without the
// conversation), its session and its event.
type DeliveryData struct {
	contract.Outcome
	Tenant   string `json:"tenant"`
	Session  string `json:"session"`
	EventID  string `json:"event_id"`
	Preset   string `json:"preset"`
	ReplayOf string `json:"replay_of,omitempty"`
}

// recordAttemptTimeout bounds the logging of an attempt already made.
const recordAttemptTimeout = 10 * time.Second

// DeliverWebhook sends delivery id once: an endpoint that does not accept
// it is a retryable error, so that Temporal retries it with backoff (see
// the workflow's policy); an endpoint deleted since, or a delivery done
// already, ends it without a POST.
func (a *Activities) DeliverWebhook(ctx context.Context, id string) error {
	d, w, deleted, err := a.Hooks.DeliveryTarget(ctx, id)
	if err != nil {
		return storeErr(err)
	}
	if d.Status == store.DeliveryDelivered {
		return nil
	}
	if deleted {
		return storeErr(a.Hooks.FailDelivery(ctx, id, "the endpoint was deleted"))
	}
	run, err := a.Hooks.GetRun(ctx, d.RunID)
	if err != nil {
		return storeErr(fmt.Errorf("read run %s: %w", d.RunID, err))
	}
	outcome, err := run.Outcome()
	if err != nil {
		return storeErr(err)
	}
	body, err := json.Marshal(DeliveryPayload{Type: d.EventType, Timestamp: d.CreatedAt.UTC(), Data: DeliveryData{
		Outcome: outcome, Tenant: run.Tenant, Session: run.Session, EventID: run.EventID, Preset: run.Preset, ReplayOf: run.ReplayOf}})
	if err != nil {
		return fmt.Errorf("encode delivery %s: %w", id, err)
	}
	now := time.Now()
	secrets := []string{w.Secret}
	if w.PreviousSecret != "" && now.Before(w.PreviousExpires) {
		secrets = append(secrets, w.PreviousSecret)
	}
	att := a.Sender.Send(ctx, w.URL, d.ID, secrets, body, now)
	rec := store.DeliveryAttempt{Code: att.Code, Error: att.Err, ResponsePrefix: att.Prefix, Duration: att.Duration}
	// The attempt was made: it is logged even when the worker is stopping
	// and has canceled ctx meanwhile, so that the delivery log shows
	// every POST the receiver saw.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordAttemptTimeout)
	defer cancel()
	if err := a.Hooks.RecordAttempt(rctx, id, rec, att.Accepted()); err != nil {
		return storeErr(err)
	}
	if !att.Accepted() {
		logger(ctx).Info("webhook not accepted", "delivery", id, "code", att.Code)
		return temporal.NewApplicationError(att.Err, ErrWebhookRejected)
	}
	return nil
}

// FailDelivery marks delivery id failed for good, with reason.
func (a *Activities) FailDelivery(ctx context.Context, id, reason string) error {
	return storeErr(a.Hooks.FailDelivery(ctx, id, reason))
}
