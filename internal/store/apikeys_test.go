package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAPIKeyLifecycle: keys are listed by id and prefix, never by value;
// expired and revoked keys do not authenticate; use is recorded.
func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	live, err := s.CreateAPIKey(ctx, "acme", "live-key-0123456789abcdefghij", time.Time{})
	require.NoError(t, err)
	require.Equal(t, "live-key", live.Prefix)
	require.Len(t, live.ID, 16)
	expired, err := s.CreateAPIKey(ctx, "acme", "expired-0123456789abcdefghij", time.Now().Add(-time.Minute))
	require.NoError(t, err)
	_, err = s.CreateAPIKey(ctx, "other", "other-key-0123456789abcdefghij", time.Now().Add(time.Hour))
	require.NoError(t, err)

	k, ok, err := s.Authenticate(ctx, "live-key-0123456789abcdefghij")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "acme", k.Tenant)
	_, ok, err = s.Authenticate(ctx, "expired-0123456789abcdefghij")
	require.NoError(t, err)
	require.False(t, ok, "an expired key does not authenticate")
	_, ok, err = s.Authenticate(ctx, "unknown-0123456789abcdefghij")
	require.NoError(t, err)
	require.False(t, ok)

	keys, err := s.ListAPIKeys(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, keys, 2)
	byID := map[string]bool{}
	for _, k := range keys {
		byID[k.ID] = true
		require.Equal(t, "acme", k.Tenant)
		if k.ID == live.ID {
			require.False(t, k.LastUsed.IsZero(), "use is recorded")
		}
		if k.ID == expired.ID {
			require.True(t, k.LastUsed.IsZero())
			require.False(t, k.Expires.IsZero())
		}
	}
	require.True(t, byID[live.ID] && byID[expired.ID])
	all, err := s.ListAPIKeys(ctx, "")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(all), 3)

	revoked, err := s.RevokeAPIKeyByID(ctx, live.ID)
	require.NoError(t, err)
	require.True(t, revoked)
	revoked, err = s.RevokeAPIKeyByID(ctx, live.ID)
	require.NoError(t, err)
	require.False(t, revoked, "once")
	_, ok, err = s.Authenticate(ctx, "live-key-0123456789abcdefghij")
	require.NoError(t, err)
	require.False(t, ok, "a revoked key does not authenticate")
}
