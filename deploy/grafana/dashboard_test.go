package grafana

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// TestDashboardUsesRegisteredMetrics: every metric the dashboard queries
// is one the product exports, with a type that fits how the query uses it,
// so that a rename or a type change (a histogram reported as a summary)
// cannot leave a panel silently empty. The queries are read with the
// Prometheus parser itself, so what is checked is what Prometheus runs.
func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("compactor.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	require.NotEmpty(t, dash.Panels)

	kinds := exportedKinds(t)
	quantiles, exprs := 0, 0
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			n, err := checkExpr(tg.Expr, kinds)
			require.NoError(t, err, "panel %q", p.Title)
			quantiles += n
			exprs++
		}
	}
	require.GreaterOrEqual(t, quantiles, 11, "every quantile panel was checked")
	require.GreaterOrEqual(t, exprs, 26, "every query was checked")
}

// exportedKinds returns the type of every metric family the product
// exports once each of its recorders has been used once.
func exportedKinds(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	m := metrics.New()
	m.Run("succeeded", "adaptive", "openai", "tokens", 1000, 500)
	m.Run("over_limit", "adaptive", "openai", "tokens", 1000, 900)
	m.Step("commit", 1, 0, nil)
	m.Summarizer("m", "ok", 0, 1, 1)
	m.Drift("intent", true)
	m.Offload(1)
	m.HTTP("GET /healthz", 200, 0)
	m.Admission([]time.Duration{time.Second}, 1)
	m.WatchAdmission(func(context.Context) (metrics.AdmissionLoad, error) { return metrics.AdmissionLoad{Waiting: 1}, nil })
	// The SDK's metrics, as a worker reports them (flushed by Close).
	h := m.SDKHandler()
	h.Timer("temporal_workflow_task_schedule_to_start_latency").Record(20 * time.Millisecond)
	h.Counter("temporal_workflow_completed").Inc(1)
	require.NoError(t, m.Close())
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	kinds := map[string]dto.MetricType{}
	for _, f := range families {
		kinds[f.GetName()] = f.GetType()
	}
	return kinds
}

// TestCheckExpr: the checker accepts the shapes the dashboard uses and
// rejects each mistake that leaves a panel empty or wrong.
func TestCheckExpr(t *testing.T) {
	t.Parallel()
	kinds := map[string]dto.MetricType{
		"c_total":   dto.MetricType_COUNTER,
		"g_bytes":   dto.MetricType_GAUGE,
		"h_seconds": dto.MetricType_HISTOGRAM,
		"s_seconds": dto.MetricType_SUMMARY,
	}
	tests := []struct {
		name      string
		expr      string
		quantiles int
		err       string // "" accepts
	}{
		{"counter rate", `sum by (k) (rate(c_total{k="v"}[5m]))`, 0, ""},
		{"counter increase", `increase(c_total[1h])`, 0, ""},
		{"gauge as is", `max(g_bytes)`, 0, ""},
		{"histogram quantile", `histogram_quantile(0.9, sum by (le, k) (rate(h_seconds_bucket[5m])))`, 1, ""},
		{"histogram mean", `rate(h_seconds_sum[5m]) / rate(h_seconds_count[5m])`, 0, ""},
		{"summary count rate", `rate(s_seconds_count[5m])`, 0, ""},
		{"two quantiles", `histogram_quantile(0.5, rate(h_seconds_bucket[5m])) - histogram_quantile(0.9, rate(h_seconds_bucket[5m]))`, 2, ""},

		{"syntax error", `sum by (k) (rate(c_total[5m])`, 0, "parse"},
		{"unknown function", `rat(c_total[5m])`, 0, "parse"},
		{"unknown metric", `rate(nope_total[5m])`, 0, `"nope_total" is not exported`},
		{"unknown suffix", `rate(c_total_bucket[5m])`, 0, `"c_total_bucket" is not exported`},
		{"rate over a gauge", `rate(g_bytes[5m])`, 0, "gauge"},
		{"irate over a gauge", `irate(g_bytes[5m])`, 0, "gauge"},
		{"rate over a histogram's name", `rate(h_seconds[5m])`, 0, "classic histogram"},
		{"summary under histogram_quantile", `histogram_quantile(0.9, rate(s_seconds_bucket[5m]))`, 0, `"s_seconds_bucket" is not exported`},
		{"summary name under histogram_quantile", `histogram_quantile(0.9, rate(s_seconds[5m]))`, 0, "summary"},
		{"counter under histogram_quantile", `histogram_quantile(0.9, rate(c_total[5m]))`, 0, "histogram_quantile"},
		{"buckets without rate", `histogram_quantile(0.9, h_seconds_bucket)`, 0, "rate or increase"},
		{"sum under histogram_quantile", `histogram_quantile(0.9, rate(h_seconds_sum[5m]))`, 0, "_bucket"},
		{"le aggregated away", `histogram_quantile(0.9, sum by (k) (rate(h_seconds_bucket[5m])))`, 0, "le"},
		{"le dropped by without", `histogram_quantile(0.9, sum without (le) (rate(h_seconds_bucket[5m])))`, 0, "le"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := checkExpr(tc.expr, kinds)
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, tc.quantiles, n)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.err)
		})
	}
}

// counterFuncs read a counter's increase over a range; over a gauge they
// see every drop as a counter reset and report nonsense.
var counterFuncs = []string{"rate", "irate", "increase"}

// checkExpr parses expr with the Prometheus parser and checks every metric
// it selects: the metric is exported (kinds, by family name), and its type
// fits how it is used. It returns how many histogram_quantile selections it
// checked.
func checkExpr(expr string, kinds map[string]dto.MetricType) (int, error) {
	root, err := parser.ParseExpr(expr)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", expr, err)
	}
	quantiles := 0
	var bad error
	parser.Inspect(root, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || bad != nil {
			return nil
		}
		n, err := checkSelector(vs, path, kinds)
		if err != nil {
			bad = fmt.Errorf("%q: %w", expr, err)
		}
		quantiles += n
		return nil
	})
	return quantiles, bad
}

// checkSelector checks one metric selector given the nodes above it (path,
// root first). It returns 1 when the selector is a histogram_quantile's
// buckets.
func checkSelector(vs *parser.VectorSelector, path []parser.Node, kinds map[string]dto.MetricType) (int, error) {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if name == "" {
		return 0, fmt.Errorf("a selector without a metric name: %s", vs)
	}
	kind, suffix, ok := family(name, kinds)
	if !ok {
		return 0, fmt.Errorf("metric %q is not exported by the product", name)
	}

	// The function applied to the selector (through its range), and
	// whether a histogram_quantile is above it.
	var fn string
	var quantile bool
	var grouping []*parser.AggregateExpr
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" {
				quantile = true
			} else if fn == "" && !quantile {
				fn = n.Func.Name
			}
		case *parser.AggregateExpr:
			if !quantile {
				grouping = append(grouping, n)
			}
		}
	}

	if slices.Contains(counterFuncs, fn) {
		switch {
		case kind == dto.MetricType_GAUGE:
			return 0, fmt.Errorf("%s over %q, a gauge", fn, name)
		case kind == dto.MetricType_HISTOGRAM && suffix == "":
			return 0, fmt.Errorf("%s over %q, a classic histogram: it has only _bucket, _sum and _count series", fn, name)
		case kind == dto.MetricType_SUMMARY && suffix == "":
			return 0, fmt.Errorf("%s over %q, a summary: only its _sum and _count are counters", fn, name)
		case kind != dto.MetricType_COUNTER && kind != dto.MetricType_HISTOGRAM && kind != dto.MetricType_SUMMARY:
			return 0, fmt.Errorf("%s over %q, a %s", fn, name, kind)
		}
	}
	if !quantile {
		return 0, nil
	}
	// histogram_quantile reads the buckets of a histogram; over a summary
	// (the tally reporter's default for timers) it is always empty.
	if kind != dto.MetricType_HISTOGRAM {
		return 0, fmt.Errorf("histogram_quantile over %q, a %s", name, strings.ToLower(kind.String()))
	}
	if suffix != "_bucket" {
		return 0, fmt.Errorf("histogram_quantile over %q: it reads %s_bucket", name, strings.TrimSuffix(name, suffix))
	}
	if fn != "rate" && fn != "increase" {
		return 0, fmt.Errorf("histogram_quantile over %q: the buckets must be under rate or increase", name)
	}
	// Every aggregation between the quantile and the buckets must keep le,
	// or the quantile has no buckets to interpolate.
	for _, agg := range grouping {
		if slices.Contains(agg.Grouping, "le") == agg.Without {
			return 0, fmt.Errorf("histogram_quantile over %q: %s drops le", name, agg.Op)
		}
	}
	return 1, nil
}

// family finds the exported family a series name belongs to: the name
// itself, or a histogram's _bucket, _sum or _count, or a summary's _sum or
// _count.
func family(name string, kinds map[string]dto.MetricType) (dto.MetricType, string, bool) {
	if kind, ok := kinds[name]; ok {
		return kind, "", true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		// A missing name reads as the zero type, COUNTER: ask first.
		kind, ok := kinds[base]
		if ok && (kind == dto.MetricType_HISTOGRAM || kind == dto.MetricType_SUMMARY && suffix != "_bucket") {
			return kind, suffix, true
		}
	}
	return 0, "", false
}
