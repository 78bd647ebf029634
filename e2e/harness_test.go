// Package e2e runs the whole pipeline on real parts: the dev stack's
// in-process Temporal server (devstack.TestServer, one per test binary),
// Postgres (a schema per test), an S3 server (versitygw when installed, a
// bucket per test) and an OpenAI-compatible HTTP server with fault
// injection, under the production wiring (app.Deps).
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/devkit/devstack"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// server is the one Temporal server of this test binary: starting one
// costs seconds, so every test shares it and uses its own task queue.
var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The end-to-end tests need every service: none runs under
		// -short (make unit); newEnv and the other entry points skip.
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var err error
	server, err = devstack.TestServer(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := devstack.StopTestServer(server); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := blobtest.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop s3 server:", err)
	}
	os.Exit(code)
}

var queueSeq atomic.Int64

// env is one test's stack: the dev stack's Temporal server (shared),
// Postgres and S3 of its own, and on top the production wiring
// (app.Deps: the activities, both workers, the gateway).
type env struct {
	t         *testing.T
	deps      *app.Deps
	store     *store.Store
	blob      *blob.Store
	llm       *llmtest.Server
	acts      activities.Set
	client    client.Client
	gw        *gateway.Gateway
	taskQueue string
	// llmQueue is the task queue of the summarizer calls, as deployed,
	// and llmRate its rate limit (0: none).
	llmQueue string
	llmRate  float64
	worker   worker.Worker
	// tenant is unique per test: session workflow ids derive from tenant
	// and session, and every test shares one Temporal namespace.
	tenant string
}

type envOption func(*envConfig)

type envConfig struct {
	llmOpts   []llmtest.Option
	offline   bool
	blob      *blob.Store
	noWorker  bool
	overrides policy.Overrides
	// llmRate is the LLM task queue's rate limit (LLM_RATE_PER_SECOND).
	llmRate float64
	// metrics, when set, receive the activities' and the SDK's metrics.
	metrics *metrics.Metrics
	// keepIntermediates keeps the runs' intermediate objects
	// (KEEP_INTERMEDIATES), for tests that read them afterwards.
	keepIntermediates bool
	// runsInFlight, when set, is TENANT_RUNS_IN_FLIGHT (-1: no bound).
	runsInFlight int
}

// withRunsInFlight sets TENANT_RUNS_IN_FLIGHT (0: no bound).
func withRunsInFlight(n int) envOption {
	return func(c *envConfig) {
		c.runsInFlight = n
		if n == 0 {
			c.runsInFlight = -1
		}
	}
}

// keepIntermediates keeps the runs' intermediates in S3 once they are
// final.
func keepIntermediates() envOption { return func(c *envConfig) { c.keepIntermediates = true } }

// withMetrics gives the stack one metrics registry, as a process has.
func withMetrics(m *metrics.Metrics) envOption { return func(c *envConfig) { c.metrics = m } }

func withLLM(opts ...llmtest.Option) envOption {
	return func(c *envConfig) { c.llmOpts = append(c.llmOpts, opts...) }
}

func withOverrides(o policy.Overrides) envOption {
	return func(c *envConfig) { c.overrides = o }
}

// withLLMRate sets the LLM task queue's rate limit, as LLM_RATE_PER_SECOND.
func withLLMRate(perSecond float64) envOption {
	return func(c *envConfig) { c.llmRate = perSecond }
}

// withoutLLM runs the stack with the offline summarizer (offline.Summarizer),
// as a deployment without OPENAI_BASE_URL: no test LLM server.
func withoutLLM() envOption { return func(c *envConfig) { c.offline = true } }

// skipUnderShort skips a test that needs the services under -short
// (make unit), which runs none.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Temporal, Postgres and S3: skipped under -short")
	}
}

func withBlob(b *blob.Store) envOption { return func(c *envConfig) { c.blob = b } }

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	skipUnderShort(t)
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, store: storetest.New(t), blob: cfg.blob}
	if e.blob == nil {
		e.blob = blobtest.New(t)
	}
	var sum llm.Summarizer = offline.Summarizer{}
	if !cfg.offline {
		e.llm = llmtest.New(cfg.llmOpts...)
		t.Cleanup(e.llm.Close)
		s, err := llm.NewOpenAI(llm.Config{BaseURL: e.llm.URL(), APIKey: "test-key", Model: "gpt-4o-mini", Timeout: 10 * time.Second})
		require.NoError(t, err)
		sum = s
	}
	seq := queueSeq.Add(1)
	e.taskQueue = fmt.Sprintf("e2e-%d-%s", seq, strings.ReplaceAll(t.Name(), "/", "-"))
	e.llmQueue = e.taskQueue + "-llm"
	e.tenant = fmt.Sprintf("tenant-%d", seq)
	e.client = server.GetDefaultClient()
	if cfg.metrics != nil {
		e.client = server.NewClientWithOptions(client.Options{MetricsHandler: cfg.metrics.SDKHandler()})
	}
	// The deployment's defaults, on this test's queues. A test's gateway
	// caps no override and breaks no loop unless the test asks for it.
	c := config.Defaults()
	c = c.OnTaskQueue(e.taskQueue)
	c.LLMParallelism, c.LLMRatePerSecond = 16, cfg.llmRate
	c.PresetOverrides = cfg.overrides
	c.KeepIntermediates = cfg.keepIntermediates
	if cfg.runsInFlight != 0 {
		c.TenantRunsInFlight = max(cfg.runsInFlight, 0)
	}
	c.OverrideCaps, c.BreakerRuns = policy.Caps{}, 0
	// Webhook receivers run on loopback, on ports of their own.
	c.WebhookAllowHosts = hookAllowHosts(t)
	e.deps = &app.Deps{Config: c, Store: e.store, Blob: e.blob, Summarizer: sum, Limits: tokens.DefaultLimits(), Metrics: cfg.metrics}
	e.gw = e.deps.Gateway(e.client)
	e.llmRate = cfg.llmRate
	if !cfg.noWorker {
		e.startWorker()
	}
	return e
}

// startWorker starts the workers of this test's task queue and LLM task
// queue, as a worker process does (app.Deps.NewWorkers); they stop with
// the test.
func (e *env) startWorker() {
	ws := e.deps.NewWorkers(e.client)
	require.NoError(e.t, ws.Start())
	e.worker, e.acts = ws.Main, ws.Activities
	e.t.Cleanup(func() { ws.Stop() })
}

// compact submits a conversation and waits for its run.
func (e *env) compact(ev gateway.Event) (gateway.Submitted, contract.Outcome) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if ev.Tenant == "" {
		ev.Tenant = e.tenant
	}
	if ev.Session == "" {
		ev.Session = "s1"
	}
	if ev.EventID == "" {
		ev.EventID = fmt.Sprintf("ev-%d", time.Now().UnixNano())
	}
	sub, err := e.gw.Submit(ctx, ev)
	require.NoError(e.t, err)
	res, err := e.gw.Wait(ctx, sub.RunID)
	require.NoError(e.t, err, "run %s", sub.RunID)
	// Wait answers once the run is recorded; what follows it (the release
	// of its intermediates, its delivery's start) is done by the time
	// its workflow closes, which the tests' checks of it need.
	require.NoError(e.t, e.client.GetWorkflow(ctx, sub.RunID, "").Get(ctx, nil), "run %s", sub.RunID)
	return sub, res
}

// output reads and parses a run's compacted conversation.
func (e *env) output(res contract.Outcome) (conversation.Conversation, []byte) {
	e.t.Helper()
	data, err := e.blob.GetVerified(context.Background(), res.OutputKey, res.OutputSHA256)
	require.NoError(e.t, err)
	c, err := conversation.ParseAny(data)
	require.NoError(e.t, err)
	return c, data
}

// dataDir holds the real agent conversations the tests run on, copied
// into the repository (see its README for provenance and licence).
const dataDir = "../testdata/conversations"

// readData reads a file of dataDir (e.g. "swe-agent-deepseek/x.json"):
// convtest.Read, under the name the e2e tests call it by.
func readData(t *testing.T, rel string) []byte {
	t.Helper()
	return convtest.Read(t, rel)
}

// buildCommand builds one of the repository's commands (worker, starter)
// into the test's temporary folder. The build cache makes it a link step
// after the first time.
func buildCommand(t *testing.T, name string) string {
	t.Helper()
	// Every test that runs a binary of the product runs it against the
	// services: under -short it stops before the build (tens of seconds
	// of `make unit` went to building binaries for tests that skipped).
	skipUnderShort(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./%s: %s", name, out)
	return bin
}
