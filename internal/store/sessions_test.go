package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestOffloadsAreMarkedNotRemoved(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")

	a := store.Offload{Tenant: "acme", Session: "s1", RunID: r.ID, Key: "acme/off/a", ToolID: "toolu_a",
		ToolName: "bash", Tokens: 16000, SHA256: "ha"}
	b := store.Offload{Tenant: "acme", Session: "s1", Key: "acme/off/b", ToolID: "toolu_b", Tokens: 20000, SHA256: "hb"}
	require.NoError(t, s.AddOffload(ctx, a))
	require.NoError(t, s.AddOffload(ctx, a), "retry")
	require.NoError(t, s.AddOffload(ctx, b))
	require.NoError(t, s.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s2", Key: "acme/off/a"}), "other session")

	live, err := s.ListOffloads(ctx, "acme", "s1", false)
	require.NoError(t, err)
	require.Len(t, live, 2)
	require.Equal(t, "acme/off/a", live[0].Key)
	require.Equal(t, r.ID, live[0].RunID)
	require.Equal(t, 16000, live[0].Tokens)
	require.Empty(t, live[1].RunID)

	n, err := s.MarkOffloadsDeleted(ctx, "acme", "s1", []string{"acme/off/a", "unknown"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.MarkOffloadsDeleted(ctx, "acme", "s1", []string{"acme/off/a"})
	require.NoError(t, err)
	require.Zero(t, n, "retry marks nothing")

	live, err = s.ListOffloads(ctx, "acme", "s1", false)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, "acme/off/b", live[0].Key)

	all, err := s.ListOffloads(ctx, "acme", "s1", true)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "acme/off/a", all[0].Key)
	require.False(t, all[0].DeletedAt.IsZero())
	require.True(t, all[1].DeletedAt.IsZero())

	other, err := s.ListOffloads(ctx, "acme", "s2", false)
	require.NoError(t, err)
	require.Len(t, other, 1, "deletion is per session")

	// The same content offloaded again after deletion is a new live record.
	require.NoError(t, s.AddOffload(ctx, a))
	all, err = s.ListOffloads(ctx, "acme", "s1", true)
	require.NoError(t, err)
	require.Len(t, all, 3)
	live, err = s.ListOffloads(ctx, "acme", "s1", false)
	require.NoError(t, err)
	require.Len(t, live, 2)

	require.ErrorContains(t, s.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1"}), "Key is empty")
}

func TestWatermarkAdvancesAndPersists(t *testing.T) {
	t.Parallel()
	url := storetest.NewURL(t)
	s := storetest.Open(t, url)
	ctx := t.Context()

	wm, err := s.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Empty(t, wm)

	require.NoError(t, s.SetWatermark(ctx, "acme", "s1", "toolu_1", "run-1"))
	require.NoError(t, s.SetWatermark(ctx, "acme", "s1", "toolu_2", "run-2"))
	// A late retry of the first write must not move the watermark back.
	require.NoError(t, s.SetWatermark(ctx, "acme", "s1", "toolu_1", "run-1"))
	require.NoError(t, s.SetWatermark(ctx, "acme", "s2", "toolu_9", "run-3"))

	wm, err = s.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, "toolu_2", wm)

	// A restart: a new store on the same schema sees the same watermark.
	s.Close()
	s2 := storetest.Open(t, url)
	wm, err = s2.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, "toolu_2", wm)
	wm, err = s2.GetWatermark(ctx, "acme", "s2")
	require.NoError(t, err)
	require.Equal(t, "toolu_9", wm)

	history, err := s2.ListWatermarks(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Len(t, history, 2)
	require.Equal(t, "toolu_1", history[0].ToolUseID)
	require.Equal(t, "run-1", history[0].RunID)
	require.Equal(t, "toolu_2", history[1].ToolUseID)

	require.ErrorContains(t, s2.SetWatermark(ctx, "acme", "s1", "", "r"), "toolUseID is empty")
}

// TestReleaseOffloadsDeletesOnlyUnreferencedObjects: a session's release
// deletes an object only when no live offload of the tenant refers to it,
// and a failed delete leaves everything live.
func TestReleaseOffloadsDeletesOnlyUnreferencedObjects(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	for _, o := range []store.Offload{
		{Tenant: "acme", Session: "s1", Key: "k/shared"},
		{Tenant: "acme", Session: "s2", Key: "k/shared"},
		{Tenant: "acme", Session: "s1", Key: "k/own"},
		{Tenant: "other", Session: "s1", Key: "k/own"},
	} {
		require.NoError(t, s.AddOffload(ctx, o))
	}
	live, err := s.LiveOffloads(ctx, "acme", "s1", []string{"k/shared", "k/own", "k/unknown"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"k/shared": true, "k/own": true}, live)

	boom := errors.New("s3 down")
	_, _, err = s.ReleaseOffloads(ctx, "acme", "s1", []string{"k/shared", "k/own"}, func(context.Context, string) error { return boom })
	require.ErrorIs(t, err, boom)
	live, err = s.LiveOffloads(ctx, "acme", "s1", []string{"k/shared", "k/own"})
	require.NoError(t, err)
	require.Len(t, live, 2, "a failed delete marks nothing")

	var deleted []string
	n, gone, err := s.ReleaseOffloads(ctx, "acme", "s1", []string{"k/shared", "k/own", "k/unknown"}, func(_ context.Context, k string) error {
		deleted = append(deleted, k)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// k/unknown was never this session's: never deleted; k/shared is
	// still live in s2; k/own of tenant "other" is another tenant's row
	// and does not keep acme's object.
	require.Equal(t, []string{"k/own"}, gone)
	require.Equal(t, gone, deleted)
	still, err := s.LiveOffloads(ctx, "acme", "s2", []string{"k/shared"})
	require.NoError(t, err)
	require.True(t, still["k/shared"])
}

// TestLiveOffloadsAreTheTenantsOwn: another tenant's session of the same
// name, with the same key, is not live for this tenant; a key is never
// taken on another tenant's word.
func TestLiveOffloadsAreTheTenantsOwn(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	require.NoError(t, s.AddOffload(ctx, store.Offload{Tenant: "other", Session: "s9", Key: "k/theirs"}))
	live, err := s.LiveOffloads(ctx, "acme", "s9", []string{"k/theirs"})
	require.NoError(t, err)
	require.Empty(t, live)
	live, err = s.LiveOffloads(ctx, "other", "s9", []string{"k/theirs"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"k/theirs": true}, live)
}
