package store_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestGetRunForTenantHidesOtherTenants(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	run := newRun(t, s, "acme", "s1")

	got, err := s.GetRunForTenant(ctx, "acme", run.ID)
	require.NoError(t, err)
	require.Equal(t, run, got)

	tests := []struct{ name, tenant, id string }{
		{"other tenant", "globex", run.ID},
		{"unknown run", "acme", uuid.NewString()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.GetRunForTenant(ctx, tc.tenant, tc.id)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
	_, err = s.GetRunForTenant(ctx, "", run.ID)
	require.ErrorContains(t, err, "tenant is empty")
}
