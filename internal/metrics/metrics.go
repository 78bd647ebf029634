// Package metrics holds the product's Prometheus metrics and the Temporal
// SDK's, in one registry per process, exposed at /metrics by the worker
// (METRICS_ADDR) and by `starter serve`. Names are stable: the Grafana
// dashboard in deploy/grafana is built on them. Labels carry presets,
// formats, steps and outcomes, never tenants' data.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/ctxcompact/orchestrator/contract"
)

// Metrics are the product's metrics. A nil *Metrics records nothing, so
// tests and tools need not set one.
type Metrics struct {
	Registry *prometheus.Registry

	runs          *prometheus.CounterVec
	overLimit     *prometheus.CounterVec
	tokensBefore  *prometheus.HistogramVec
	tokensAfter   *prometheus.HistogramVec
	ratio         *prometheus.HistogramVec
	stepDuration  *prometheus.HistogramVec
	stepAttempts  *prometheus.CounterVec
	llmCalls      *prometheus.CounterVec
	llmLatency    *prometheus.HistogramVec
	llmTokens     *prometheus.CounterVec
	drift         *prometheus.CounterVec
	offloads      prometheus.Counter
	offloadBytes  prometheus.Counter
	httpRequests  *prometheus.CounterVec
	httpDurations *prometheus.HistogramVec
	cacheTokens   *prometheus.CounterVec
	netSaving     *prometheus.CounterVec
	reflections   *prometheus.CounterVec

	sdkScope tally.Scope
	closer   func() error
}

// sizeBuckets span a small chat to a 1M-token session.
var sizeBuckets = prometheus.ExponentialBuckets(1000, 2, 11)

// New registers every metric in a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: reg}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_runs_total",
		Help: "Compaction runs finished, by outcome (succeeded, over_limit, failed), preset and format."}, []string{"outcome", "preset", "format"})
	m.overLimit = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_over_limit_total",
		Help: "Runs that ended still over the model's limit, by preset."}, []string{"preset"})
	m.tokensBefore = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_tokens_before",
		Help: "Size of the conversation before a run, in the preset's unit.", Buckets: sizeBuckets}, []string{"preset", "unit"})
	m.tokensAfter = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_tokens_after",
		Help: "Size of the conversation after a run, in the preset's unit.", Buckets: sizeBuckets}, []string{"preset", "unit"})
	m.ratio = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_ratio",
		Help: "Size after / size before of a run.", Buckets: prometheus.LinearBuckets(0.05, 0.1, 10)}, []string{"preset"})
	m.stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_step_duration_seconds",
		Help: "Duration of one attempt of a pipeline step, by step kind and result.", Buckets: prometheus.DefBuckets}, []string{"kind", "result"})
	m.stepAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_step_attempts_total",
		Help: "Attempts of pipeline steps, by kind and result (ok, error); an attempt above 1 is a retry."}, []string{"kind", "result", "retry"})
	m.llmCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_summarizer_calls_total",
		Help: "Summarizer calls, by model and result (ok, or the error class)."}, []string{"model", "result"})
	m.llmLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_summarizer_latency_seconds",
		Help: "Latency of summarizer calls.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}, []string{"model"})
	m.llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_summarizer_tokens_total",
		Help: "Tokens the summarizer reported, by model and type (prompt, completion)."}, []string{"model", "type"})
	m.drift = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_drift_verdicts_total",
		Help: "Drift verdicts, by check (identifiers, intent, trajectory, premature-completion, clarification) and result."}, []string{"check", "result"})
	m.offloads = prometheus.NewCounter(prometheus.CounterOpts{Name: "compactor_offloads_total", Help: "Tool results offloaded to S3."})
	m.offloadBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "compactor_offload_bytes_total", Help: "Bytes of tool results offloaded to S3."})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_http_requests_total",
		Help: "HTTP API requests, by route pattern and status."}, []string{"route", "status"})
	m.httpDurations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "compactor_http_request_duration_seconds",
		Help: "HTTP API request durations, by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route"})
	m.cacheTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_cache_tokens_total",
		Help: "Tokens of committed outputs by what they do to the agent's prompt cache: prefix (unchanged, still cached) or rewrite (written again by its next call)."}, []string{"preset", "type"})
	m.netSaving = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_net_saving_usd_total",
		Help: "Net saving of committed runs over the agent's next COST_TURNS calls, after the summarizer's cost and the cache re-write (priced runs only), by sign."}, []string{"preset", "sign"})
	m.reflections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_log_reflections_total",
		Help: "Runs that condensed their session's summary log into one block."}, []string{"preset"})
	for _, c := range []prometheus.Collector{m.runs, m.overLimit, m.tokensBefore, m.tokensAfter, m.ratio, m.stepDuration,
		m.stepAttempts, m.llmCalls, m.llmLatency, m.llmTokens, m.drift, m.offloads, m.offloadBytes, m.httpRequests, m.httpDurations,
		m.cacheTokens, m.netSaving, m.reflections} {
		f(c)
	}
	return m
}

// sdkLatencyBuckets are the buckets of the SDK's latencies, in seconds:
// from a local activity's milliseconds to a long summarizer call.
var sdkLatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// SDKHandler returns the Temporal SDK's metrics handler, reporting into
// the same registry (its names start with "temporal_").
func (m *Metrics) SDKHandler() client.MetricsHandler {
	if m == nil {
		return nil
	}
	if m.sdkScope == nil {
		// Timers as histograms, not the reporter's default summaries: a
		// histogram adds up across worker pods (histogram_quantile over
		// their buckets), a summary's quantiles cannot.
		reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: m.Registry,
			DefaultTimerType: tallyprom.HistogramTimerType, DefaultHistogramBuckets: sdkLatencyBuckets})
		scope, closer := tally.NewRootScope(tally.ScopeOptions{
			CachedReporter: reporter, Separator: tallyprom.DefaultSeparator,
			SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
		}, time.Second)
		m.sdkScope, m.closer = sdktally.NewPrometheusNamingScope(scope), closer.Close
	}
	return sdktally.NewMetricsHandler(m.sdkScope)
}

// Close flushes the SDK metrics' scope.
func (m *Metrics) Close() error {
	if m == nil || m.closer == nil {
		return nil
	}
	return m.closer()
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Run records a finished run.
func (m *Metrics) Run(outcome, preset, format, unit string, before, after int) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(outcome, preset, format).Inc()
	if outcome == "over_limit" {
		m.overLimit.WithLabelValues(preset).Inc()
	}
	if before > 0 {
		m.tokensBefore.WithLabelValues(preset, unit).Observe(float64(before))
		m.tokensAfter.WithLabelValues(preset, unit).Observe(float64(after))
		m.ratio.WithLabelValues(preset).Observe(float64(after) / float64(before))
	}
}

// RunEffects records what a committed run did to the agent's cache and
// what it is worth: prefix and rewrite tokens, its net saving in USD (a
// counter per sign, since a counter only grows) when priced, and a
// reflection of its session's log. Absent figures record nothing.
func (m *Metrics) RunEffects(preset string, cache *contract.CacheFigures, cost *contract.CostFigures, log *contract.LogFigures) {
	if m == nil {
		return
	}
	if cache != nil {
		m.cacheTokens.WithLabelValues(preset, "prefix").Add(float64(cache.PrefixTokens))
		m.cacheTokens.WithLabelValues(preset, "rewrite").Add(float64(cache.RewriteTokens))
	}
	if cost != nil && cost.Priced {
		if cost.NetSavingUSD >= 0 {
			m.netSaving.WithLabelValues(preset, "saving").Add(cost.NetSavingUSD)
		} else {
			m.netSaving.WithLabelValues(preset, "cost").Add(-cost.NetSavingUSD)
		}
	}
	if log != nil && log.Reflected {
		m.reflections.WithLabelValues(preset).Inc()
	}
}

// Step records one attempt of a pipeline step.
func (m *Metrics) Step(kind string, attempt int, d time.Duration, err error) {
	if m == nil {
		return
	}
	result, retry := "ok", "false"
	if err != nil {
		result = "error"
	}
	if attempt > 1 {
		retry = "true"
	}
	m.stepDuration.WithLabelValues(kind, result).Observe(d.Seconds())
	m.stepAttempts.WithLabelValues(kind, result, retry).Inc()
}

// Summarizer records one summarizer call: result is "ok" or the error
// class.
func (m *Metrics) Summarizer(model, result string, d time.Duration, promptTokens, completionTokens int) {
	if m == nil {
		return
	}
	m.llmCalls.WithLabelValues(model, result).Inc()
	m.llmLatency.WithLabelValues(model).Observe(d.Seconds())
	m.llmTokens.WithLabelValues(model, "prompt").Add(float64(promptTokens))
	m.llmTokens.WithLabelValues(model, "completion").Add(float64(completionTokens))
}

// Drift records one drift verdict.
func (m *Metrics) Drift(check string, passed bool) {
	if m == nil {
		return
	}
	result := "passed"
	if !passed {
		result = "failed"
	}
	m.drift.WithLabelValues(check, result).Inc()
}

// Offload records one offloaded result.
func (m *Metrics) Offload(bytes int) {
	if m == nil {
		return
	}
	m.offloads.Inc()
	m.offloadBytes.Add(float64(bytes))
}

// HTTP records one API request.
func (m *Metrics) HTTP(route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(route, statusText(status)).Inc()
	m.httpDurations.WithLabelValues(route).Observe(d.Seconds())
}

func statusText(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}
