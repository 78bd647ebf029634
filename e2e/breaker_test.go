package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestLoopBreaker: two runs in a row that free nothing open the session's
// breaker; the next automatic event is refused with breaker_open (no run,
// Retry-After), a manual compaction still runs as the probe, and its
// success closes the breaker.
func TestLoopBreaker(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
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

// TestReplaysDoNotChangeTheLiveSession: a what-if replay at another limit
// is audit data: /status keeps describing the session's last real run,
// and counts the replay apart.
func TestReplaysDoNotChangeTheLiveSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	ctx := t.Context()
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	sub, res := e.compact(gatewayEvent("adaptive", 200000, input))
	checkRun(t, e, input, sub, res)
	svc := &audit.Service{Store: e.store, Blob: e.blob}
	before, err := svc.Status(ctx, e.tenant, "s1")
	require.NoError(t, err)

	rep, err := e.gw.Replay(ctx, e.tenant, sub.RunID, gateway.ReplayRequest{RequestID: "what-if", Preset: "three-tier", ContextLimit: 40000})
	require.NoError(t, err)
	_, err = e.gw.Wait(ctx, rep.RunID)
	require.NoError(t, err)

	after, err := svc.Status(ctx, e.tenant, "s1")
	require.NoError(t, err)
	require.Equal(t, sub.RunID, after.LastRunID, "the replay is not the session's last run")
	require.Equal(t, before.Usage, after.Usage)
	require.Equal(t, before.Level, after.Level)
	require.Equal(t, 1, after.Replays)
	replayRows := 0
	for _, h := range after.History {
		if h.Replay {
			replayRows++
			require.Equal(t, rep.RunID, h.RunID)
		}
	}
	require.Positive(t, replayRows, "the replay's passes are listed, marked as a replay")
}
