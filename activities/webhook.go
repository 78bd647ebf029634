package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
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
	PrecedingDelivery(ctx context.Context, promoted store.Delivery, event string) (store.Delivery, error)
}

var _ WebhookStore = (*store.Store)(nil)

// Delivery are the steps of a run's webhook deliveries.
type Delivery struct {
	// Hooks is Postgres (a *store.Store in a worker).
	Hooks WebhookStore
	// Sender signs and sends the deliveries.
	Sender *webhook.Sender
	// DeliverySlots bound each tenant's deliveries in flight in this
	// worker (DELIVERY_TENANT_CONCURRENT; nil: no bound).
	DeliverySlots *ratelimit.Slots
}

// notify reports whether the tenant of run wants its final state told: a
// tenant without an endpoint gets no delivery workflow. Without a
// webhook store (a worker built without one) nothing is told.
func (a *Activities) notify(ctx context.Context, tenant string) (bool, error) {
	if a.Hooks == nil {
		return false, nil
	}
	ok, err := a.Hooks.HasWebhooks(ctx, tenant)
	if err != nil {
		return false, storeErr(err)
	}
	return ok, nil
}

// EventType is the webhook event of a run that ended with status:
// "run.succeeded", "run.over_limit" or "run.failed".
func EventType(status store.RunStatus) string { return "run." + string(status) }

// PrepareDeliveries records one delivery of run's final state per live
// endpoint of its tenant and returns their ids (safe to repeat).
func (dl *Delivery) PrepareDeliveries(ctx context.Context, in contract.DeliveryInput) ([]string, error) {
	run, err := dl.Hooks.GetRun(ctx, in.RunID)
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
	ds, err := dl.Hooks.PrepareDeliveries(ctx, in.Tenant, in.RunID, event)
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
func (dl *Delivery) DeliverWebhook(ctx context.Context, id string) error {
	d, w, deleted, err := dl.Hooks.DeliveryTarget(ctx, id)
	if err != nil {
		return storeErr(err)
	}
	if d.Status == store.DeliveryDelivered {
		return nil
	}
	if deleted {
		return storeErr(dl.Hooks.FailDelivery(ctx, id, "the endpoint was deleted"))
	}
	// One tenant's endpoints that accept and never answer hold one slot
	// per attempt, for up to webhook.Timeout: a tenant past its share
	// gives the activity slot back at once rather than wait for one of
	// its own, so another tenant's delivery finds a slot free.
	release, ok := dl.DeliverySlots.TryAcquire(d.Tenant)
	if !ok {
		return tenantBusy(d.Tenant)
	}
	defer release()
	run, err := dl.Hooks.GetRun(ctx, d.RunID)
	if err != nil {
		return storeErr(fmt.Errorf("read run %s: %w", d.RunID, err))
	}
	if d.EventType == contract.EventPromoted {
		if err := dl.deliverFinalFirst(ctx, d, w, run); err != nil {
			return err
		}
	}
	return dl.send(ctx, d, w, run)
}

// deliverFinalFirst makes sure that the endpoint of promoted, a
// run.promoted delivery, heard of the run's final state first. The
// promotion and the run's own delivery are separate workflows, started
// by the operator and by the run: nothing else orders them, and a
// promotion made as soon as the replay committed used to reach the
// endpoint before its run.succeeded. So the final event's delivery to
// this endpoint (recorded now if the run's delivery has not prepared it
// yet, or never will: an endpoint registered after the run ended) is
// sent here first when still pending; until it is accepted the promoted
// event waits, retried with the same backoff. One delivered or failed
// for good no longer holds it up. The run's own workflow may send the
// same delivery meanwhile: a receiver sees its webhook-id twice at worst,
// which Standard Webhooks receivers deduplicate, never out of order.
func (dl *Delivery) deliverFinalFirst(ctx context.Context, promoted store.Delivery, w store.Webhook, run store.Run) error {
	pred, err := dl.Hooks.PrecedingDelivery(ctx, promoted, EventType(run.Status))
	if err != nil {
		return storeErr(err)
	}
	if pred.Status != store.DeliveryPending {
		return nil
	}
	return dl.send(ctx, pred, w, run)
}

// send POSTs delivery d of run to endpoint w and logs the attempt; an
// answer that is not 2xx is a retryable error.
func (dl *Delivery) send(ctx context.Context, d store.Delivery, w store.Webhook, run store.Run) error {
	id := d.ID
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
	att := dl.Sender.Send(ctx, w.URL, d.ID, secrets, body, now)
	// The tenant's log gets the failure's class only (webhook.Attempt.Err):
	// the transport's text can name the deployment's DNS server, internal
	// addresses and which ports answer. The detail goes to the worker's
	// log, without the answer's body.
	rec := store.DeliveryAttempt{Code: att.Code, Error: att.Err, ResponsePrefix: att.Prefix, Duration: att.Duration}
	// The attempt was made: it is logged even when the worker is stopping
	// and has canceled ctx meanwhile, so that the delivery log shows
	// every POST the receiver saw.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordAttemptTimeout)
	defer cancel()
	if err := dl.Hooks.RecordAttempt(rctx, id, rec, att.Accepted()); err != nil {
		return storeErr(err)
	}
	if !att.Accepted() {
		logger(ctx).Info("webhook not accepted", "delivery", id, "endpoint", w.ID, "code", att.Code, "class", att.Err, "detail", att.Detail)
		return temporal.NewApplicationError(att.Err, TypeWebhookRejected)
	}
	return nil
}

// Tenant-busy retries come back after busyRetryMin plus up to
// busyRetryJitter, not after the policy's growing backoff: the delivery
// failed nothing, its tenant's other deliveries were merely in flight.
const (
	busyRetryMin    = time.Second
	busyRetryJitter = 2 * time.Second
)

// tenantBusy is the retryable error of a delivery not sent because its
// tenant has all its slots in flight. No attempt is logged: no POST was
// made.
func tenantBusy(tenant string) error {
	delay := busyRetryMin + rand.N(busyRetryJitter)
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("tenant %s has its deliveries in flight; trying again in %s", tenant, delay.Round(time.Millisecond)),
		TypeTenantBusy, temporal.ApplicationErrorOptions{NextRetryDelay: delay})
}

// FailDelivery marks delivery id failed for good, with reason.
func (dl *Delivery) FailDelivery(ctx context.Context, id, reason string) error {
	return storeErr(dl.Hooks.FailDelivery(ctx, id, reason))
}
