// Package metrics holds the product's Prometheus metrics and the Temporal
// SDK's, in one registry per process, exposed at /metrics by the worker
// (METRICS_ADDR) and by `starter serve`. Names are stable: the Grafana
// dashboard in deploy/grafana is built on them. Labels carry presets,
// formats, steps and outcomes, never tenants' data.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
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
	proxyRequests *prometheus.CounterVec
	proxySnaps    *prometheus.CounterVec
	cacheTokens   *prometheus.CounterVec
	netSaving     *prometheus.CounterVec
	reflections   *prometheus.CounterVec
	admitWait     prometheus.Histogram
	admitRetold   prometheus.Counter

	sdkScope tally.Scope
	closer   func() error
}

// sizeBuckets span a small chat to a 1M-token session.
var sizeBuckets = prometheus.ExponentialBuckets(1000, 2, 11)

// liveHeapRule adds the runtime's live heap as of the last collection
// (go_gc_heap_live_bytes) to the Go collector's defaults: the process's
// memory apart from the garbage not yet collected, which is what says
// whether a process came back to its quiet level after a load (its RSS
// follows GOGC's headroom and the runtime's scavenging as well).
var liveHeapRule = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}

// New registers every metric in a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(liveHeapRule)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	m.proxyRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_proxy_requests_total",
		Help: "Requests through the provider-compatible proxy, by upstream and what the proxy did (forwarded, spliced, degraded, refused, answered)."},
		[]string{"upstream", "state"})
	m.proxySnaps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_proxy_snapshots_total",
		Help: "Snapshots of proxy sessions between compactions, by outcome (recorded, failed, dropped: too many sessions waiting to be written)."},
		[]string{"outcome"})
	m.cacheTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_cache_tokens_total",
		Help: "Tokens of committed outputs by what they do to the agent's prompt cache: prefix (unchanged, still cached) or rewrite (written again by its next call)."}, []string{"preset", "type"})
	m.netSaving = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_net_saving_usd_total",
		Help: "Net saving of committed runs over the agent's next COST_TURNS calls, after the summarizer's cost and the cache re-write (priced runs only), by sign."}, []string{"preset", "sign"})
	m.reflections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compactor_log_reflections_total",
		Help: "Runs that condensed their session's summary log into one block."}, []string{"preset"})
	m.admitWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "compactor_admission_wait_seconds",
		Help:    "How long a run waited for its tenant's admission slot (TENANT_RUNS_IN_FLIGHT), from its first ask to its admission.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 17)})
	m.admitRetold = prometheus.NewCounter(prometheus.CounterOpts{Name: "compactor_admission_retold_total",
		Help: "Admitted runs still pending named again to their session: each is an admission signal presumed lost."})
	for _, c := range []prometheus.Collector{m.runs, m.overLimit, m.tokensBefore, m.tokensAfter, m.ratio, m.stepDuration,
		m.stepAttempts, m.llmCalls, m.llmLatency, m.llmTokens, m.drift, m.offloads, m.offloadBytes, m.httpRequests, m.httpDurations,
		m.proxyRequests, m.proxySnaps, m.cacheTokens, m.netSaving, m.reflections, m.admitWait, m.admitRetold} {
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

// Admission records one Admit call: the waits of the runs it admitted
// and how many admitted runs it named again.
func (m *Metrics) Admission(waited []time.Duration, retold int) {
	if m == nil {
		return
	}
	for _, d := range waited {
		m.admitWait.Observe(d.Seconds())
	}
	m.admitRetold.Add(float64(retold))
}

// AdmissionLoad is where admission stands across every tenant, as the
// admission gauges report it.
type AdmissionLoad struct {
	Waiting, InFlight, TenantsWaiting int
	OldestWait                        time.Duration
}

// admissionReadTimeout bounds the gauges' read at a scrape: a Postgres
// that does not answer costs the scrape this much, not its own timeout.
const admissionReadTimeout = 2 * time.Second

// WatchAdmission registers the admission gauges, read by read at each
// scrape: runs waiting for a slot, runs holding one, tenants waiting, and
// the oldest wait (the figure to alert on; docs/operations.md). A read
// that fails reports none of them for that scrape, so an alert on their
// absence sees it. Call it once, in one process per deployment (the
// worker): the figures are the database's, not the process's.
func (m *Metrics) WatchAdmission(read func(context.Context) (AdmissionLoad, error)) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&admissionGauges{read: read})
}

var (
	admissionWaitingDesc = prometheus.NewDesc("compactor_admission_waiting_runs",
		"Runs waiting for their tenant's admission slot (TENANT_RUNS_IN_FLIGHT).", nil, nil)
	admissionInFlightDesc = prometheus.NewDesc("compactor_admission_in_flight_runs",
		"Runs holding an admission slot: running, or admitted and not started yet.", nil, nil)
	admissionTenantsDesc = prometheus.NewDesc("compactor_admission_tenants_waiting",
		"Tenants with at least one run waiting for admission.", nil, nil)
	admissionOldestDesc = prometheus.NewDesc("compactor_admission_oldest_wait_seconds",
		"How long the longest-waiting run has waited for admission (0 when none waits).", nil, nil)
)

// admissionGauges is a collector that reads the admission figures from
// Postgres at each scrape rather than keeping a copy that could go stale.
type admissionGauges struct {
	read func(context.Context) (AdmissionLoad, error)
}

func (g *admissionGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- admissionWaitingDesc
	ch <- admissionInFlightDesc
	ch <- admissionTenantsDesc
	ch <- admissionOldestDesc
}

func (g *admissionGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), admissionReadTimeout)
	defer cancel()
	l, err := g.read(ctx)
	if err != nil {
		slog.Warn("admission gauges not reported", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(admissionWaitingDesc, prometheus.GaugeValue, float64(l.Waiting))
	ch <- prometheus.MustNewConstMetric(admissionInFlightDesc, prometheus.GaugeValue, float64(l.InFlight))
	ch <- prometheus.MustNewConstMetric(admissionTenantsDesc, prometheus.GaugeValue, float64(l.TenantsWaiting))
	ch <- prometheus.MustNewConstMetric(admissionOldestDesc, prometheus.GaugeValue, l.OldestWait.Seconds())
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

// Proxy records one request through the proxy: its upstream and the
// first word of its X-Compactor-State (forwarded, spliced, degraded,
// refused, answered), so that a rise of degraded answers shows.
func (m *Metrics) Proxy(upstream, state string) {
	if m == nil {
		return
	}
	word, _, _ := strings.Cut(state, ";")
	switch word {
	case "forwarded", "spliced", "degraded", "refused", "answered":
	default:
		word = "other"
	}
	m.proxyRequests.WithLabelValues(upstream, word).Inc()
}

func statusText(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "other"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}

// ProxySnapshot counts a proxy session's snapshot by outcome (recorded,
// failed, dropped).
func (m *Metrics) ProxySnapshot(outcome string) {
	if m == nil {
		return
	}
	m.proxySnaps.WithLabelValues(outcome).Inc()
}
