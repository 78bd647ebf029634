package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startHangingEndpoints starts n webhook endpoints that accept
// connections and never answer, as the attack's ten endpoints did, and
// returns their URLs and, across them all, the connections open now, the
// most ever open at once, and when the first one closed (the sender gave
// up on an attempt, freeing its slot).
func startHangingEndpoints(t *testing.T, n int) (urls []string, openNow func() int, peak func() int, firstClosed func() time.Time) {
	t.Helper()
	var mu sync.Mutex
	var open, most int
	var closed time.Time
	for range n {
		ln := takeHookListener(t)
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				open++
				most = max(most, open)
				mu.Unlock()
				go func() {
					// Read the request and whatever follows until the
					// sender closes the connection; answer nothing.
					_, _ = io.Copy(io.Discard, c)
					_ = c.Close()
					mu.Lock()
					open--
					if closed.IsZero() {
						closed = time.Now()
					}
					mu.Unlock()
				}()
			}
		}()
		urls = append(urls, fmt.Sprintf("http://%s/hook", ln.Addr()))
	}
	locked := func(f func() int) func() int {
		return func() int { mu.Lock(); defer mu.Unlock(); return f() }
	}
	return urls, locked(func() int { return open }), locked(func() int { return most }), func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return closed
	}
}

// TestHangingWebhooksDoNotHoldAnotherTenant is the attack of issue 33:
// one tenant registers ten endpoints that accept and never answer and
// makes runs whose deliveries hang, each attempt for the sender's
// timeout. The worker here has 4 delivery slots and lets a tenant hold 2
// (DELIVERY_ACTIVITIES, DELIVERY_TENANT_CONCURRENT). The attacker never
// holds more than its share; another tenant's redelivery reaches its
// receiver before any of the attacker's attempts has ended (so it did not
// wait for one of their slots), and its session's erasure, on the
// erasure queue, ends while the attack goes on.
func TestHangingWebhooksDoNotHoldAnotherTenant(t *testing.T) {
	t.Parallel()
	const slots, perTenant = 4, 2
	a := newAPIEnv(t, noWorker())
	a.deps.Config.DeliveryActivities, a.deps.Config.DeliveryTenantConcurrent = slots, perTenant
	a.startWorker()

	// The victim's endpoint answers at once and notes when.
	victimHits := make(chan time.Time, 16)
	l := takeHookListener(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		victimHits <- time.Now()
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	resp, body := a.call("POST", "/v1/webhooks", a.key, []byte(fmt.Sprintf(`{"url":"http://%s/hook"}`, l.Addr())), nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	victimRun := a.postRun("ev-victim-1")
	d := a.deliveriesWhen(victimRun, delivered)[0]
	<-victimHits

	urls, openNow, peak, firstClosed := startHangingEndpoints(t, 10)
	for _, u := range urls {
		resp, body := a.call("POST", "/v1/webhooks", a.otherKey, []byte(`{"url":"`+u+`"}`), nil)
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	}
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	for i := range 3 {
		resp, body := a.call("POST", "/v1/sessions/attack/events", a.otherKey,
			eventBody(map[string]any{"event_id": fmt.Sprintf("ev-attack-%d", i), "model": "gpt-4o", "wait_seconds": 60}, input), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	require.Eventually(t, func() bool { return openNow() == perTenant }, time.Minute, 50*time.Millisecond,
		"the attacker's deliveries hold their %d slots", perTenant)
	attackStarted := time.Now()

	// The victim's redelivery: a new delivery workflow, on the same
	// delivery queue the attacker's hang on.
	resp, body = a.call("POST", "/v1/deliveries/"+d.ID+"/redeliver", a.key, nil, nil)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	var hit time.Time
	select {
	case hit = <-victimHits:
	case <-time.After(2 * time.Minute):
		t.Fatal("the victim's redelivery never arrived")
	}
	closed := firstClosed()
	require.True(t, closed.IsZero() || hit.Before(closed),
		"the victim's delivery arrived %s after the attack started, after an attacker attempt ended (%s): it waited for an attacker's slot",
		hit.Sub(attackStarted), closed.Sub(attackStarted))
	t.Logf("victim's redelivery arrived %s after the attacker held its slots", hit.Sub(attackStarted).Round(time.Millisecond))

	// The erasure runs on its own queue: it ends while the attacker's
	// deliveries still hang.
	start := time.Now()
	e := a.erase("s1")
	require.Equal(t, "erased", e.Status)
	require.Less(t, time.Since(start), time.Minute, "the victim's erasure waited behind the attacker's deliveries")
	require.Positive(t, openNow(), "the attack was still on while the erasure ran")
	t.Logf("victim's erasure took %s under the attack", time.Since(start).Round(time.Millisecond))

	require.LessOrEqual(t, peak(), perTenant+1,
		"the attacker had %d deliveries in flight at once, its share is %d (one more: a closed attempt not yet seen closed)", peak(), perTenant)
	require.Less(t, peak(), slots, "the attacker never held every delivery slot")
}
