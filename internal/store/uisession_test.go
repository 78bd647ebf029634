package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestUISessionLifecycle: a session is opened only with a live key, is
// found by its id alone, ends at sign-out for good (even a direct update
// cannot revive it), and dies with its key.
func TestUISessionLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	const key = "key-ui-0123456789abcdef"
	_, err := st.CreateAPIKey(ctx, "acme", key, time.Time{})
	require.NoError(t, err)

	_, ok, err := st.OpenUISession(ctx, "not-a-key", time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "no session without a live key")

	sess, ok, err := st.OpenUISession(ctx, key, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, sess.ID, 43, "32 random bytes, base64url")
	require.NotContains(t, sess.ID, key)
	require.WithinDuration(t, time.Now().Add(time.Hour), sess.Expires, time.Minute)
	other, ok, err := st.OpenUISession(ctx, key, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEqual(t, sess.ID, other.ID, "each sign-in its own id")

	tenant, ok, err := st.UISessionTenant(ctx, sess.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "acme", tenant)
	// The same id with its last character changed (never to itself).
	last := "A"
	if sess.ID[42:] == last {
		last = "B"
	}
	for _, forged := range []string{"", key, "x'; drop table ui_sessions; --", sess.ID[:42] + last} {
		_, ok, err := st.UISessionTenant(ctx, forged)
		require.NoError(t, err)
		require.False(t, ok, "forged id %q", forged)
	}

	require.NoError(t, st.EndUISession(ctx, sess.ID))
	require.NoError(t, st.EndUISession(ctx, sess.ID), "ending twice is a no-op")
	_, ok, err = st.UISessionTenant(ctx, sess.ID)
	require.NoError(t, err)
	require.False(t, ok, "ended at sign-out")
	_, err = st.Pool().Exec(ctx, `update ui_sessions set ended_at = null`)
	require.ErrorContains(t, err, "for good", "an ended session is never revived")
	_, err = st.Pool().Exec(ctx, `update ui_sessions set expires_at = now() + interval '10 years' where ended_at is null`)
	require.ErrorContains(t, err, "only its end may be recorded")

	_, ok, err = st.UISessionTenant(ctx, other.ID)
	require.NoError(t, err)
	require.True(t, ok, "the other sign-in is still live")
	revoked, err := st.RevokeAPIKey(ctx, key)
	require.NoError(t, err)
	require.True(t, revoked)
	_, ok, err = st.UISessionTenant(ctx, other.ID)
	require.NoError(t, err)
	require.False(t, ok, "revoking the key ends its sessions")
}
