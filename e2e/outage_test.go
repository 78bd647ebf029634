package e2e

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
)

// TestOutagesAnswerLikeOutages: with S3 down, /readyz says so with a 503
// and Retry-After (while /healthz, the process, stays 200), and an event
// answers 503 with Retry-After instead of a 500; once S3 is back, both
// recover.
func TestOutagesAnswerLikeOutages(t *testing.T) {
	t.Parallel()
	bs, proxy := blobtest.NewBehindProxy(t)
	a := newAPIEnv(t, withoutLLM(), withBlob(bs))

	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	resp, _ := a.call("GET", "/readyz", "", nil, &ready)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, map[string]string{"postgres": "ok", "s3": "ok", "temporal": "ok"}, ready.Checks)

	proxy.Down()
	resp, _ = a.call("GET", "/readyz", "", nil, &ready)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "unavailable", ready.Checks["s3"])
	require.Equal(t, "ok", ready.Checks["postgres"])
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	resp, _ = a.call("GET", "/healthz", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the process itself is alive")

	body := eventBody(map[string]any{"event_id": "during-outage", "preset": "adaptive", "model": "gpt-4o"}, readData(t, "swe-agent-deepseek/django__django-11742.json"))
	var apiErr apiError
	resp, _ = a.call("POST", "/v1/sessions/outage/events", a.key, body, &apiErr)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "unavailable", apiErr.Error.Code)
	require.Contains(t, apiErr.Error.Message, "S3")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	require.NoError(t, proxy.Up())
	resp, _ = a.call("GET", "/readyz", "", nil, &ready)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var accepted apiAccepted
	resp, _ = a.call("POST", "/v1/sessions/outage/events", a.key, body, &accepted)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "the same event goes through once S3 is back")
}

// TestReadinessSaysTheSummarizerIsUnreachable: with an LLM endpoint
// configured and down, /readyz stays 200 (runs go on, degraded, with the
// offline summarizer) but says "degraded" and names the llm check; with
// the endpoint up it is ready.
func TestReadinessSaysTheSummarizerIsUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())
	for _, tc := range []struct {
		url, status, llm string
	}{{closed, "degraded", "unavailable"}, {e.llm.URL(), "ready", "ok"}} {
		sum, err := llm.NewOpenAI(llm.Config{BaseURL: tc.url, APIKey: "k", Model: "m", Timeout: 5 * time.Second})
		require.NoError(t, err)
		srv := httptest.NewServer(httpapi.New(httpapi.Deps{Gateway: e.gw, Audit: &audit.Service{Store: e.store, Blob: e.blob},
			Store: e.store, Blob: e.blob, Logger: slog.New(slog.DiscardHandler), LLM: sum.Ping}))
		resp, err := srv.Client().Get(srv.URL + "/readyz")
		require.NoError(t, err)
		var ready struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&ready))
		resp.Body.Close()
		srv.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, tc.url)
		require.Equal(t, tc.status, ready.Status)
		require.Equal(t, tc.llm, ready.Checks["llm"])
		require.Equal(t, "ok", ready.Checks["temporal"])
	}
}
