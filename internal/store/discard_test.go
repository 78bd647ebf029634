package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestDiscardInput: a failed submit's original is deleted only when no
// run refers to it, and a later claim of the same bytes writes it again
// before it commits, so a claimed run never names a deleted object.
func TestDiscardInput(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	const used, orphan = "tenants/acme/archive/aa/used", "tenants/acme/archive/bb/orphan"
	_, err := s.SubmitRun(ctx, store.Run{ID: "run-used", Tenant: "acme", Session: "s1", EventID: "ev-1", InputKey: used}, "body", nil)
	require.NoError(t, err)

	var deletes atomic.Int32
	del := func(context.Context) error { deletes.Add(1); return nil }
	gone, err := s.DiscardInput(ctx, "acme", used, del)
	require.NoError(t, err)
	require.False(t, gone, "a run refers to it")
	gone, err = s.DiscardInput(ctx, "other", orphan, del)
	require.NoError(t, err)
	require.True(t, gone)
	gone, err = s.DiscardInput(ctx, "acme", orphan, del)
	require.NoError(t, err)
	require.True(t, gone, "no run of acme refers to it")
	require.EqualValues(t, 2, deletes.Load())

	// A failing delete leaves no record: the object is still there.
	const kept = "tenants/acme/archive/cc/kept"
	_, err = s.DiscardInput(ctx, "acme", kept, func(context.Context) error { return errors.New("S3 down") })
	require.ErrorContains(t, err, "S3 down")

	// A claim of the discarded bytes must write them again first.
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-2", Tenant: "acme", Session: "s1", EventID: "ev-2", InputKey: orphan}, "body2", nil)
	require.ErrorContains(t, err, "discarded")
	var restores atomic.Int32
	restore := func(context.Context) error { restores.Add(1); return nil }
	sub, err := s.SubmitRun(ctx, store.Run{ID: "run-2", Tenant: "acme", Session: "s1", EventID: "ev-2", InputKey: orphan}, "body2", restore)
	require.NoError(t, err)
	require.Equal(t, "run-2", sub.RunID)
	require.EqualValues(t, 1, restores.Load())
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-3", Tenant: "acme", Session: "s1", EventID: "ev-3", InputKey: orphan}, "body3", restore)
	require.NoError(t, err)
	require.EqualValues(t, 1, restores.Load(), "written again once; the next claim finds it")
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-4", Tenant: "acme", Session: "s1", EventID: "ev-4", InputKey: kept}, "body4",
		func(context.Context) error { return errors.New("must not be called") })
	require.NoError(t, err, "a key whose delete failed was never marked discarded")
	gone, err = s.DiscardInput(ctx, "acme", orphan, del)
	require.NoError(t, err)
	require.False(t, gone, "now runs refer to it")
}
