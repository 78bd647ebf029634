package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

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
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	known := map[string]bool{}
	for _, f := range families {
		known[f.GetName()] = true
	}
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
