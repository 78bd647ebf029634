package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob/blobtest"
)

// TestOutagesAnswerLikeOutages: with S3 down, /readyz says so with a 503
// and Retry-After (while /healthz, the process, stays 200), and an event
// answers 503 with Retry-After instead of a 500; once S3 is back, both
// recover.
func TestOutagesAnswerLikeOutages(t *testing.T) {
	t.Parallel()
	bs, proxy := blobtest.NewBehindProxy(t)
	a := newAPIEnv(t, offline(), withBlob(bs))

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
