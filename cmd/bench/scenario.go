package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// tenant is the one tenant of the bench; session names keep phases apart.
const tenant = "bench"

// runTimeout bounds one run; a run that takes longer counts as failed.
const runTimeout = 5 * time.Minute

// bareWorkflowName is the no-work workflow of the orchestration ceiling.
const bareWorkflowName = "bench-bare"

// bareWorkflow does nothing: it is what Temporal costs on its own.
func bareWorkflow(workflow.Context) error { return nil }

// scenario is one worker, on its own task queue, whose summarizer is an
// OpenAI-compatible test server with the scenario's latency and faults.
type scenario struct {
	name   string
	queue  string
	llm    *llmtest.Server
	calls  *callLog
	gw     *gateway.Gateway
	worker app.Workers
}

var queueSeq atomic.Int64

// newScenario starts a worker with the deployment's settings
// (WORKER_ACTIVITIES, LLM_PARALLELISM) and the given test server options.
func (s *stack) newScenario(name string, llmOpts ...llmtest.Option) (*scenario, error) {
	return s.newScenarioWith(name, false, nil, llmOpts...)
}

// newOfflineScenario is a scenario whose summarizer is the product's
// offline one (offline.Summarizer), as a deployment without OPENAI_BASE_URL
// runs; its test server answers nothing.
func (s *stack) newOfflineScenario(name string) (*scenario, error) {
	return s.newScenarioWith(name, true, nil)
}

// newScenarioWith is a scenario whose configuration tune adjusts (nil:
// the deployment's) after its queues are named.
func (s *stack) newScenarioWith(name string, useOffline bool, tune func(*config.Config), llmOpts ...llmtest.Option) (*scenario, error) {
	srv := llmtest.New(llmOpts...)
	model := s.cfg.SummarizerModel
	var oa llm.Summarizer = offline.Summarizer{}
	if !useOffline {
		var err error
		oa, err = llm.NewOpenAI(llm.Config{BaseURL: srv.URL(), APIKey: "bench-key", Model: model, Timeout: s.cfg.LLMTimeout})
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("summarizer for %s: %w", name, err)
		}
	}
	calls := &callLog{byRun: map[string][]interval{}}
	queue := fmt.Sprintf("bench-%d-%s", queueSeq.Add(1), name)
	// The deployment's wiring (app.Deps: activities, both workers with
	// WORKER_ACTIVITIES, LLM_PARALLELISM and LLM_RATE_PER_SECOND, the
	// gateway) on this scenario's queues, with the summarizer timed and
	// every activity attempt counted.
	cfg := s.cfg
	cfg = cfg.OnTaskQueue(queue)
	// The bench submits the same conversations again and again, some of
	// them under their limit; the loop breaker, there to stop an agent
	// that does so, would refuse them.
	cfg.BreakerRuns = 0
	if tune != nil {
		tune(&cfg)
	}
	deps := &app.Deps{Config: cfg, Store: s.store, Blob: s.blob, Summarizer: &timedSummarizer{inner: oa, log: calls},
		Limits: tokens.DefaultLimits()}
	ws := deps.NewWorkers(s.client, s.activities)
	ws.Main.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: bareWorkflowName})
	registerSkeleton(ws.Main, ws.LLM)
	if err := ws.Start(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("start workers for %s: %w", name, err)
	}
	return &scenario{name: name, queue: queue, llm: srv, calls: calls, worker: ws, gw: deps.Gateway(s.client)}, nil
}

func (sc *scenario) close() {
	sc.worker.Stop()
	sc.llm.Close()
}

// outcome is one run as a caller sees it.
type outcome struct {
	runID   string
	start   time.Time
	end     time.Time
	res     contract.Outcome
	err     error
	latency time.Duration
}

// compact submits an event and waits for its run through the gateway, as
// the API and the CLI do. Event ids are unique per tenant, so the session
// is put in front of the caller's id.
func (sc *scenario) compact(ctx context.Context, ev gateway.Event) outcome {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if ev.Tenant == "" {
		ev.Tenant = tenant
	}
	ev.EventID = ev.Session + "/" + ev.EventID
	o := outcome{start: time.Now()}
	sub, err := sc.gw.Submit(ctx, ev)
	if err != nil {
		o.err = fmt.Errorf("submit: %w", err)
		o.end = time.Now()
		o.latency = o.end.Sub(o.start)
		return o
	}
	o.runID = sub.RunID
	if sub.Existing {
		// The gateway answered with an earlier run of the same event: the
		// bench reused an event id, and this run would cost nothing.
		o.err = fmt.Errorf("event %s was submitted before (run %s)", ev.EventID, sub.RunID)
		o.end = time.Now()
		o.latency = o.end.Sub(o.start)
		return o
	}
	o.res, err = sc.gw.Wait(ctx, sub.RunID)
	if err != nil {
		o.err = fmt.Errorf("run %s: %w", sub.RunID, err)
	}
	o.end = time.Now()
	o.latency = o.end.Sub(o.start)
	return o
}

// interval is one summarizer call.
type interval struct{ start, end time.Time }

// callLog records the summarizer calls of every run.
type callLog struct {
	mu    sync.Mutex
	byRun map[string][]interval
}

func (l *callLog) add(run string, iv interval) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byRun[run] = append(l.byRun[run], iv)
}

// busy is the time during which at least one summarizer call of the run
// was in flight: the summarizer's share of the run's critical path (calls
// made in parallel count once).
func (l *callLog) busy(run string) (time.Duration, int) {
	l.mu.Lock()
	ivs := append([]interval(nil), l.byRun[run]...)
	l.mu.Unlock()
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
	var total time.Duration
	var curStart, curEnd time.Time
	for i, iv := range ivs {
		if i == 0 || iv.start.After(curEnd) {
			total += curEnd.Sub(curStart)
			curStart, curEnd = iv.start, iv.end
			continue
		}
		if iv.end.After(curEnd) {
			curEnd = iv.end
		}
	}
	total += curEnd.Sub(curStart)
	return total, len(ivs)
}

// timedSummarizer times every call of the real OpenAI client and files it
// under the run (the compaction workflow's id is the run id).
type timedSummarizer struct {
	inner llm.Summarizer
	log   *callLog
}

// Summarize calls the wrapped summarizer and records how long it took.
func (t *timedSummarizer) Summarize(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp, err := t.inner.Summarize(ctx, req)
	run := ""
	if activity.IsActivity(ctx) {
		run = activity.GetInfo(ctx).WorkflowExecution.ID
	}
	t.log.add(run, interval{start: start, end: time.Now()})
	return resp, err
}

// activityInfo names the activity type of ctx, "" outside activities.
func activityInfo(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).ActivityType.Name
}
