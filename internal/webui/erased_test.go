package webui

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestErasedSessionPageAnswersGone: the session page of an erased session
// answers 410 naming the erasure, as the API does, not "not found".
func TestErasedSessionPageAnswersGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, _, err := f.store.CreateRun(ctx, store.Run{ID: "run-e", Tenant: tenantA, Session: "gone-s", EventID: "e1",
		Trigger: "manual", Status: store.RunPending})
	require.NoError(t, err)
	_, err = f.store.FailRun(ctx, "run-e", store.Failure{Message: "done"})
	require.NoError(t, err)
	e, _, err := f.store.StartErasure(ctx, tenantA, "gone-s", "test")
	require.NoError(t, err)
	_, err = f.store.EraseSessionRows(ctx, e.ID, tenantA, "gone-s")
	require.NoError(t, err)
	require.NoError(t, f.store.FinishErasure(ctx, e.ID, 0, 0, nil))

	a := f.get("/ui/sessions/gone-s", f.signIn(f.keyA))
	require.Equal(t, http.StatusGone, a.status, a.body)
	require.Contains(t, a.body, e.ID)
	require.Contains(t, a.body, "was erased")
}
