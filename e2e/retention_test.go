package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestRetentionSweepsExpiredRuns: a tenant's retention (PUT
// /v1/retention) is applied by the Temporal Schedule the worker creates:
// once triggered, the sweep deletes the tenant's runs that ended before
// it, rows and objects, in a recorded batch; another tenant without a
// retention keeps its runs.
func TestRetentionSweepsExpiredRuns(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	ctx := context.Background()

	var bad apiError
	resp, _ := a.call("PUT", "/v1/retention", a.key, []byte(`{"days": 0}`), &bad)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "days", bad.Error.Field)
	var set struct {
		Days float64 `json:"days"`
		Set  bool    `json:"set"`
	}
	resp, _ = a.call("GET", "/v1/retention", a.key, nil, &set)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, set.Set, "kept for good until set")
	// The API takes whole days only; the store takes about 1.7 seconds.
	resp, body := a.call("PUT", "/v1/retention", a.key, []byte(`{"days": 0.00002}`), &bad)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Equal(t, "days", bad.Error.Field)
	require.NoError(t, a.store.SetRetention(ctx, a.tenant, 0.00002))
	resp, body = a.call("GET", "/v1/retention", a.key, nil, &set)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, set.Set)

	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	post := func(key, eventID string) string {
		var res struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		}
		resp, body := a.call("POST", "/v1/sessions/s1/events", key, eventBody(map[string]any{"event_id": eventID,
			"model": "gpt-4o", "wait_seconds": 60}, input), &res)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		return res.RunID
	}
	expired := post(a.key, "old-1")
	kept := post(a.otherKey, "other-1")
	// A proxy session's snapshot of each tenant, as the proxy writes it.
	snapshot := func(tenant, session string) {
		body := []byte(`{"messages":[{"role":"user","content":"snapshot of ` + tenant + `"}]}`)
		sum := blob.SHA256Hex(body)
		_, err := a.store.AddSnapshot(ctx, store.Snapshot{Tenant: tenant, Session: session, Wire: "openai-chat", From: 1, To: 1,
			Digest: sum, Key: blob.ContentKey(tenant, blob.KindSnapshot, sum), SHA256: sum, Bytes: int64(len(body))},
			func(ctx context.Context) error {
				_, err := a.blob.PutContent(ctx, tenant, blob.KindSnapshot, body)
				return err
			})
		require.NoError(t, err)
	}
	snapshot(a.tenant, "proxy-s")
	snapshot(a.otherTenant, "proxy-s")
	time.Sleep(2 * time.Second)

	cfg := a.deps.Config
	cfg.RetentionSweepEvery = time.Hour
	require.NoError(t, app.EnsureRetentionSchedule(ctx, a.env.client, cfg))
	require.NoError(t, app.EnsureRetentionSchedule(ctx, a.env.client, cfg), "idempotent")
	h := a.env.client.ScheduleClient().GetHandle(ctx, contract.RetentionScheduleID)
	desc, err := h.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, contract.RetentionWorkflow, desc.Schedule.Action.(*client.ScheduleWorkflowAction).Workflow)
	require.NoError(t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))

	require.Eventually(t, func() bool {
		resp, _ := a.call("GET", "/v1/runs/"+expired, a.key, nil, nil)
		return resp.StatusCode == http.StatusNotFound
	}, time.Minute, 200*time.Millisecond, "the expired run is swept")
	prefix, err := blob.TenantPrefix(a.tenant)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		keys, err := a.blob.List(ctx, prefix)
		return err == nil && len(keys) == 0
	}, time.Minute, 200*time.Millisecond, "its objects are gone")
	var runs, rows int
	require.NoError(t, a.store.Pool().QueryRow(ctx, `select runs, rows_deleted from retention_sweeps where tenant_id = $1`, a.tenant).Scan(&runs, &rows))
	require.Equal(t, 1, runs)
	require.Positive(t, rows)

	resp, _ = a.call("GET", "/v1/runs/"+kept, a.otherKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a tenant without a retention keeps its runs")
	snaps, err := a.store.ListSnapshots(ctx, a.tenant, "proxy-s")
	require.NoError(t, err)
	require.Empty(t, snaps, "the expired snapshot is swept with its object")
	snaps, err = a.store.ListSnapshots(ctx, a.otherTenant, "proxy-s")
	require.NoError(t, err)
	require.Len(t, snaps, 1, "a tenant without a retention keeps its snapshots")
	_, err = a.blob.Get(ctx, snaps[0].Key)
	require.NoError(t, err)
}
