package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestClaimEvent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	existing, conflict, err := s.ClaimEvent(ctx, "acme", "s1", "ev-1", "sha-a", "run-1")
	require.NoError(t, err)
	require.Empty(t, existing, "first claim")
	require.False(t, conflict)

	tests := []struct {
		name                  string
		tenant, session, body string
		runID                 string
		wantRun               string
		wantConflict          bool
	}{
		{"duplicate delivery", "acme", "s1", "sha-a", "run-2", "run-1", false},
		{"retry of the same claim", "acme", "s1", "sha-a", "run-1", "run-1", false},
		{"same id other body", "acme", "s1", "sha-b", "run-3", "run-1", true},
		{"same id other session", "acme", "s2", "sha-a", "run-4", "run-1", true},
		{"same id other tenant", "beta", "s1", "sha-b", "run-5", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing, conflict, err := s.ClaimEvent(t.Context(), tt.tenant, tt.session, "ev-1", tt.body, tt.runID)
			require.NoError(t, err)
			require.Equal(t, tt.wantRun, existing)
			require.Equal(t, tt.wantConflict, conflict)
		})
	}

	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, "select count(*) from events").Scan(&n))
	require.Equal(t, 2, n, "one claim per tenant")

	_, _, err = s.ClaimEvent(ctx, "acme", "s1", "ev-2", "", "run-9")
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
