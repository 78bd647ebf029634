package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// fairMode is one configuration measurement 11 runs: "before" is the
// worker as it was before issue 33 (deliveries and erasures on the task
// queue with the compactions, no per-tenant delivery bound, LLM slots
// first come first served, no admission per tenant); "after" is the
// deployment's defaults.
type fairMode struct {
	name string
	tune func(*config.Config)
	// apiLimit paces the flood's callers by the API's per-tenant limit
	// (TENANT_RATE_PER_SECOND, TENANT_BURST, TENANT_CONCURRENT at their
	// defaults), as a client posting as fast as it can over HTTP meets
	// it: a refused request waits its Retry-After and is sent again.
	// The flood only: the slow-webhook case does not run it.
	apiLimit bool
}

var fairModes = []fairMode{
	{name: "before", tune: func(c *config.Config) {
		c.DeliveryTaskQueue, c.EraseTaskQueue = c.TaskQueue, c.TaskQueue
		c.DeliveryTenantConcurrent, c.TenantFairness, c.LLMTenantTurns = 0, false, false
		c.TenantRunsInFlight = 0
	}},
	{name: "after", tune: func(*config.Config) {}},
	{name: "after-api-limit", tune: func(*config.Config) {}, apiLimit: true},
}

// Sizes of measurement 11.
const (
	fairAttackRuns     = 8 // × 10 hanging endpoints: more deliveries than the 32 slots
	fairAttackEnds     = 10
	fairVictimRuns     = 3
	fairEraseDeadline  = 4 * time.Minute
	fairDeliveryWaitAt = 3 * time.Minute
)

// benchFairness measures what one tenant's load costs another: (a) a
// quiet tenant posting one event a second, idle and while a flooding
// tenant posts o.fairFlood events as fast as it can; (b) a tenant's
// webhook delivery latency and session erasure time, idle and while
// another tenant's ten endpoints accept and never answer. Each in both
// fairModes, on scenarios of their own.
func benchFairness(ctx context.Context, st *stack, o options, rep *report) error {
	conv, err := chatFile(o.dataDir, criticalFile)
	if err != nil {
		return err
	}
	limit, err := contextLimit(pipelinePreset, conv, 1.0)
	if err != nil {
		return err
	}
	var modes []fairMode
	for _, m := range fairModes {
		if o.fairModes == nil || o.fairModes[m.name] {
			modes = append(modes, m)
		}
	}
	floods := map[string]floodResult{}
	for _, m := range modes {
		r, err := benchFlood(ctx, st, o, m, conv, limit)
		if err != nil {
			return fmt.Errorf("flood, %s: %w", m.name, err)
		}
		floods[m.name] = r
		rep.add(row{id: "11", name: fmt.Sprintf("Fairness, %s: quiet tenant (1 event/s) while another posts %d events at once over %d sessions", m.name, r.flood, o.fairSessions),
			value: fmt.Sprintf("quiet p50 %s, p99 %s (%d runs), admission wait p99 %s, max %s; flood drained in %s (%.1f runs/s, first run final after %s)",
				ms(percentile(r.loaded, 50)), ms(percentile(r.loaded, 99)), len(r.loaded), ms(percentile(r.admitWait, 99)), ms(percentile(r.admitWait, 100)),
				r.drain.Round(100*time.Millisecond), float64(r.flood)/r.drain.Seconds(), ms(r.firstFlood)),
			compared: fmt.Sprintf("quiet idle p50 %s, p99 %s (%d runs)", ms(percentile(r.idle, 50)), ms(percentile(r.idle, 99)), len(r.idle)),
			ratio:    fmt.Sprintf("p99 %.2f×", r.ratio()),
			target:   "p99 ≤ 2×, admission wait < 1 s", met: metIf(r.ratio() <= 2 && percentile(r.admitWait, 100) < time.Second)})
	}
	for _, m := range modes {
		if m.apiLimit {
			continue
		}
		r, err := benchSlowHooks(ctx, st, o, m, conv, limit)
		if err != nil {
			return fmt.Errorf("slow webhooks, %s: %w", m.name, err)
		}
		rep.add(row{id: "11", name: fmt.Sprintf("Fairness, %s: another tenant's %d endpoints accept and never answer (%d deliveries)", m.name, fairAttackEnds, fairAttackRuns*fairAttackEnds),
			value: fmt.Sprintf("delivery after the run p50 %s, max %s; erasure %s; run p50 %s",
				ms(percentile(r.loadedHook, 50)), ms(percentile(r.loadedHook, 100)), r.eraseText(), ms(percentile(r.loadedRun, 50))),
			compared: fmt.Sprintf("idle: delivery p50 %s, max %s; erasure %s; run p50 %s",
				ms(percentile(r.idleHook, 50)), ms(percentile(r.idleHook, 100)), ms(r.idleErase), ms(percentile(r.idleRun, 50))),
			ratio:  fmt.Sprintf("delivery max %.1f×", percentile(r.loadedHook, 100).Seconds()/max(percentile(r.idleHook, 100).Seconds(), 0.001)),
			target: "delivery < 10 s (one hanging attempt), erasure < 60 s", met: metIf(percentile(r.loadedHook, 100) < webhook.Timeout && r.erased && r.erase < time.Minute)})
	}
	rep.note("11. Fairness between tenants (issue 33): each mode on a worker of its own with the deployment's slots (WORKER_ACTIVITIES 32, "+
		"LLM_PARALLELISM 8, summarizer %s per call, %s on %s). `before` is the worker of before: deliveries and erasures on the task queue "+
		"with the compactions, no per-tenant delivery bound, the LLM worker taking in LLM_PARALLELISM calls first in, first out. "+
		"`after` is the defaults: deliveries and erasures on queues of their own (16 and 8 slots), at most 4 deliveries "+
		"of one tenant in flight per worker, the LLM worker taking in 8× LLM_PARALLELISM calls and giving its slots to the tenants in "+
		"turn (LLM_TENANT_TURNS), at most %d runs of one tenant in flight (TENANT_RUNS_IN_FLIGHT; 0: no bound), the others waiting "+
		"for admission in their session workflows. Flood: one tenant submits its events over %d sessions as fast "+
		"as 16 callers can (through the gateway: not the API's per-tenant limit, except in `after-api-limit`, "+
		"where each call first passes that limiter at its defaults, %.0f/s with a burst of %d, waiting its Retry-After when refused, "+
		"as a client posting over HTTP does) while the quiet tenant submits one event a second, each in a "+
		"session of its own, until the flood drained; idle is the same quiet series with nothing else running. Slow webhooks: the "+
		"attacker's %d runs each tell %d endpoints that accept and never answer (each attempt held for the sender's %s), then the victim "+
		"makes %d runs whose delivery to an endpoint answering at once is timed from the run's end, then erases a session.",
		ms(o.llmLatency), pipelinePreset, shortName(criticalFile), st.cfg.TenantRunsInFlight, o.fairSessions,
		st.cfg.TenantRatePerSecond, st.cfg.TenantBurst, fairAttackRuns, fairAttackEnds, webhook.Timeout, fairVictimRuns)
	return nil
}

// floodResult is one mode's flood.
type floodResult struct {
	flood        int
	idle, loaded []time.Duration
	drain        time.Duration
	firstFlood   time.Duration
	// admitWait is each loaded quiet run's wait from its claim to its
	// admission (runs.started_at to admitted_at): its session
	// workflow's first task, behind the flood's in the task queue, and
	// the Admit step.
	admitWait []time.Duration
}

func (r floodResult) ratio() float64 {
	return percentile(r.loaded, 99).Seconds() / max(percentile(r.idle, 99).Seconds(), 0.001)
}

// quietSeries submits one quiet-tenant event a second until stop is
// closed (or n events when stop is nil) and returns their latencies.
func quietSeries(ctx context.Context, sc *scenario, conv []byte, limit int, tenant, prefix string, n int, stop <-chan struct{}) ([]time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; stop != nil || i < n; i++ {
		in, err := withTail(conv, fmt.Sprintf("Please continue (%s %d).", prefix, i))
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := sc.compact(ctx, gateway.Event{Tenant: tenant, Session: fmt.Sprintf("%s-%d", prefix, i), EventID: "0",
				Kind: gateway.KindThreshold, Model: agentModel, ContextLimit: limit, Preset: pipelinePreset, Conversation: in})
			mu.Lock()
			defer mu.Unlock()
			if out.err != nil && firstErr == nil {
				firstErr = out.err
			}
			lat = append(lat, out.latency)
			if verbose && out.latency > 2*time.Second {
				// Where a slow quiet run falls in the series, for reading
				// the tail against the flood's phases.
				fmt.Fprintf(os.Stderr, "bench:   %s quiet run %d (%s) took %s, submitted at %s\n", prefix, i, out.runID,
					ms(out.latency), out.start.Format("15:04:05.000"))
			}
		}()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			stop, n = nil, 0
		case <-tick.C:
		}
	}
	wg.Wait()
	return lat, firstErr
}

// benchFlood runs the quiet series idle, then during a flood.
func benchFlood(ctx context.Context, st *stack, o options, m fairMode, conv []byte, limit int) (floodResult, error) {
	sc, err := st.newScenarioWith("fair-flood-"+m.name, false, m.tune, llmtest.WithLatency(o.llmLatency))
	if err != nil {
		return floodResult{}, err
	}
	defer sc.close()
	r := floodResult{flood: o.fairFlood}
	if r.idle, err = quietSeries(ctx, sc, conv, limit, "quiet-"+m.name, "idle", o.fairIdle, nil); err != nil {
		return r, err
	}
	// The flood: every event submitted as fast as 16 callers can, then
	// waited for.
	start := time.Now()
	runIDs := make([]string, o.fairFlood)
	var submitErr error
	var mu sync.Mutex
	stop := make(chan struct{})
	quiet := make(chan struct{})
	var quietLat []time.Duration
	var quietErr error
	go func() {
		defer close(quiet)
		quietLat, quietErr = quietSeries(ctx, sc, conv, limit, "quiet-"+m.name, "loaded", 0, stop)
	}()
	var limiter *ratelimit.Tenants
	if m.apiLimit {
		limiter = ratelimit.NewTenants(ratelimit.Limits{RatePerSecond: st.cfg.TenantRatePerSecond, Burst: st.cfg.TenantBurst,
			Concurrent: st.cfg.TenantConcurrent})
	}
	forEach(o.fairFlood, 16, func(i int) {
		in, err := withTail(conv, fmt.Sprintf("Flood %d.", i))
		release := func() {}
		for limiter != nil && err == nil {
			rel, refused := limiter.Acquire("flood-" + m.name)
			if refused == nil {
				release = rel
				break
			}
			var r *ratelimit.Refusal
			if !errors.As(refused, &r) {
				err = refused
				break
			}
			if !sleepCtx(ctx, r.RetryAfter) {
				err = ctx.Err()
			}
		}
		if err == nil {
			var sub gateway.Submitted
			sub, err = sc.gw.Submit(ctx, gateway.Event{Tenant: "flood-" + m.name, Session: fmt.Sprintf("flood-%d", i%o.fairSessions),
				EventID: fmt.Sprintf("flood-%d", i), Kind: gateway.KindThreshold, Model: agentModel, ContextLimit: limit,
				Preset: pipelinePreset, Conversation: in})
			runIDs[i] = sub.RunID
		}
		release()
		if err != nil {
			mu.Lock()
			submitErr = err
			mu.Unlock()
		}
	})
	if submitErr != nil {
		close(stop)
		<-quiet
		return r, fmt.Errorf("flood submit: %w", submitErr)
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "bench:   fairness %s: flood of %d submitted from %s to %s\n", m.name, o.fairFlood,
			start.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
	}
	var first time.Time
	var failed int
	var firstErr error
	// Each wait is bounded by the flood's own size at a run a second
	// (10 minutes at least): a long flood's last runs end well after
	// the first waits began.
	waitFor := max(10*time.Minute, time.Duration(o.fairFlood)*time.Second)
	forEach(len(runIDs), 32, func(i int) {
		wctx, cancel := context.WithTimeout(ctx, waitFor)
		defer cancel()
		_, err := sc.gw.Wait(wctx, runIDs[i])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("run %s: %w", runIDs[i], err)
			}
			return
		}
		if now := time.Now(); first.IsZero() || now.Before(first) {
			first = now
		}
	})
	r.drain = time.Since(start)
	r.firstFlood = first.Sub(start)
	close(stop)
	<-quiet
	r.loaded = quietLat
	if r.admitWait, err = admissionWaits(ctx, st, "quiet-"+m.name, "loaded-"); err != nil {
		return r, err
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "bench:   fairness %s: flood of %d drained in %s (%d failed); quiet idle p99 %s, loaded p99 %s over %d runs\n",
			m.name, o.fairFlood, r.drain.Round(time.Second), failed, ms(percentile(r.idle, 99)), ms(percentile(r.loaded, 99)), len(r.loaded))
	}
	if failed > 0 {
		return r, fmt.Errorf("%d flood runs did not end; the first: %w", failed, firstErr)
	}
	return r, quietErr
}

// admissionWaits are the waits from claim to admission of tenant's runs
// in sessions named with prefix.
func admissionWaits(ctx context.Context, st *stack, tenant, prefix string) ([]time.Duration, error) {
	rows, err := st.store.Pool().Query(ctx, `select extract(epoch from admitted_at - started_at) from runs
		where tenant_id = $1 and session_id like $2 || '%' and admitted_at is not null`, tenant, prefix)
	if err != nil {
		return nil, fmt.Errorf("admission waits: %w", err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var s float64
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("admission waits: %w", err)
		}
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out, rows.Err()
}

// slowHookResult is one mode's slow-webhook case.
type slowHookResult struct {
	idleHook, loadedHook []time.Duration
	idleRun, loadedRun   []time.Duration
	idleErase, erase     time.Duration
	erased               bool
}

func (r slowHookResult) eraseText() string {
	if !r.erased {
		return "not done after " + fairEraseDeadline.String()
	}
	return ms(r.erase)
}

// hookReceiver answers every delivery at once and notes when each run's
// arrived.
type hookReceiver struct {
	mu   sync.Mutex
	hits map[string]time.Time
	cond chan struct{}
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Data struct {
			RunID string `json:"run_id"`
		} `json:"data"`
	}
	_ = json.NewDecoder(r.Body).Decode(&p)
	h.mu.Lock()
	if _, ok := h.hits[p.Data.RunID]; !ok {
		h.hits[p.Data.RunID] = time.Now()
	}
	h.mu.Unlock()
}

// wait is when run's delivery arrived, waiting up to fairDeliveryWaitAt.
func (h *hookReceiver) wait(ctx context.Context, run string) (time.Time, error) {
	deadline := time.Now().Add(fairDeliveryWaitAt)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		h.mu.Lock()
		at, ok := h.hits[run]
		h.mu.Unlock()
		if ok {
			return at, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("run %s's delivery did not arrive within %s", run, fairDeliveryWaitAt)
}

// hangingListeners are n endpoints that accept and never answer, until
// closed.
func hangingListeners(n int) ([]net.Listener, error) {
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range ls {
				_ = l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
		go func() {
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					_ = c.Close()
				}
			}()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
				go func() { _, _ = io.Copy(io.Discard, c) }()
			}
		}()
	}
	return ls, nil
}

// benchSlowHooks times the victim's deliveries and erasure idle, then
// while the attacker's deliveries hang.
func benchSlowHooks(ctx context.Context, st *stack, o options, m fairMode, conv []byte, limit int) (slowHookResult, error) {
	var r slowHookResult
	hanging, err := hangingListeners(fairAttackEnds)
	if err != nil {
		return r, err
	}
	defer func() {
		for _, l := range hanging {
			_ = l.Close()
		}
	}()
	vl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	recv := &hookReceiver{hits: map[string]time.Time{}}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(vl) }()
	defer srv.Close()
	allow := []string{vl.Addr().String()}
	for _, l := range hanging {
		allow = append(allow, l.Addr().String())
	}
	sc, err := st.newScenarioWith("fair-hooks-"+m.name, false, func(c *config.Config) {
		m.tune(c)
		c.WebhookAllowHosts = allow
	}, llmtest.WithLatency(o.llmLatency))
	if err != nil {
		return r, err
	}
	defer sc.close()
	victim, attacker := "victim-"+m.name, "attacker-"+m.name
	addHook := func(tenant, url string) error {
		secret, err := webhook.NewSecret()
		if err != nil {
			return err
		}
		_, _, err = st.store.AddWebhook(ctx, tenant, url, "bench", secret)
		return err
	}
	if err := addHook(victim, "http://"+vl.Addr().String()+"/hook"); err != nil {
		return r, err
	}
	for _, l := range hanging {
		if err := addHook(attacker, "http://"+l.Addr().String()+"/hook"); err != nil {
			return r, err
		}
	}
	victimRuns := func(prefix string, n int) (runs, hooks []time.Duration, err error) {
		for i := range n {
			in, err := withTail(conv, fmt.Sprintf("Please continue (%s %d).", prefix, i))
			if err != nil {
				return nil, nil, err
			}
			out := sc.compact(ctx, gateway.Event{Tenant: victim, Session: fmt.Sprintf("%s-%d", prefix, i), EventID: "0",
				Kind: gateway.KindThreshold, Model: agentModel, ContextLimit: limit, Preset: pipelinePreset, Conversation: in})
			if out.err != nil {
				return nil, nil, out.err
			}
			at, err := recv.wait(ctx, out.runID)
			if err != nil {
				return nil, nil, err
			}
			runs, hooks = append(runs, out.latency), append(hooks, at.Sub(out.end))
		}
		return runs, hooks, nil
	}
	erase := func(session string) (time.Duration, bool, error) {
		start := time.Now()
		e, _, err := sc.gw.EraseSession(ctx, victim, session, "bench")
		if err != nil {
			return 0, false, err
		}
		for time.Since(start) < fairEraseDeadline {
			got, err := st.store.GetErasure(ctx, victim, e.ID)
			if err != nil {
				return 0, false, err
			}
			if !got.FinishedAt.IsZero() {
				return time.Since(start), true, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start), false, nil
	}
	if r.idleRun, r.idleHook, err = victimRuns("idle", fairVictimRuns); err != nil {
		return r, err
	}
	if r.idleErase, _, err = erase("idle-0"); err != nil {
		return r, err
	}
	// The attack: its runs end at once and their deliveries hang.
	for i := range fairAttackRuns {
		in, err := withTail(conv, fmt.Sprintf("Attack %d.", i))
		if err != nil {
			return r, err
		}
		out := sc.compact(ctx, gateway.Event{Tenant: attacker, Session: fmt.Sprintf("attack-%d", i), EventID: "0",
			Kind: gateway.KindThreshold, Model: agentModel, ContextLimit: limit, Preset: pipelinePreset, Conversation: in})
		if out.err != nil {
			return r, out.err
		}
	}
	time.Sleep(time.Second) // the deliveries take their slots
	if r.loadedRun, r.loadedHook, err = victimRuns("loaded", fairVictimRuns); err != nil {
		return r, err
	}
	r.erase, r.erased, err = erase("loaded-0")
	if verbose {
		fmt.Fprintf(os.Stderr, "bench:   fairness %s: victim delivery idle max %s, under the attack max %s; erasure idle %s, under it %s\n",
			m.name, ms(percentile(r.idleHook, 100)), ms(percentile(r.loadedHook, 100)), ms(r.idleErase), r.eraseText())
	}
	return r, err
}

// sleepCtx sleeps d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
