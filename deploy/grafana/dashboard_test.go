package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// TestDashboardUsesRegisteredMetrics: every compactor_ metric the
// dashboard queries is one the product registers, so a rename cannot
// leave a panel silently empty.
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

	m := metrics.New()
	m.Run("succeeded", "adaptive", "openai", "tokens", 1000, 500)
	m.Run("over_limit", "adaptive", "openai", "tokens", 1000, 900)
	m.Step("commit", 1, 0, nil)
	m.Summarizer("m", "ok", 0, 1, 1)
	m.Drift("intent", true)
	m.Offload(1)
	m.HTTP("GET /healthz", 200, 0)
	// The SDK's metrics, as a worker reports them (flushed by Close).
	h := m.SDKHandler()
	h.Timer("temporal_workflow_task_schedule_to_start_latency").Record(20 * time.Millisecond)
	h.Counter("temporal_workflow_completed").Inc(1)
	require.NoError(t, m.Close())
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	known := map[string]bool{}
	kinds := map[string]dto.MetricType{}
	for _, f := range families {
		known[f.GetName()] = true
		kinds[f.GetName()] = f.GetType()
	}
	// histogram_quantile reads the buckets of a histogram; over a summary
	// (the tally reporter's default for timers) it is always empty.
	quantile := regexp.MustCompile(`histogram_quantile\([^,]+,.*?rate\(([a-z_]+)_bucket`)
	quantiles := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range quantile.FindAllStringSubmatch(tg.Expr, -1) {
				quantiles++
				require.True(t, known[m[1]], "panel %q queries %s, which is not registered", p.Title, m[1])
				require.Equal(t, dto.MetricType_HISTOGRAM, kinds[m[1]], "panel %q: histogram_quantile over %s, a %s", p.Title, m[1], kinds[m[1]])
			}
		}
	}
	require.GreaterOrEqual(t, quantiles, 9, "every quantile panel was checked")
	name := regexp.MustCompile(`compactor_[a-z_]+`)
	suffix := regexp.MustCompile(`_(bucket|count|sum)$`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				require.True(t, known[suffix.ReplaceAllString(n, "")], "panel %q queries %s, which is not registered", p.Title, n)
			}
		}
	}
}
