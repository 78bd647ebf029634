package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// TestMetricsAfterARun: once a run is done, /metrics shows the product's
// metrics (runs by outcome, sizes, steps, drift, HTTP requests) and the
// Temporal SDK's.
func TestMetricsAfterARun(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM(), withMetrics(metrics.New()))
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	body := eventBody(map[string]any{"event_id": "m-1", "preset": "three-tier", "model": "gpt-4o", "context_limit": 20000, "wait_seconds": 60}, input)
	resp, raw := a.call("POST", "/v1/sessions/metrics/events", a.key, body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)

	mresp, err := a.client.Get(a.url + "/metrics")
	require.NoError(t, err)
	defer mresp.Body.Close()
	require.Equal(t, http.StatusOK, mresp.StatusCode)
	data, err := io.ReadAll(mresp.Body)
	require.NoError(t, err)
	text := string(data)
	for _, want := range []string{
		`compactor_runs_total{format="openai",outcome="succeeded",preset="three-tier"} 1`,
		`compactor_tokens_before_count{preset="three-tier",unit="tokens"} 1`,
		`compactor_ratio_count{preset="three-tier"} 1`,
		`compactor_step_attempts_total{kind="commit",result="ok",retry="false"}`,
		`compactor_drift_verdicts_total{check="identifiers"`,
		`compactor_drift_verdicts_total{check="intent"`,
		`compactor_http_requests_total{route="POST /v1/sessions/{session}/events",status="200"} 1`,
		`compactor_cache_tokens_total{preset="three-tier",type="prefix"}`,
		`compactor_cache_tokens_total{preset="three-tier",type="rewrite"}`,
		`compactor_net_saving_usd_total{preset="three-tier",sign=`,
		`temporal_`,
	} {
		require.Contains(t, text, want)
	}
	require.False(t, strings.Contains(text, a.tenant), "no tenant in the metrics")
}
