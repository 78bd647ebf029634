package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestSubmitRunClaimsEachEventOnce: the first submission of an event
// claims it; a repeat of the same session and body names the first run;
// another body or session is a conflict; event ids are per tenant.
func TestSubmitRunClaimsEachEventOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	submit := func(tenant, session, body, runID string) (store.Submission, error) {
		return s.SubmitRun(t.Context(), store.Run{ID: runID, Tenant: tenant, Session: session, EventID: "ev-1"}, body, nil)
	}

	sub, err := submit("acme", "s1", "sha-a", "run-1")
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: "run-1", Generation: 1}, sub, "first claim")

	tests := []struct {
		name                  string
		tenant, session, body string
		runID                 string
		want                  store.Submission
	}{
		{"duplicate delivery", "acme", "s1", "sha-a", "run-2", store.Submission{RunID: "run-1", Existing: true, Generation: 1}},
		{"retry of the same claim", "acme", "s1", "sha-a", "run-1", store.Submission{RunID: "run-1", Existing: true, Generation: 1}},
		{"same id other body", "acme", "s1", "sha-b", "run-3", store.Submission{RunID: "run-1", Conflict: true}},
		{"same id other session", "acme", "s2", "sha-a", "run-4", store.Submission{RunID: "run-4", Generation: 1}},
		{"same id other tenant", "beta", "s1", "sha-b", "run-5", store.Submission{RunID: "run-5", Generation: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := submit(tt.tenant, tt.session, tt.body, tt.runID)
			require.NoError(t, err)
			require.Equal(t, tt.want, sub)
		})
	}

	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, "select count(*) from events").Scan(&n))
	require.Equal(t, 3, n, "one claim per session of a tenant")

	_, err = s.SubmitRun(ctx, store.Run{ID: "run-9", Tenant: "acme", Session: "s1", EventID: "ev-2"}, "", nil)
	require.ErrorContains(t, err, "bodySHA256 is empty")
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	const key = "ck_live_0123456789abcdef"

	require.NoError(t, s.AddAPIKey(ctx, "acme", key))
	require.NoError(t, s.AddAPIKey(ctx, "acme", key), "retry")
	require.ErrorContains(t, s.AddAPIKey(ctx, "beta", key), "belongs to another tenant")
	require.ErrorContains(t, s.AddAPIKey(ctx, "acme", "short"), "shorter than")

	tenant, ok, err := s.TenantForKey(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "acme", tenant)

	for _, k := range []string{"", "ck_live_0123456789abcdeX", key + " "} {
		_, ok, err = s.TenantForKey(ctx, k)
		require.NoError(t, err)
		require.False(t, ok, "%q", k)
	}

	// Only the hash is stored.
	var stored string
	require.NoError(t, s.Pool().QueryRow(ctx, "select key_hash from api_keys").Scan(&stored))
	require.Equal(t, store.HashAPIKey(key), stored)
	require.NotContains(t, stored, key)
	require.Len(t, stored, 64)

	revoked, err := s.RevokeAPIKey(ctx, key)
	require.NoError(t, err)
	require.True(t, revoked)
	revoked, err = s.RevokeAPIKey(ctx, key)
	require.NoError(t, err)
	require.False(t, revoked)
	_, ok, err = s.TenantForKey(ctx, key)
	require.NoError(t, err)
	require.False(t, ok, "revoked key")
}

// TestSubmitRunRefusesASessionBeingErased: while a session's erasure is
// under way, its events are refused in the claim itself and leave no
// event or run row; other sessions and, once the erasure finished, the
// session itself take events again.
func TestSubmitRunRefusesASessionBeingErased(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	submit := func(session, event string) error {
		run := store.Run{ID: "run-" + session + "-" + event, Tenant: "acme", Session: session, EventID: event}
		_, err := s.SubmitRun(ctx, run, "sha-"+event, nil)
		return err
	}
	require.NoError(t, submit("s1", "ev-0"))
	_, err := s.SubmitRun(ctx, store.Run{ID: "run-beta-s3", Tenant: "beta", Session: "s3", EventID: "ev-0"}, "sha-0", nil)
	require.NoError(t, err)
	e, _, err := s.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	_, _, err = s.StartErasure(ctx, "beta", "s3", "test")
	require.NoError(t, err)

	require.ErrorIs(t, submit("s1", "ev-1"), store.ErrSessionErasing)
	var events, runs int
	require.NoError(t, s.Pool().QueryRow(ctx, "select (select count(*) from events), (select count(*) from runs)").Scan(&events, &runs))
	require.Equal(t, [2]int{2, 2}, [2]int{events, runs}, "a refused claim leaves nothing")

	require.NoError(t, submit("s2", "ev-2"), "another session of the tenant")
	require.NoError(t, submit("s3", "ev-3"), "another tenant's erasure of a session with the same name")

	require.NoError(t, s.FinishErasure(ctx, e.ID, 0, 0, nil))
	require.NoError(t, submit("s1", "ev-1"), "the erasure finished")
}

// TestErasedSessionLifecycle: once an erasure is asked for, a caller's
// own offload is refused like an event; reads learn the session is gone
// (with the erasure) while it runs and after it; the next event starts
// generation 2, which names the erasure before it and is live again.
func TestErasedSessionLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	_, err := s.SubmitRun(ctx, store.Run{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1"}, "sha-1", nil)
	require.NoError(t, err)
	_, err = s.FailRun(ctx, "run-1", store.Failure{Message: "done"})
	require.NoError(t, err)
	require.NoError(t, s.CheckSessionGone(ctx, "acme", "s1"), "a live session")
	require.NoError(t, s.CheckSessionGone(ctx, "acme", "never"), "a name never used is not gone")
	g, err := s.SessionGeneration(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, store.Generation{Number: 1}, g)

	e, _, err := s.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	err = s.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", Key: "tenants/acme/offload/x", SHA256: "x"})
	require.ErrorIs(t, err, store.ErrSessionErasing, "a caller's offload during the erasure")
	var gone *store.SessionGoneError
	require.ErrorAs(t, s.CheckSessionGone(ctx, "acme", "s1"), &gone, "being erased")
	require.Equal(t, e.ID, gone.Erasure.ID)
	require.True(t, gone.Erasure.FinishedAt.IsZero())
	require.NoError(t, s.CheckSessionGone(ctx, "beta", "s1"), "another tenant's session of that name")

	_, err = s.EraseSessionRows(ctx, e.ID, "acme", "s1")
	require.NoError(t, err)
	require.NoError(t, s.FinishErasure(ctx, e.ID, 0, 0, nil))
	require.ErrorAs(t, s.CheckSessionGone(ctx, "acme", "s1"), &gone, "erased")
	require.False(t, gone.Erasure.FinishedAt.IsZero())
	require.Contains(t, gone.Error(), e.ID)

	// The name taken again: generation 2, which says what came before.
	g, err = s.SessionGeneration(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, 2, g.Number, "the generation the next event starts")
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-2", Tenant: "acme", Session: "s1", EventID: "e1"}, "sha-2", nil)
	require.NoError(t, err, "the event id of the erased generation is free again")
	require.NoError(t, s.CheckSessionGone(ctx, "acme", "s1"), "the new generation is live")
	g, err = s.SessionGeneration(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, 2, g.Number)
	require.NotNil(t, g.Previous)
	require.Equal(t, e.ID, g.Previous.ID)
}
