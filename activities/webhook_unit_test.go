package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// memHooks is activities.WebhookStore in memory: runs, one endpoint per
// tenant, and deliveries keyed like the table's unique key (endpoint,
// run, event).
type memHooks struct {
	mu         sync.Mutex
	runs       map[string]store.Run
	endpoints  map[string]store.Webhook // by tenant
	deleted    map[string]bool          // endpoint ids
	deliveries map[string]*store.Delivery
	attempts   map[string][]store.DeliveryAttempt
}

func newMemHooks() *memHooks {
	return &memHooks{runs: map[string]store.Run{}, endpoints: map[string]store.Webhook{}, deleted: map[string]bool{},
		deliveries: map[string]*store.Delivery{}, attempts: map[string][]store.DeliveryAttempt{}}
}

func (m *memHooks) GetRun(_ context.Context, id string) (store.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return store.Run{}, store.ErrNotFound
	}
	return r, nil
}

func (m *memHooks) HasWebhooks(_ context.Context, tenant string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.endpoints[tenant]
	return ok && !m.deleted[w.ID], nil
}

func (m *memHooks) PrepareDeliveries(_ context.Context, tenant, runID, event string) ([]store.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.endpoints[tenant]
	if !ok || m.deleted[w.ID] {
		return nil, nil
	}
	id := fmt.Sprintf("msg_%s_%s", runID, event)
	if _, ok := m.deliveries[id]; !ok {
		m.deliveries[id] = &store.Delivery{ID: id, Tenant: tenant, EndpointID: w.ID, RunID: runID, EventType: event,
			Status: store.DeliveryPending, CreatedAt: time.Now()}
	}
	return []store.Delivery{*m.deliveries[id]}, nil
}

func (m *memHooks) PrecedingDelivery(_ context.Context, promoted store.Delivery, event string) (store.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := fmt.Sprintf("msg_%s_%s", promoted.RunID, event)
	if _, ok := m.deliveries[id]; !ok {
		m.deliveries[id] = &store.Delivery{ID: id, Tenant: promoted.Tenant, EndpointID: promoted.EndpointID, RunID: promoted.RunID,
			EventType: event, Status: store.DeliveryPending, CreatedAt: time.Now()}
	}
	return *m.deliveries[id], nil
}

func (m *memHooks) DeliveryTarget(_ context.Context, id string) (store.Delivery, store.Webhook, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.deliveries[id]
	if !ok {
		return store.Delivery{}, store.Webhook{}, false, store.ErrNotFound
	}
	w := m.endpoints[d.Tenant]
	return *d, w, m.deleted[w.ID], nil
}

func (m *memHooks) RecordAttempt(_ context.Context, id string, a store.DeliveryAttempt, delivered bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.deliveries[id]
	d.Attempts++
	m.attempts[id] = append(m.attempts[id], a)
	if delivered {
		d.Status = store.DeliveryDelivered
	}
	return nil
}

func (m *memHooks) FailDelivery(_ context.Context, id, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deliveries[id].Status, m.deliveries[id].LastError = store.DeliveryFailed, reason
	return nil
}

// hookUnit is the webhook activities over memHooks, sending to a local
// receiver that verifies every signature.
type hookUnit struct {
	a     *activities.Delivery
	hooks *memHooks
	mu    sync.Mutex
	got   []activities.DeliveryPayload
	codes []int // what the receiver answers, in order, then 200
}

func newHookUnit(t *testing.T) *hookUnit {
	t.Helper()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	h := &hookUnit{hooks: newMemHooks()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			headers[k] = r.Header.Get(k)
		}
		if err := webhook.Verify(secret, headers, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p activities.DeliveryPayload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		code := http.StatusOK
		if len(h.codes) > 0 {
			code, h.codes = h.codes[0], h.codes[1:]
		}
		if code == http.StatusOK {
			h.got = append(h.got, p)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	h.hooks.endpoints["acme"] = store.Webhook{ID: "wh-1", Tenant: "acme", URL: srv.URL + "/hook", Secret: secret}
	h.a = &activities.Delivery{Hooks: h.hooks, Sender: webhook.NewSender(webhook.Policy{AllowHosts: []string{u.Host}})}
	return h
}

func (h *hookUnit) received() []activities.DeliveryPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]activities.DeliveryPayload(nil), h.got...)
}

// TestUnitPrepareDeliveries: a final run gets one delivery per endpoint
// and event ("run.<status>", or the event asked for, such as a
// promotion), the same one when asked again; a run of another tenant or
// one not final is refused.
func TestUnitPrepareDeliveries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHookUnit(t)
	h.hooks.runs["r1"] = store.Run{ID: "r1", Tenant: "acme", Session: "s1", Status: store.RunSucceeded}
	h.hooks.runs["live"] = store.Run{ID: "live", Tenant: "acme", Session: "s1", Status: store.RunRunning}

	ids, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1"})
	require.NoError(t, err)
	require.Len(t, ids, 1)
	require.Equal(t, "run.succeeded", h.hooks.deliveries[ids[0]].EventType)
	again, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1"})
	require.NoError(t, err)
	require.Equal(t, ids, again, "asking again prepares nothing new")

	promoted, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1", Event: contract.EventPromoted})
	require.NoError(t, err)
	require.Len(t, promoted, 1)
	require.NotEqual(t, ids[0], promoted[0], "a promotion is its own delivery")
	require.Equal(t, contract.EventPromoted, h.hooks.deliveries[promoted[0]].EventType)

	_, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "other", RunID: "r1"})
	require.ErrorContains(t, err, "not tenant other's")
	_, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "live"})
	require.ErrorContains(t, err, "not final")
}

// TestUnitDeliverWebhook: a delivery is signed (the receiver verifies it)
// and carries its event and the run's outcome; a refusal is an error for
// Temporal to retry, recorded as an attempt; a delivered one is not sent
// again; one to a deleted endpoint is failed without a POST.
func TestUnitDeliverWebhook(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHookUnit(t)
	h.hooks.runs["r1"] = store.Run{ID: "r1", Tenant: "acme", Session: "s1", EventID: "ev-1", Status: store.RunSucceeded,
		ReplayOf: "r0", TokensBefore: 100, TokensAfter: 40}
	ids, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1", Event: contract.EventPromoted})
	require.NoError(t, err)
	h.codes = []int{http.StatusInternalServerError}

	err = h.a.DeliverWebhook(ctx, ids[0])
	require.Error(t, err, "a 500 is retried")
	require.Empty(t, h.received())
	require.NoError(t, h.a.DeliverWebhook(ctx, ids[0]))
	got := h.received()
	require.Len(t, got, 2, "the run's final state goes first, then its promotion")
	require.Equal(t, "run.succeeded", got[0].Type)
	require.Equal(t, contract.EventPromoted, got[1].Type)
	require.Equal(t, "r1", got[1].Data.RunID)
	require.Equal(t, "r0", got[1].Data.ReplayOf)
	require.Equal(t, 40, got[1].Data.TokensAfter)
	require.Len(t, h.hooks.attempts["msg_r1_run.succeeded"], 2, "both attempts of the final event are logged")
	require.Len(t, h.hooks.attempts[ids[0]], 1, "the promotion was sent once its run's final state was accepted")

	require.NoError(t, h.a.DeliverWebhook(ctx, ids[0]))
	require.Len(t, h.received(), 2, "a delivered one is not sent again")

	h.hooks.runs["r2"] = store.Run{ID: "r2", Tenant: "acme", Session: "s1", Status: store.RunFailed}
	ids, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r2"})
	require.NoError(t, err)
	h.hooks.deleted["wh-1"] = true
	require.NoError(t, h.a.DeliverWebhook(ctx, ids[0]))
	require.Equal(t, store.DeliveryFailed, h.hooks.deliveries[ids[0]].Status)
	require.Len(t, h.received(), 2, "nothing is sent to a deleted endpoint")

	require.NoError(t, h.a.FailDelivery(ctx, ids[0], "given up"))
	require.Equal(t, "given up", h.hooks.deliveries[ids[0]].LastError)
}

// TestUnitPromotedAfterFinal: run.promoted never reaches an endpoint
// before the same run's final event, whichever delivery is prepared
// first. Promoted first (the run's own delivery not prepared yet): the
// final event is sent ahead of it, and the run's delivery, prepared
// later, finds it delivered and sends nothing twice. Final first and
// still failing: the promotion waits for it, without a POST of its
// own. Final failed for good: the promotion goes on.
func TestUnitPromotedAfterFinal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHookUnit(t)
	h.hooks.runs["r1"] = store.Run{ID: "r1", Tenant: "acme", Session: "s1", Status: store.RunSucceeded, ReplayOf: "r0"}
	promoted, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1", Event: contract.EventPromoted})
	require.NoError(t, err)
	require.NoError(t, h.a.DeliverWebhook(ctx, promoted[0]))
	final, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1"})
	require.NoError(t, err)
	require.Empty(t, final, "the run's own delivery finds its final event delivered")
	types := func() []string {
		var out []string
		for _, p := range h.received() {
			out = append(out, p.Type)
		}
		return out
	}
	require.Equal(t, []string{"run.succeeded", contract.EventPromoted}, types())

	h.hooks.runs["r2"] = store.Run{ID: "r2", Tenant: "acme", Session: "s1", Status: store.RunSucceeded, ReplayOf: "r0"}
	final, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r2"})
	require.NoError(t, err)
	h.codes = []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable}
	require.Error(t, h.a.DeliverWebhook(ctx, final[0]), "the endpoint is down")
	promoted, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r2", Event: contract.EventPromoted})
	require.NoError(t, err)
	require.Error(t, h.a.DeliverWebhook(ctx, promoted[0]), "the promotion waits for the final event")
	require.Empty(t, h.hooks.attempts[promoted[0]], "no POST of the promotion while its run's final event is pending")
	require.NoError(t, h.a.DeliverWebhook(ctx, promoted[0]))
	require.Equal(t, []string{"run.succeeded", contract.EventPromoted, "run.succeeded", contract.EventPromoted}, types())

	h.hooks.runs["r3"] = store.Run{ID: "r3", Tenant: "acme", Session: "s1", Status: store.RunSucceeded, ReplayOf: "r0"}
	final, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r3"})
	require.NoError(t, err)
	require.NoError(t, h.a.FailDelivery(ctx, final[0], "not accepted within 24h"))
	promoted, err = h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r3", Event: contract.EventPromoted})
	require.NoError(t, err)
	require.NoError(t, h.a.DeliverWebhook(ctx, promoted[0]))
	require.Len(t, h.received(), 5, "a final event failed for good no longer holds the promotion")
	require.Equal(t, contract.EventPromoted, h.received()[4].Type)
}

// TestUnitDeliveryErrorIsAClass: an attempt that gets no answer is
// logged for the tenant as its class (a refused port: "refused"), never
// with the transport's text, which names the address and port dialled;
// an answer that is not a 2xx is "http <code>".
func TestUnitDeliveryErrorIsAClass(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	host, port, err := net.SplitHostPort(closed)
	require.NoError(t, err)

	h := newHookUnit(t)
	h.hooks.runs["r1"] = store.Run{ID: "r1", Tenant: "acme", Session: "s1", Status: store.RunSucceeded}
	ids, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: "acme", RunID: "r1"})
	require.NoError(t, err)
	good := h.hooks.endpoints["acme"]
	refused := good
	refused.URL = "http://" + closed + "/hook"
	h.hooks.endpoints["acme"] = refused
	h.a.Sender = webhook.NewSender(webhook.Policy{AllowHosts: []string{closed}})

	err = h.a.DeliverWebhook(ctx, ids[0])
	require.Error(t, err, "a refused connection is retried")
	require.NotContains(t, err.Error(), host)
	att := h.hooks.attempts[ids[0]]
	require.Len(t, att, 1)
	require.Equal(t, webhook.ClassRefused, att[0].Error)
	require.Zero(t, att[0].Code)
	for _, leak := range []string{host, port, "dial", "connect"} {
		require.NotContains(t, att[0].Error, leak)
	}

	// The receiver answers 503: the class names the code.
	h.hooks.endpoints["acme"] = good
	u, err := url.Parse(good.URL)
	require.NoError(t, err)
	h.a.Sender = webhook.NewSender(webhook.Policy{AllowHosts: []string{u.Host}})
	h.codes = []int{http.StatusServiceUnavailable}
	require.Error(t, h.a.DeliverWebhook(ctx, ids[0]))
	att = h.hooks.attempts[ids[0]]
	require.Len(t, att, 2)
	require.Equal(t, "http 503", att[1].Error)
	require.Equal(t, http.StatusServiceUnavailable, att[1].Code)
}

// TestUnitDeliveryTenantSlots: with a tenant's slots taken by endpoints
// that accept and do not answer, its next delivery gives its activity
// slot back at once, as a retryable tenant_busy error asking to come back
// in 1–3 s and without an attempt in its log (no POST was made); another
// tenant's delivery goes through meanwhile, and the busy one goes through
// once a slot is free.
func TestUnitDeliveryTenantSlots(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHookUnit(t)
	h.a.DeliverySlots = ratelimit.NewSlots(2)

	// The slow tenant's receiver holds every request until unblock.
	arrived, unblock := make(chan struct{}, 8), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-unblock
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	})
	su, err := url.Parse(slow.URL)
	require.NoError(t, err)
	au, err := url.Parse(h.hooks.endpoints["acme"].URL)
	require.NoError(t, err)
	h.a.Sender = webhook.NewSender(webhook.Policy{AllowHosts: []string{su.Host, au.Host}})
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	h.hooks.endpoints["slow"] = store.Webhook{ID: "wh-slow", Tenant: "slow", URL: slow.URL + "/hook", Secret: secret}

	prepare := func(tenant, run string) string {
		h.hooks.runs[run] = store.Run{ID: run, Tenant: tenant, Session: "s1", Status: store.RunSucceeded}
		ids, err := h.a.PrepareDeliveries(ctx, contract.DeliveryInput{Tenant: tenant, RunID: run})
		require.NoError(t, err)
		require.Len(t, ids, 1)
		return ids[0]
	}
	var held sync.WaitGroup
	for i := range 2 {
		id := prepare("slow", fmt.Sprintf("slow-%d", i))
		held.Add(1)
		go func() {
			defer held.Done()
			_ = h.a.DeliverWebhook(context.WithoutCancel(ctx), id)
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow tenant's first two deliveries did not reach its receiver")
		}
	}
	require.Equal(t, 2, h.a.DeliverySlots.InFlight("slow"))

	busy := prepare("slow", "slow-2")
	start := time.Now()
	err = h.a.DeliverWebhook(ctx, busy)
	require.Less(t, time.Since(start), time.Second, "a busy tenant's delivery does not wait for a slot")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.TypeTenantBusy, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.GreaterOrEqual(t, appErr.NextRetryDelay(), time.Second)
	require.LessOrEqual(t, appErr.NextRetryDelay(), 3*time.Second)
	require.Empty(t, h.hooks.attempts[busy], "no attempt is logged for a delivery not sent")

	other := prepare("acme", "acme-1")
	require.NoError(t, h.a.DeliverWebhook(ctx, other), "another tenant is not held up by the slow one's slots")
	require.Len(t, h.received(), 1)

	close(unblock)
	held.Wait()
	require.Zero(t, h.a.DeliverySlots.InFlight("slow"), "slots are given back when an attempt ends")
	require.NoError(t, h.a.DeliverWebhook(ctx, busy), "with a slot free the delivery is sent")
	require.Len(t, h.hooks.attempts[busy], 1)
}
