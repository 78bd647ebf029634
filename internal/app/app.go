// Package app wires the configuration into the dependencies that the
// worker and the starter share: Postgres, S3, the summarizer and the
// Temporal client and worker.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
	"github.com/ctxcompact/orchestrator/internal/webhook"
	"github.com/ctxcompact/orchestrator/workflows"
)

// Deps are the opened dependencies. Close releases them.
type Deps struct {
	Config     config.Config
	Store      *store.Store
	Blob       *blob.Store
	Summarizer llm.Summarizer
	Limits     tokens.Limits
	// Metrics are the process's Prometheus metrics (the product's and the
	// Temporal SDK's).
	Metrics *metrics.Metrics
	// ProviderTokens counts Claude runs' outputs with Anthropic's
	// endpoint (nil without ANTHROPIC_API_KEY).
	ProviderTokens tokens.ProviderCounter
}

// OpenStore opens Postgres only (migrated as Open does): the read-only
// commands (runs, show, status, export, API keys, webhooks) need nothing
// else, so they run without S3 credentials. Deps.Blob is nil.
func OpenStore(ctx context.Context, cfg config.Config) (*Deps, error) {
	if err := migrate(ctx, cfg); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if cfg.MigrateDatabaseURL == "" {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrate postgres: %w", err)
		}
	}
	return &Deps{Config: cfg, Store: st}, nil
}

// Open connects to Postgres (applying migrations), S3 (creating the bucket
// if missing) and builds the summarizer: offline extractive when no
// OPENAI_BASE_URL is set.
func Open(ctx context.Context, cfg config.Config) (*Deps, error) {
	return openDeps(ctx, cfg, startup{})
}

// openDeps is Open with each dependency opened as st says: once, or
// again until it answers (StartWaiting).
func openDeps(ctx context.Context, cfg config.Config, st startup) (*Deps, error) {
	limits, err := cfg.TokenLimits()
	if err != nil {
		return nil, &invalidConfig{err}
	}
	provider, err := cfg.ProviderTokens()
	if err != nil {
		return nil, &invalidConfig{err}
	}
	var d *Deps
	if err := st.do(ctx, func(ctx context.Context) (err error) {
		d, err = OpenStore(ctx, cfg)
		return err
	}); err != nil {
		return nil, err
	}
	var bl *blob.Store
	if err := st.do(ctx, func(ctx context.Context) error {
		b, err := blob.New(ctx, blob.Config{
			Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket,
			AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey, PathStyle: cfg.S3PathStyle,
			CacheBytes: int64(cfg.BlobCacheMB) << 20,
		})
		if err != nil {
			return &invalidConfig{fmt.Errorf("open s3: %w", err)}
		}
		if err := b.EnsureBucket(ctx); err != nil {
			return fmt.Errorf("s3 bucket %s: %w", cfg.S3Bucket, err)
		}
		bl = b
		return nil
	}); err != nil {
		d.Close()
		return nil, err
	}
	sum, err := NewSummarizer(llm.Config{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey, Model: cfg.SummarizerModel, Timeout: cfg.LLMTimeout})
	if err != nil {
		d.Close()
		return nil, &invalidConfig{fmt.Errorf("summarizer: %w", err)}
	}
	d.Blob, d.Summarizer, d.Limits, d.Metrics, d.ProviderTokens = bl, sum, limits, metrics.New(), provider
	return d, nil
}

// NewSummarizer returns the offline summarizer (offline.Summarizer) when
// cfg.BaseURL is empty, else the client of the OpenAI-compatible endpoint.
func NewSummarizer(cfg llm.Config) (llm.Summarizer, error) {
	if cfg.BaseURL == "" {
		return offline.Summarizer{}, nil
	}
	return llm.NewOpenAI(cfg)
}

// Activities builds the activity structs over the dependencies, each
// with only the ports it uses.
func (d *Deps) Activities() activities.Set {
	return activities.Set{
		Compaction: &activities.Activities{
			Store: d.Store, Blob: d.Blob, Summarizer: d.Summarizer, Limits: d.Limits,
			SummarizerModel:   d.Config.SummarizerModel,
			LLMSlots:          make(chan struct{}, max(d.Config.LLMParallelism, 1)),
			Metrics:           d.Metrics,
			Hooks:             d.Store,
			KeepIntermediates: d.Config.KeepIntermediates,
			Prices:            d.Config.Prices,
			CostTurns:         d.Config.CostTurns,
			ProviderTokens:    d.ProviderTokens,
		},
		Erasure: &activities.Erasure{Erasures: d.Store, Retention: d.Store, Blob: d.Blob},
		Delivery: &activities.Delivery{Hooks: d.Store,
			Sender:        webhook.NewSender(webhook.Policy{AllowHosts: d.Config.WebhookAllowHosts}),
			DeliverySlots: ratelimit.NewSlots(d.Config.DeliveryTenantConcurrent)},
		Admission: &activities.Admission{Store: d.Store, TenantRunsInFlight: d.Config.TenantRunsInFlight, Metrics: d.Metrics},
	}
}

// Workers are the workers of a process: Main polls the task queue
// (sessions, compactions and their S3/Postgres steps), LLM the LLM task
// queue (summarizer calls, under the queue's rate limit), Deliveries the
// delivery queue (webhook deliveries) and Erasures the erasure queue
// (session erasures, retention sweeps). Each has slots of its own, so a
// flood of deliveries to receivers that never answer takes none of the
// slots compactions and erasures need.
type Workers struct {
	Main, LLM, Deliveries, Erasures worker.Worker
	// Activities are the activities every worker runs.
	Activities activities.Set
	// StopTimeout bounds Stop (WORKER_STOP_TIMEOUT): it returns at most
	// stopMargin after it. The SDK's own WorkerStopTimeout stays 0 (an
	// activity in flight is not waited for: Temporal retries it on
	// another worker); with it set, a run's chunk summaries were no
	// longer called in parallel in the e2e suite, for a reason not found.
	StopTimeout time.Duration
}

// stopMargin is how long past StopTimeout Stop waits for the workers to
// let go of their pollers: a worker cut off from Temporal (the chaos
// soak's partition during a rolling deploy) held its process for over 2
// minutes after SIGTERM.
const stopMargin = 5 * time.Second

// all is every worker, in the order they start (a queue without a worker
// of its own has none).
func (w Workers) all() []worker.Worker {
	var ws []worker.Worker
	for _, wk := range []worker.Worker{w.Main, w.LLM, w.Deliveries, w.Erasures} {
		if wk != nil {
			ws = append(ws, wk)
		}
	}
	return ws
}

// Start starts every worker; when one fails, those started are stopped.
func (w Workers) Start() error {
	ws := w.all()
	for i, wk := range ws {
		if err := wk.Start(); err != nil {
			for _, started := range ws[:i] {
				started.Stop()
			}
			return fmt.Errorf("start worker %d of %d: %w", i+1, len(ws), err)
		}
	}
	return nil
}

// Stop stops every worker at once and returns when all have stopped or
// stopMargin after StopTimeout, whichever comes first. What a worker had
// not finished is retried by Temporal on another worker: every step is
// idempotent. It reports whether every worker stopped in time.
func (w Workers) Stop() bool {
	ws := w.all()
	var wg sync.WaitGroup
	for _, wk := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk.Stop()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	bound := time.NewTimer(w.StopTimeout + stopMargin)
	defer bound.Stop()
	select {
	case <-done:
		return true
	case <-bound.C:
		slog.Warn("workers still stopping; exiting without them (Temporal retries their unfinished tasks elsewhere)",
			"after", w.StopTimeout+stopMargin)
		return false
	}
}

// Run starts the workers and stops them once ctx ends: the process's
// signal context (SignalContext), registered before anything else, so a
// SIGTERM that arrives while the process is still starting stops it too.
// (Run took worker.InterruptCh() before, a second registration made after
// the dependencies were open: a SIGTERM between the two was seen only by
// the first, and in the chaos soak's rolling deploy the worker ran on
// until it was killed two minutes later.)
func (w Workers) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// AdmissionLoad reads where admission stands for the admission gauges
// (metrics.WatchAdmission).
func (d *Deps) AdmissionLoad(ctx context.Context) (metrics.AdmissionLoad, error) {
	l, err := d.Store.AdmissionLoad(ctx)
	if err != nil {
		return metrics.AdmissionLoad{}, err
	}
	return metrics.AdmissionLoad{Waiting: l.Waiting, InFlight: l.InFlight, TenantsWaiting: l.TenantsWaiting, OldestWait: l.OldestWait}, nil
}

// NewWorkers builds the worker of the task queue, with every workflow and
// activity registered, and the workers of the LLM, delivery and erasure
// task queues. The worker process, the dev stack, the end-to-end tests
// and the bench all build their workers here; the tests and the bench
// add interceptors.
func (d *Deps) NewWorkers(c client.Client, interceptors ...interceptor.WorkerInterceptor) Workers {
	acts := d.Activities()
	acts.Erasure.Executions = temporalExecutions{client: c}
	main := worker.New(c, d.Config.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: max(d.Config.WorkerActivities, 1),
		Interceptors:                       interceptors,
	})
	workflows.Register(main, acts)
	llmOpts := LLMWorkerOptions(d.Config)
	llmOpts.Interceptors = interceptors
	llm := worker.New(c, d.Config.LLMTaskQueue, llmOpts)
	workflows.RegisterLLM(llm, acts.Compaction)
	// The delivery and erasure workers run the same registrations: a
	// workflow started on their queue runs there with its activities.
	background := func(queue string, slots int) worker.Worker {
		if queue == d.Config.TaskQueue {
			// One queue, one worker: the bench's configuration of
			// before these queues (config.Load refuses it).
			return nil
		}
		w := worker.New(c, queue, worker.Options{MaxConcurrentActivityExecutionSize: max(slots, 1), Interceptors: interceptors})
		workflows.Register(w, acts)
		return w
	}
	return Workers{Main: main, LLM: llm, Activities: acts, StopTimeout: d.Config.WorkerStopTimeout,
		Deliveries: background(d.Config.DeliveryTaskQueue, d.Config.DeliveryActivities),
		Erasures:   background(d.Config.EraseTaskQueue, d.Config.EraseActivities)}
}

// llmIntake is how many summarizer activities the LLM worker takes in per
// LLM slot: the calls beyond LLM_PARALLELISM wait in the worker, where
// the tenants take turns at the slots (activities.LLMTurns), instead of
// in the task queue, first in, first out, where one tenant's backlog
// would be ahead of every other tenant's call.
const llmIntake = 8

// LLMWorkerOptions are the options of the LLM task queue's worker: at
// most LLM_PARALLELISM calls in flight here, llmIntake times as many
// taken in with LLM_TENANT_TURNS, and LLM_RATE_PER_SECOND activities
// started per second on the queue, whatever the number of workers.
func LLMWorkerOptions(cfg config.Config) worker.Options {
	intake := 1
	if cfg.LLMTenantTurns {
		intake = llmIntake
	}
	return worker.Options{
		MaxConcurrentActivityExecutionSize: max(cfg.LLMParallelism, 1) * intake,
		TaskQueueActivitiesPerSecond:       cfg.LLMRatePerSecond,
	}
}

// Gateway builds the gateway that submits events to the workflows.
func (d *Deps) Gateway(c client.Client) *gateway.Gateway {
	return &gateway.Gateway{Store: d.Store, Blob: d.Blob, Temporal: c, TaskQueue: d.Config.TaskQueue, LLMTaskQueue: d.Config.LLMTaskQueue,
		DeliveryTaskQueue: d.Config.DeliveryTaskQueue, EraseTaskQueue: d.Config.EraseTaskQueue, Fairness: d.Config.TenantFairness,
		DefaultPreset: d.Config.DefaultPreset, Overrides: d.Config.PresetOverrides, Caps: d.Config.OverrideCaps,
		Breaker: store.BreakerRule{Runs: d.Config.BreakerRuns, Window: d.Config.BreakerWindow,
			MinFreed: d.Config.BreakerMinFreed, MinInterval: d.Config.MinEventInterval},
		SearchAttributes: d.Config.SearchAttributes, Judge: d.Config.OpenAIBaseURL != "", Logger: Logger(d.Config),
		WebhookPolicy: webhook.Policy{AllowHosts: d.Config.WebhookAllowHosts}}
}

// Close releases the dependencies.
func (d *Deps) Close() {
	d.Store.Close()
}

// Logger is the process logger at the configured level. Conversation text
// is never logged: activities log keys, counts and sizes only.
func Logger(cfg config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Dial connects a Temporal client.
func Dial(cfg config.Config) (client.Client, error) {
	return DialWith(cfg, nil)
}

// DialWith is Dial reporting the SDK's metrics into m (nil: none).
func DialWith(cfg config.Config, m *metrics.Metrics) (client.Client, error) {
	c, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(Logger(cfg)), MetricsHandler: m.SDKHandler()})
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// migrate runs the migrations as the schema's owner (MIGRATE_DATABASE_URL)
// and grants the runtime role of DATABASE_URL its rights, so that the
// worker and the API never hold more than they need. Without
// MIGRATE_DATABASE_URL, Open migrates through DATABASE_URL.
func migrate(ctx context.Context, cfg config.Config) error {
	if cfg.MigrateDatabaseURL == "" {
		return nil
	}
	owner, err := store.Open(ctx, cfg.MigrateDatabaseURL)
	if err != nil {
		return fmt.Errorf("open postgres as owner (MIGRATE_DATABASE_URL): %w", err)
	}
	defer owner.Close()
	if err := owner.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	role, err := store.UserOf(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	if err := owner.GrantRuntime(ctx, role); err != nil {
		return fmt.Errorf("grant the runtime role %s: %w", role, err)
	}
	return nil
}

// ServeMetrics serves m at http://addr/metrics, and 200 at /readyz,
// until the returned stop is called.
func ServeMetrics(addr string, m *metrics.Metrics) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	// A process serves its metrics once its dependencies are open
	// (StartWaiting returned): the worker's readiness probe, which holds
	// a rolling deploy's old workers until the new ones got that far.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// RegisterSearchAttributes registers the workflows' search attributes in
// the namespace (the dev stack and tests; production runs the documented
// `temporal operator search-attribute create` commands once). Attributes
// already registered are left as they are.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range contract.SearchAttributes() {
		if _, ok := list.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
