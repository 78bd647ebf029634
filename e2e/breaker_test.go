package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestLoopBreaker: two runs in a row that free nothing open the session's
// breaker; the next automatic event is refused with breaker_open (no run,
// Retry-After), a manual compaction still runs as the probe, and its
// success closes the breaker.
func TestLoopBreaker(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, offline())
	a.gw.Breaker = store.BreakerRule{Runs: 2, Window: time.Hour, MinFreed: 0.05}
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	event := func(id, kind string, limit int) (*http.Response, []byte) {
		body := eventBody(map[string]any{"event_id": id, "kind": kind, "preset": "adaptive", "model": "gpt-4o",
			"context_limit": limit, "wait_seconds": 60}, input)
		return a.call("POST", "/v1/sessions/looping/events", a.key, body, nil)
	}
	// Far under its limit: nothing to free, twice.
	for _, id := range []string{"auto-1", "auto-2"} {
		resp, _ := event(id, "threshold", 1_000_000)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, body := event("auto-3", "threshold", 1_000_000)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"breaker_open"`)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	runs, err := a.store.ListRuns(t.Context(), store.RunFilter{Tenant: a.tenant, Session: "looping"})
	require.NoError(t, err)
	require.Len(t, runs, 2, "a refused event makes no run")

	resp, _ = event("auto-2", "threshold", 1_000_000)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a resubmitted event still answers its run")

	// The manual probe compacts for real, and closes the breaker.
	resp, body = event("probe", "manual", 20000)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = event("auto-4", "threshold", 1_000_000)
	require.Equal(t, http.StatusOK, resp.StatusCode, "closed again: %s", body)
}
