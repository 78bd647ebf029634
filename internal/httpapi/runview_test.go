package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestRunReads: the run routes read through package runview. A live run
// waited for answers after the wait with its status as it is (no
// workflow service here: the row is read again until then), then at
// once once it is final; its output is a 409 until it commits, then the
// bytes with their SHA-256; a run without an archived original is a 404
// saying so; another tenant's run is a 404 on every route.
func TestRunReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, _, err := f.st.CreateRun(ctx, store.Run{ID: "run-live", Tenant: "tenant-a", Session: "s1", EventID: "e1", Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)

	var d struct {
		Status string `json:"status"`
		Run    struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"run"`
	}
	start := time.Now()
	resp := f.do(t, "GET", "/v1/runs/run-live?wait=1s", f.keyA, nil, &d)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "pending", d.Status)
	require.Equal(t, "pending", d.Run.Status)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the wait is the caller's")

	var conflict errorAnswer
	resp = f.do(t, "GET", "/v1/runs/run-live/output", f.keyA, nil, &conflict)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "run", conflict.Error.Field)
	require.Contains(t, conflict.Error.Message, "run is pending")
	var missing errorAnswer
	resp = f.do(t, "GET", "/v1/runs/run-live/original", f.keyA, nil, &missing)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a run without an archive, not a 500")
	require.Equal(t, CodeNotFound, missing.Error.Code)
	require.Contains(t, missing.Error.Message, "no archived original")

	output := []byte(`{"messages":[{"role":"user","content":"fix it"}]}`)
	ref, err := f.blob.PutContent(ctx, "tenant-a", blob.KindOutput, output)
	require.NoError(t, err)
	_, err = f.st.CommitRun(ctx, "run-live", store.RunResult{TokensAfter: 10, OutputKey: ref.Key, OutputSHA256: ref.SHA256})
	require.NoError(t, err)
	start = time.Now()
	resp = f.do(t, "GET", "/v1/runs/run-live?wait=60s", f.keyA, nil, &d)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "succeeded", d.Status)
	require.Less(t, time.Since(start), 30*time.Second, "a final run answers at once")

	resp = f.do(t, "GET", "/v1/runs/run-live/output", f.keyA, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sum := sha256.Sum256(output)
	require.Equal(t, hex.EncodeToString(sum[:]), resp.Header.Get("X-Content-SHA256"))
	require.Equal(t, "succeeded", resp.Header.Get("X-Run-Status"))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	for _, path := range []string{"/v1/runs/run-live?wait=5s", "/v1/runs/run-live/output", "/v1/runs/run-live/original"} {
		var e errorAnswer
		resp := f.do(t, "GET", path, f.keyB, nil, &e)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "run not found", e.Error.Message, path)
	}
}
