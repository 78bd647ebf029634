package httpapi

import (
	"net/http"
	"time"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// webhookRequest registers an endpoint.
type webhookRequest struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// webhookEndpoint is an endpoint as the API shows it. Secret is there only
// in the answers to registration and rotation.
type webhookEndpoint struct {
	ID          string     `json:"id"`
	URL         string     `json:"url"`
	Description string     `json:"description,omitempty"`
	Secret      string     `json:"secret,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	RotatedAt   *time.Time `json:"rotated_at,omitempty"`
	// PreviousExpiresAt is when the secret rotated out stops signing.
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty"`
}

func endpointOf(w store.Webhook) webhookEndpoint {
	out := webhookEndpoint{ID: w.ID, URL: w.URL, Description: w.Description, Secret: w.Secret, CreatedAt: w.CreatedAt.UTC()}
	if !w.RotatedAt.IsZero() {
		t := w.RotatedAt.UTC()
		out.RotatedAt = &t
	}
	if !w.PreviousExpires.IsZero() {
		t := w.PreviousExpires.UTC()
		out.PreviousExpiresAt = &t
	}
	return out
}

type webhookList struct {
	Webhooks []webhookEndpoint `json:"webhooks"`
}

// delivery is one run's final state told to one endpoint, with its
// attempt log.
type delivery struct {
	ID          string            `json:"id"`
	EndpointID  string            `json:"endpoint_id"`
	RunID       string            `json:"run_id"`
	EventType   string            `json:"event_type"`
	Status      string            `json:"status"`
	Attempts    int               `json:"attempts"`
	LastCode    int               `json:"last_code,omitempty"`
	LastError   string            `json:"last_error,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	DeliveredAt *time.Time        `json:"delivered_at,omitempty"`
	Log         []deliveryAttempt `json:"log"`
}

// deliveryAttempt is one POST of a delivery.
type deliveryAttempt struct {
	Attempt        int       `json:"attempt"`
	At             time.Time `json:"at"`
	Code           int       `json:"code,omitempty"`
	Error          string    `json:"error,omitempty"`
	ResponsePrefix string    `json:"response_prefix,omitempty"`
	DurationMS     int64     `json:"duration_ms"`
}

type deliveryList struct {
	Deliveries []delivery `json:"deliveries"`
}

type redelivered struct {
	DeliveryID string `json:"delivery_id"`
	WorkflowID string `json:"workflow_id"`
}

func (a *api) postWebhook(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req webhookRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	wh, created, err := a.deps.Gateway.AddWebhook(r.Context(), tenant, req.URL, req.Description)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		// The URL's endpoint is already there: the same one, its secret
		// not shown again (rotate for a new one).
		status = http.StatusOK
	}
	writeJSON(w, status, endpointOf(wh))
	return nil
}

func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request, tenant string) error {
	ws, err := a.deps.Store.ListWebhooks(r.Context(), tenant)
	if err != nil {
		return err
	}
	out := webhookList{Webhooks: []webhookEndpoint{}}
	for _, wh := range ws {
		out.Webhooks = append(out.Webhooks, endpointOf(wh))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *api) rotateWebhook(w http.ResponseWriter, r *http.Request, tenant string) error {
	wh, err := a.deps.Gateway.RotateWebhook(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return notFoundAs(err, "webhook")
	}
	writeJSON(w, http.StatusOK, endpointOf(wh))
	return nil
}

func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request, tenant string) error {
	if err := a.deps.Store.DeleteWebhook(r.Context(), tenant, r.PathValue("id")); err != nil {
		return notFoundAs(err, "webhook")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) listDeliveries(w http.ResponseWriter, r *http.Request, tenant string) error {
	runID := r.PathValue("run")
	if _, err := a.deps.Audit.Run(r.Context(), tenant, runID); err != nil {
		return notFoundAs(err, "run")
	}
	ds, err := a.deps.Store.ListDeliveries(r.Context(), tenant, runID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, deliveryList{Deliveries: deliveriesOf(ds)})
	return nil
}

// deliveriesOf is the API's view of a run's deliveries.
func deliveriesOf(ds []store.Delivery) []delivery {
	out := make([]delivery, 0, len(ds))
	for _, d := range ds {
		v := delivery{ID: d.ID, EndpointID: d.EndpointID, RunID: d.RunID, EventType: d.EventType, Status: d.Status,
			Attempts: d.Attempts, LastCode: d.LastCode, LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(),
			Log: []deliveryAttempt{}}
		if !d.DeliveredAt.IsZero() {
			t := d.DeliveredAt.UTC()
			v.DeliveredAt = &t
		}
		for _, at := range d.Log {
			v.Log = append(v.Log, deliveryAttempt{Attempt: at.Attempt, At: at.At.UTC(), Code: at.Code, Error: at.Error,
				ResponsePrefix: at.ResponsePrefix, DurationMS: at.Duration.Milliseconds()})
		}
		out = append(out, v)
	}
	return out
}

func (a *api) postRedeliver(w http.ResponseWriter, r *http.Request, tenant string) error {
	id := r.PathValue("id")
	wf, err := a.deps.Gateway.Redeliver(r.Context(), tenant, id)
	if err != nil {
		return notFoundAs(err, "delivery")
	}
	writeJSON(w, http.StatusAccepted, redelivered{DeliveryID: id, WorkflowID: wf})
	return nil
}
