package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// TestTenantRunsInFlight is admission on the real stack: one tenant's 8
// events in 8 sessions, submitted at once under TENANT_RUNS_IN_FLIGHT=2,
// never have more than 2 runs in flight, all end, the waiting ones being
// admitted by the runs that ended (handing their slots on); another tenant's event,
// submitted after the flood, is admitted at once and ends before it.
func TestTenantRunsInFlight(t *testing.T) {
	t.Parallel()
	const bound, flood = 2, 8
	e := newEnv(t, withRunsInFlight(bound), withLLM(llmtest.WithLatency(200*time.Millisecond)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	quiet := "quiet-" + e.tenant

	// The tenant's runs in flight, sampled until the flood ends.
	var mu sync.Mutex
	peak, waited := 0, 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var live, waiting int
			err := e.store.Pool().QueryRow(ctx, `select
				count(*) filter (where status = 'running' or (status = 'pending' and admitted_at is not null)),
				count(*) filter (where status = 'pending' and admission_asked_at is not null and admitted_at is null)
				from runs where tenant_id = $1`, e.tenant).Scan(&live, &waiting)
			if err == nil {
				mu.Lock()
				peak, waited = max(peak, live), max(waited, waiting)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	var subs []gateway.Submitted
	for i := range flood {
		sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: fmt.Sprintf("flood-%d", i), EventID: "ev-0",
			Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	qsub, err := e.gw.Submit(ctx, gateway.Event{Tenant: quiet, Session: "q", EventID: "ev-0",
		Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	require.NoError(t, err)
	_, err = e.gw.Wait(ctx, qsub.RunID)
	require.NoError(t, err)
	quietDone := time.Now()
	var lastFlood time.Time
	for _, sub := range subs {
		res, err := e.gw.Wait(ctx, sub.RunID)
		require.NoError(t, err)
		checkRun(t, e, input, sub, res)
		lastFlood = time.Now()
	}
	close(stop)
	<-sampled
	require.Equal(t, bound, peak, "the tenant's runs in flight reach the bound and never pass it")
	require.Positive(t, waited, "some of the flood waited for admission")
	require.True(t, quietDone.Before(lastFlood), "the other tenant's run did not wait for the flood")
	var quietWait time.Duration
	require.NoError(t, e.store.Pool().QueryRow(ctx, `select coalesce(admitted_at - admission_asked_at, '0')
		from runs where id = $1`, qsub.RunID).Scan(&quietWait))
	require.Zero(t, quietWait, "the other tenant's run was admitted when it asked")
}
