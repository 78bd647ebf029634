// Package config reads every setting of the worker and the starter from
// environment variables, with the documented defaults. It is the only place
// that reads the environment; docs/configuration.md lists every variable here.
package config

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/tokens"
	"github.com/ctxcompact/orchestrator/internal/tokens/anthropic"
)

// DefaultDatabaseURL is DATABASE_URL when it is unset: the local server's
// postgres database, as a developer machine has it. The dev stack falls
// back to it when it cannot start a Postgres of its own.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Config is the whole configuration.
type Config struct {
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string

	DatabaseURL string

	S3Endpoint  string
	S3Region    string
	S3Bucket    string
	S3AccessKey string
	S3SecretKey string
	S3PathStyle bool
	// BlobCacheMB bounds the in-process cache of content-addressed
	// objects, per process; 0 disables it.
	BlobCacheMB int

	OpenAIBaseURL   string
	OpenAIAPIKey    string
	SummarizerModel string
	LLMTimeout      time.Duration
	// WorkerStopTimeout bounds a stopping worker (SIGINT/SIGTERM): a few
	// seconds past it the process exits whatever still holds it (a poll
	// to an unreachable Temporal), and Temporal gives the unfinished
	// tasks to another worker.
	WorkerStopTimeout time.Duration
	// StartupTimeout is how long a long-running server (the worker,
	// `starter serve`, `starter mcp`) keeps trying dependencies that do
	// not answer yet at start before it exits (0: it exits at the first
	// failure).
	StartupTimeout time.Duration
	// LLMTaskQueue is the task queue of the summarizer calls, apart from
	// the steps so that one rate limit holds across every worker: one
	// queue per LLM provider account.
	LLMTaskQueue string
	// LLMRatePerSecond caps the summarizer calls started per second on
	// LLMTaskQueue across all workers (Temporal's task-queue rate limit);
	// 0 is no cap.
	LLMRatePerSecond float64
	// LLMParallelism bounds the summaries in flight per worker, so that a
	// burst cannot trip the provider's rate limits.
	LLMParallelism int

	// DeliveryTaskQueue is the task queue of the webhook deliveries and
	// EraseTaskQueue that of the session erasures and retention sweeps,
	// each with a worker of its own (DeliveryActivities and
	// EraseActivities slots), so that receivers that accept and never
	// answer hold delivery slots only: never a compaction's, never an
	// erasure's.
	DeliveryTaskQueue  string
	DeliveryActivities int
	EraseTaskQueue     string
	EraseActivities    int
	// DeliveryTenantConcurrent bounds one tenant's deliveries in flight
	// per worker (0: no bound), so that one tenant's slow endpoints cannot
	// take every delivery slot either.
	DeliveryTenantConcurrent int
	// TenantFairness sends each tenant's workflows with the tenant as
	// their Temporal fairness key, so that a server with fairness on
	// (matching.enableFairness) dispatches the tenants' tasks in turn
	// rather than first in, first out. Off by default: measured on the
	// in-process server, it slowed every tenant (BENCHMARKS.md, 11).
	TenantFairness bool
	// LLMTenantTurns has the LLM worker take in more summarizer calls
	// than it makes at once and give its LLM_PARALLELISM slots to the
	// tenants in turn, so that one tenant's backlog does not delay
	// another's calls (LLM_TENANT_TURNS).
	LLMTenantTurns bool
	// TenantRunsInFlight bounds one tenant's compaction runs in flight
	// across the deployment (TENANT_RUNS_IN_FLIGHT; 0: no bound): a run
	// next in its session waits for admission in its session workflow,
	// outside the task queues, while its tenant has that many running,
	// so that a flooding tenant's backlog never stands in the queues
	// ahead of another tenant's run (store.Admit, workflows.Session).
	TenantRunsInFlight int

	// AnthropicAPIKey turns on Claude token counts by Anthropic's
	// count_tokens endpoint (ANTHROPIC_API_KEY); empty: Claude runs are
	// counted with o200k_base times their factor. AnthropicBaseURL is the
	// API's root and AnthropicCountTimeout bounds one count.
	AnthropicAPIKey       string
	AnthropicBaseURL      string
	AnthropicCountTimeout time.Duration

	// ProxyAnthropicURL and ProxyOpenAIURL are the upstreams of the
	// provider-compatible proxy (PROXY_ANTHROPIC_URL, PROXY_OPENAI_URL;
	// empty: that route is off), ProxyTrigger the share of the context
	// limit at which it starts a compaction (PROXY_TRIGGER), ProxyTarget
	// the share a compaction aims at when the host names no preset
	// (PROXY_TARGET), and
	// ProxyWait how long a request that would not fit waits for one in
	// flight (PROXY_WAIT); ProxyColdAfter how long a session stays idle
	// before the provider's prompt cache is taken for cold
	// (PROXY_COLD_AFTER; 0: never), and ProxyColdTrigger the share of the
	// limit at which an idle session compacts then (PROXY_COLD_TRIGGER).
	// ProxyInterim keeps a waiting non-streaming request alive with
	// interim 102 answers (PROXY_INTERIM). See docs/proxy.md.
	ProxyAnthropicURL string
	ProxyOpenAIURL    string
	ProxyTrigger      float64
	ProxyTarget       float64
	ProxyColdAfter    time.Duration
	ProxyColdTrigger  float64
	ProxyWait         time.Duration
	ProxyInterim      bool

	WorkerActivities int
	// SearchAttributes sets the workflows' typed search attributes
	// (registered once per namespace, see docs/operations.md).
	SearchAttributes bool
	// MetricsAddr is where the worker serves /metrics ("" : nowhere);
	// `starter serve` serves them on its own address.
	MetricsAddr     string
	HTTPAddr        string
	MaxRequestBytes int64

	// LogLevel is debug, info, warn or error.
	LogLevel string

	DefaultPreset string
	// PresetOverrides holds the preset file's overrides, merged with the
	// offload-compact design's SYNAPSE_COMPACT_* variables.
	PresetOverrides policy.Overrides
	// ModelLimits is MODEL_CONTEXT_LIMITS and ModelFactors is
	// MODEL_TOKEN_FACTORS, as given ("prefix=value,…"): they adjust the
	// built-in context windows and token safety factors (see TokenLimits).
	ModelLimits  string
	ModelFactors string
	// Prices are the models' token prices (MODEL_PRICES over the
	// built-in table, pricing.Defaults) and CostTurns the agent calls a
	// run's net saving is counted over (COST_TURNS).
	Prices    pricing.Table
	CostTurns int

	// MigrateDatabaseURL, when set, is the schema owner's connection:
	// migrations run through it and grant the runtime role of
	// DatabaseURL what it needs (store.GrantRuntime). Empty: migrations
	// run through DatabaseURL.
	MigrateDatabaseURL string

	// OverrideCaps bound the overrides callers send (OVERRIDE_*).
	OverrideCaps policy.Caps
	// TenantRatePerSecond, TenantBurst and TenantConcurrent bound each
	// tenant's API requests (0: no limit).
	TenantRatePerSecond float64
	TenantBurst         int
	TenantConcurrent    int
	// AuthFailuresPerMinute bounds failed authentications (API keys and
	// web UI sessions) per client address (0: no limit).
	AuthFailuresPerMinute int
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client address for that limit (TRUSTED_PROXIES, CIDR list).
	TrustedProxies []netip.Prefix
	// UISessionTTL is how long a web UI sign-in lasts.
	UISessionTTL time.Duration
	// RetentionSweepEvery is how often the retention sweep runs
	// (RETENTION_SWEEP_EVERY; a Temporal Schedule).
	RetentionSweepEvery time.Duration
	// KeepIntermediates keeps each final run's intermediate objects in S3
	// (KEEP_INTERMEDIATES), for debugging a run step by step.
	KeepIntermediates bool
	// WebhookAllowHosts are the hosts webhook endpoints may reach over
	// plain http and on internal addresses (WEBHOOK_ALLOW_HOSTS); every
	// other endpoint must be https on a public address.
	WebhookAllowHosts []string
	// BreakerRuns, BreakerWindow, BreakerMinFreed and MinEventInterval are
	// the loop breaker of a session's automatic events.
	BreakerRuns      int
	BreakerWindow    time.Duration
	BreakerMinFreed  float64
	MinEventInterval time.Duration
}

// OnTaskQueue is c with its task queue set to q and the LLM, delivery
// and erasure queues named after it, as their defaults are: the tests
// and the bench give each worker queues of its own this way.
func (c Config) OnTaskQueue(q string) Config {
	c.TaskQueue, c.LLMTaskQueue = q, q+"-llm"
	c.DeliveryTaskQueue, c.EraseTaskQueue = q+"-deliveries", q+"-erasures"
	return c
}

// DefaultStartupTimeout is STARTUP_TIMEOUT's default: longer than a
// Postgres or Temporal restart, shorter than an outage worth a page.
const DefaultStartupTimeout = 2 * time.Minute

// DefaultTenantRunsInFlight is TENANT_RUNS_IN_FLIGHT's default. On the
// bench's 2-core stack (two summarizer calls of 500 ms a run) a flood
// drained at 1.9 runs/s with 4 and 2.0 with 8, while a quiet tenant's
// p99 was 2.9× its idle figure with 4 and 3.8× with 8; 2 gave 2.4× but
// halved the flood (BENCHMARKS.md, 11). A deployment with more workers
// raises it.
const DefaultTenantRunsInFlight = 4

// maxBlobCacheMB keeps BLOB_CACHE_MB in bytes far from overflowing int64.
const maxBlobCacheMB = 1 << 20

// Tenant is the tenant the CLI acts for when --tenant is not given:
// COMPACTOR_TENANT, else "default".
func Tenant() string {
	if t := strings.TrimSpace(os.Getenv("COMPACTOR_TENANT")); t != "" {
		return t
	}
	return "default"
}

// Load reads the environment. Every error names the variable.
func Load() (Config, error) {
	return load(os.Getenv)
}

// Defaults is the configuration with no variable set: every documented
// default. The tests and the bench start from it, so that they run what a
// deployment runs unless they say otherwise.
func Defaults() Config {
	c, err := load(func(string) string { return "" })
	if err != nil {
		// The defaults are constants; a failure here is a bug in them.
		panic(fmt.Sprintf("config defaults: %v", err))
	}
	return c
}

func load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := read(&r)
	if r.err != nil {
		return Config{}, r.err
	}
	proxies, err := ratelimit.ParsePrefixes(r.str("TRUSTED_PROXIES", ""))
	if err != nil {
		return Config{}, fmt.Errorf("TRUSTED_PROXIES: %w", err)
	}
	c.TrustedProxies = proxies
	for _, check := range []func() error{c.checkProxy, c.checkQueues, c.checkBounds, c.checkModels} {
		if err := check(); err != nil {
			return Config{}, err
		}
	}
	if c.Prices, err = pricing.Parse(getenv("MODEL_PRICES")); err != nil {
		return Config{}, fmt.Errorf("MODEL_PRICES: %w", err)
	}
	if c.CostTurns < 1 {
		return Config{}, fmt.Errorf("COST_TURNS: %d is not a number of calls (at least 1)", c.CostTurns)
	}
	if c.PresetOverrides, err = presetOverrides(&r, c.DefaultPreset); err != nil {
		return Config{}, err
	}
	return c, nil
}

// read reads the variables with a default, each by its type; r.err
// holds the first that does not parse. load checks what they say.
func read(r *reader) Config {
	c := Config{
		TemporalAddress:   r.str("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		TemporalNamespace: r.str("TEMPORAL_NAMESPACE", "default"),
		TaskQueue:         r.str("TEMPORAL_TASK_QUEUE", "compaction"),
		DatabaseURL:       r.str("DATABASE_URL", DefaultDatabaseURL),
		S3Endpoint:        r.str("S3_ENDPOINT", ""),
		S3Region:          r.str("S3_REGION", "us-east-1"),
		S3Bucket:          r.str("S3_BUCKET", "compactor"),
		S3AccessKey:       r.str("S3_ACCESS_KEY", ""),
		S3SecretKey:       r.str("S3_SECRET_KEY", ""),
		S3PathStyle:       r.boolean("S3_PATH_STYLE", false),
		BlobCacheMB:       r.integer("BLOB_CACHE_MB", 64),
		OpenAIBaseURL:     r.str("OPENAI_BASE_URL", ""),
		OpenAIAPIKey:      r.str("OPENAI_API_KEY", ""),
		SummarizerModel:   r.str("SUMMARIZER_MODEL", "gpt-4o-mini"),
		LLMTimeout:        r.duration("LLM_TIMEOUT", 120*time.Second),
		WorkerStopTimeout: r.duration("WORKER_STOP_TIMEOUT", 30*time.Second),
		StartupTimeout:    r.durationOff("STARTUP_TIMEOUT", DefaultStartupTimeout),
		LLMParallelism:    r.integer("LLM_PARALLELISM", 8),
		LLMTaskQueue:      r.str("LLM_TASK_QUEUE", ""),
		LLMRatePerSecond:  r.number("LLM_RATE_PER_SECOND", 0),
		WorkerActivities:  r.integer("WORKER_ACTIVITIES", 32),
		HTTPAddr:          r.str("HTTP_ADDR", "127.0.0.1:8080"),
		MetricsAddr:       r.str("METRICS_ADDR", ""),
		SearchAttributes:  r.boolean("TEMPORAL_SEARCH_ATTRIBUTES", false),
		MaxRequestBytes:   int64(r.integer("MAX_REQUEST_BYTES", 32<<20)),
		DefaultPreset:     r.str("COMPACTOR_DEFAULT_PRESET", policy.Adaptive),
		ModelLimits:       r.str("MODEL_CONTEXT_LIMITS", ""),
		ModelFactors:      r.str("MODEL_TOKEN_FACTORS", ""),
		CostTurns:         r.integer("COST_TURNS", 10),
		LogLevel:          strings.ToLower(r.str("LOG_LEVEL", "info")),

		DeliveryTaskQueue:        r.str("DELIVERY_TASK_QUEUE", ""),
		DeliveryActivities:       r.integer("DELIVERY_ACTIVITIES", 16),
		EraseTaskQueue:           r.str("ERASE_TASK_QUEUE", ""),
		EraseActivities:          r.integer("ERASE_ACTIVITIES", 8),
		DeliveryTenantConcurrent: r.integer("DELIVERY_TENANT_CONCURRENT", 4),
		TenantFairness:           r.boolean("TENANT_FAIRNESS", false),
		LLMTenantTurns:           r.boolean("LLM_TENANT_TURNS", true),
		TenantRunsInFlight:       r.integer("TENANT_RUNS_IN_FLIGHT", DefaultTenantRunsInFlight),

		MigrateDatabaseURL: r.str("MIGRATE_DATABASE_URL", ""),
		OverrideCaps: policy.Caps{
			MaxAttempts:       r.integer("OVERRIDE_MAX_ATTEMPTS", 5),
			MaxParallelism:    r.integer("OVERRIDE_MAX_PARALLELISM", 16),
			MinChunkChars:     r.integer("OVERRIDE_MIN_CHUNK_CHARS", 10000),
			MaxRepairPasses:   r.integer("OVERRIDE_MAX_REPAIR_PASSES", 3),
			MaxTargetTokens:   r.integer("OVERRIDE_MAX_TARGET_TOKENS", 32000),
			SummarizerModels:  r.list("OVERRIDE_SUMMARIZER_MODELS"),
			AllowBudgetOptOut: r.boolean("OVERRIDE_ALLOW_BUDGET_OPT_OUT", false),
		},
		TenantRatePerSecond:   r.number("TENANT_RATE_PER_SECOND", 20),
		TenantBurst:           r.integer("TENANT_BURST", 40),
		TenantConcurrent:      r.integer("TENANT_CONCURRENT", 32),
		AuthFailuresPerMinute: r.integer("AUTH_FAILURES_PER_MINUTE", 20),
		UISessionTTL:          r.duration("UI_SESSION_TTL", 12*time.Hour),
		WebhookAllowHosts:     r.list("WEBHOOK_ALLOW_HOSTS"),
		KeepIntermediates:     r.boolean("KEEP_INTERMEDIATES", false),
		RetentionSweepEvery:   r.duration("RETENTION_SWEEP_EVERY", time.Hour),
		BreakerRuns:           r.integer("BREAKER_RUNS", 3),
		BreakerWindow:         r.duration("BREAKER_WINDOW", time.Hour),
		BreakerMinFreed:       r.number("BREAKER_MIN_FREED", 0.05),
		MinEventInterval:      r.durationOrZero("MIN_EVENT_INTERVAL"),
	}
	c.AnthropicAPIKey = r.str("ANTHROPIC_API_KEY", "")
	c.AnthropicBaseURL = r.str("ANTHROPIC_BASE_URL", anthropic.DefaultBaseURL)
	c.AnthropicCountTimeout = r.duration("ANTHROPIC_COUNT_TIMEOUT", anthropic.DefaultTimeout)
	c.ProxyAnthropicURL = r.str("PROXY_ANTHROPIC_URL", "")
	c.ProxyOpenAIURL = r.str("PROXY_OPENAI_URL", "")
	c.ProxyTrigger = r.number("PROXY_TRIGGER", 0.7)
	c.ProxyTarget = r.number("PROXY_TARGET", 0.3)
	c.ProxyWait = r.duration("PROXY_WAIT", time.Minute)
	c.ProxyInterim = r.boolean("PROXY_INTERIM", true)
	c.ProxyColdAfter = r.duration("PROXY_COLD_AFTER", 5*time.Minute)
	c.ProxyColdTrigger = r.number("PROXY_COLD_TRIGGER", 0.5)
	return c
}

// checkProxy checks the proxy's upstream URLs and its thresholds.
func (c *Config) checkProxy() error {
	for _, u := range []struct{ name, v string }{{"PROXY_ANTHROPIC_URL", c.ProxyAnthropicURL}, {"PROXY_OPENAI_URL", c.ProxyOpenAIURL}} {
		if u.v == "" {
			continue
		}
		if pu, err := url.Parse(u.v); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return fmt.Errorf("%s: %q is not an http(s) URL such as https://api.anthropic.com", u.name, u.v)
		}
	}
	if c.ProxyTrigger <= 0 || c.ProxyTrigger > 1 {
		return fmt.Errorf("PROXY_TRIGGER: %v must be a share of the context limit above 0 and at most 1", c.ProxyTrigger)
	}
	if c.ProxyTarget < 0 || c.ProxyTarget >= c.ProxyTrigger {
		return fmt.Errorf("PROXY_TARGET: %v must be at least 0 (0: the preset's own) and below PROXY_TRIGGER (%v)", c.ProxyTarget, c.ProxyTrigger)
	}
	if c.ProxyColdAfter < 0 {
		return fmt.Errorf("PROXY_COLD_AFTER: %v must be a duration of at least 0 (0: never)", c.ProxyColdAfter)
	}
	if c.ProxyColdTrigger <= c.ProxyTarget || c.ProxyColdTrigger > c.ProxyTrigger {
		return fmt.Errorf("PROXY_COLD_TRIGGER: %v must be above PROXY_TARGET (%v) and at most PROXY_TRIGGER (%v)", c.ProxyColdTrigger, c.ProxyTarget, c.ProxyTrigger)
	}
	return nil
}

// checkQueues names the task queues left unset after TEMPORAL_TASK_QUEUE
// and checks that no two share a name.
func (c *Config) checkQueues() error {
	if c.LLMTaskQueue == "" {
		c.LLMTaskQueue = c.TaskQueue + "-llm"
	}
	if c.LLMTaskQueue == c.TaskQueue {
		return fmt.Errorf("LLM_TASK_QUEUE: %q is TEMPORAL_TASK_QUEUE; the summarizer calls need a queue of their own", c.LLMTaskQueue)
	}
	if c.DeliveryTaskQueue == "" {
		c.DeliveryTaskQueue = c.TaskQueue + "-deliveries"
	}
	if c.EraseTaskQueue == "" {
		c.EraseTaskQueue = c.TaskQueue + "-erasures"
	}
	// Each queue has a worker of its own with its own slots: two of them
	// sharing a name would share the slots again.
	queues := map[string]string{c.TaskQueue: "TEMPORAL_TASK_QUEUE"}
	for _, q := range []struct{ name, v string }{{c.LLMTaskQueue, "LLM_TASK_QUEUE"}, {c.DeliveryTaskQueue, "DELIVERY_TASK_QUEUE"}, {c.EraseTaskQueue, "ERASE_TASK_QUEUE"}} {
		if other, ok := queues[q.name]; ok {
			return fmt.Errorf("%s: %q is %s; each task queue needs a name of its own", q.v, q.name, other)
		}
		queues[q.name] = q.v
	}
	return nil
}

// checkBounds checks the numbers that have a range.
func (c *Config) checkBounds() error {
	if c.DeliveryActivities < 1 || c.EraseActivities < 1 {
		return fmt.Errorf("DELIVERY_ACTIVITIES and ERASE_ACTIVITIES must be at least 1 (got %d and %d)", c.DeliveryActivities, c.EraseActivities)
	}
	if c.TenantRunsInFlight < 0 {
		return fmt.Errorf("TENANT_RUNS_IN_FLIGHT: %d is negative (0 is no bound)", c.TenantRunsInFlight)
	}
	if c.DeliveryTenantConcurrent < 0 {
		return fmt.Errorf("DELIVERY_TENANT_CONCURRENT: %d is negative (0 is no bound)", c.DeliveryTenantConcurrent)
	}
	if c.BlobCacheMB > maxBlobCacheMB {
		return fmt.Errorf("BLOB_CACHE_MB: %d is more than %d (1 TiB)", c.BlobCacheMB, maxBlobCacheMB)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("LOG_LEVEL: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.BreakerMinFreed > 1 {
		return fmt.Errorf("BREAKER_MIN_FREED: %v is more than 1 (a share of the run's size)", c.BreakerMinFreed)
	}
	return nil
}

// checkModels parses the model tables; they are parsed again where they
// are used.
func (c *Config) checkModels() error {
	// Parsed here as well as where they are used, so that a bad entry
	// stops the process at start, not at its first run.
	if _, err := c.TokenLimits(); err != nil {
		return err
	}
	if _, err := c.ProviderTokens(); err != nil {
		return err
	}
	return nil
}

// presetOverrides checks the default preset and reads the preset
// overrides of COMPACTOR_PRESET_FILE and SYNAPSE_COMPACT_*.
func presetOverrides(r *reader, defaultPreset string) (policy.Overrides, error) {
	if _, err := policy.Builtin(defaultPreset); err != nil {
		return nil, fmt.Errorf("COMPACTOR_DEFAULT_PRESET: %w", err)
	}
	overrides := policy.Overrides{}
	if path := r.getenv("COMPACTOR_PRESET_FILE"); path != "" {
		o, err := policy.LoadFile(path)
		if err != nil {
			return nil, fmt.Errorf("COMPACTOR_PRESET_FILE: %w", err)
		}
		overrides = o
	}
	synapse, err := synapseOverrides(r)
	if err != nil {
		return nil, err
	}
	if synapse != nil {
		merged, err := policy.Merge(overrides[policy.OffloadCompact], synapse)
		if err != nil {
			return nil, err
		}
		overrides[policy.OffloadCompact] = merged
		if _, err := policy.Resolve(policy.OffloadCompact, merged); err != nil {
			return nil, fmt.Errorf("SYNAPSE_COMPACT_*: %w", err)
		}
	}
	return overrides, nil
}

// TokenLimits returns how models are measured: tokens.DefaultLimits (the
// vendors' context windows and the built-in token safety factors) with
// MODEL_CONTEXT_LIMITS and MODEL_TOKEN_FACTORS over them. An error names
// the variable and the entry.
func (c Config) TokenLimits() (tokens.Limits, error) {
	limits := tokens.DefaultLimits()
	windows, err := tokens.ParseLimits(c.ModelLimits)
	if err != nil {
		return tokens.Limits{}, fmt.Errorf("MODEL_CONTEXT_LIMITS: %w", err)
	}
	factors, err := tokens.ParseFactors(c.ModelFactors)
	if err != nil {
		return tokens.Limits{}, fmt.Errorf("MODEL_TOKEN_FACTORS: %w", err)
	}
	return limits.Merge(windows).Merge(tokens.Limits{Factors: factors}), nil
}

// ProviderTokens is the provider token counter the configuration asks
// for: Anthropic's count_tokens for Claude models when ANTHROPIC_API_KEY
// is set (at ANTHROPIC_BASE_URL, each count bounded by
// ANTHROPIC_COUNT_TIMEOUT), else nil, and Claude runs are estimated. Each
// call makes a counter with a cache of its own: make one per process.
func (c Config) ProviderTokens() (tokens.ProviderCounter, error) {
	if c.AnthropicAPIKey == "" {
		return nil, nil
	}
	counter, err := anthropic.New(anthropic.Config{APIKey: c.AnthropicAPIKey, BaseURL: c.AnthropicBaseURL, Timeout: c.AnthropicCountTimeout})
	if err != nil {
		return nil, fmt.Errorf("ANTHROPIC_BASE_URL: %w", err)
	}
	return counter, nil
}

// synapseOverrides maps the offload-compact design's own environment variables onto the
// offload-compact preset, so that a deployment configured for that design
// keeps working unchanged.
func synapseOverrides(r *reader) (json.RawMessage, error) {
	h := map[string]any{}
	if v := r.getenv("SYNAPSE_COMPACT_TRIGGER_THRESHOLD"); v != "" {
		h["max_freed_tokens"] = r.integer("SYNAPSE_COMPACT_TRIGGER_THRESHOLD", 0)
	}
	if v := r.getenv("SYNAPSE_COMPACT_TARGET_TOKENS"); v != "" {
		h["target_tokens"] = r.integer("SYNAPSE_COMPACT_TARGET_TOKENS", 0)
	}
	if v := r.getenv("SYNAPSE_COMPACT_PRESERVE_COUNT"); v != "" {
		h["keep_last"] = r.integer("SYNAPSE_COMPACT_PRESERVE_COUNT", 0)
	}
	if v := r.getenv("SYNAPSE_COMPACT_RETRY_COUNT"); v != "" {
		h["attempts"] = r.integer("SYNAPSE_COMPACT_RETRY_COUNT", 0)
	}
	if r.err != nil {
		return nil, r.err
	}
	model := r.getenv("SYNAPSE_COMPACT_MODEL")
	if len(h) == 0 && model == "" {
		return nil, nil
	}
	doc := map[string]any{}
	if len(h) > 0 {
		doc["history"] = h
	}
	if model != "" {
		doc["summarizer_model"] = model
	}
	return json.Marshal(doc)
}

type reader struct {
	getenv func(string) string
	err    error
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) integer(name string, def int) int {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(fmt.Errorf("%s: %q is not a non-negative integer", name, v))
		return def
	}
	return n
}

func (r *reader) number(name string, def float64) float64 {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		r.fail(fmt.Errorf("%s: %q is not a non-negative number", name, v))
		return def
	}
	return f
}

func (r *reader) boolean(name string, def bool) bool {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(fmt.Errorf("%s: %q is not a boolean", name, v))
		return def
	}
	return b
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(fmt.Errorf("%s: %q is not a positive duration like 30s", name, v))
		return def
	}
	return d
}

// list reads a comma-separated list; empty is none.
func (r *reader) list(name string) []string {
	var out []string
	for _, v := range strings.Split(r.getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// durationOrZero reads a duration that may be 0 (off); empty is 0.
func (r *reader) durationOrZero(name string) time.Duration {
	return r.durationOff(name, 0)
}

// durationOff reads a duration that may be 0 (off); empty is def.
func (r *reader) durationOff(name string, def time.Duration) time.Duration {
	if strings.TrimSpace(r.getenv(name)) == "0" {
		return 0
	}
	return r.duration(name, def)
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
