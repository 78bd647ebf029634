package s3local_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/devkit/s3local"
)

func newStore(t *testing.T, srv *s3local.Server) *blob.Store {
	t.Helper()
	store, err := blob.New(context.Background(), blob.Config{
		Endpoint:  srv.Endpoint(),
		Bucket:    "dev-bucket",
		AccessKey: "dev",
		SecretKey: "dev-secret",
		PathStyle: true,
	})
	require.NoError(t, err)
	require.NoError(t, store.EnsureBucket(context.Background()))
	return store
}

func TestPutGetListDeleteThroughSDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := s3local.Start(t.TempDir(), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	store := newStore(t, srv)

	ref, err := store.PutContent(ctx, "acme", blob.KindArchive, []byte("hello"))
	require.NoError(t, err)
	_, err = store.Put(ctx, "misc/other", []byte("other"))
	require.NoError(t, err)

	got, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, "hello", string(got))

	keys, err := store.List(ctx, "tenants/acme/")
	require.NoError(t, err)
	require.Equal(t, []string{ref.Key}, keys)

	require.NoError(t, store.Delete(ctx, ref.Key))
	_, err = store.Get(ctx, ref.Key)
	require.ErrorIs(t, err, blob.ErrNotFound)
	keys, err = store.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"misc/other"}, keys)
}

func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	first, err := s3local.Start(dir, "127.0.0.1:0")
	require.NoError(t, err)
	ref, err := newStore(t, first).PutContent(ctx, "acme", blob.KindArchive, []byte("kept across restarts"))
	require.NoError(t, err)
	require.NoError(t, first.Close())
	require.NoError(t, first.Close(), "second Close must be harmless")

	second, err := s3local.Start(dir, "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, second.Close()) })
	store := newStore(t, second)

	got, err := store.GetVerified(ctx, ref.Key, ref.SHA256)
	require.NoError(t, err)
	require.Equal(t, "kept across restarts", string(got))
	exists, err := store.Exists(ctx, ref.Key)
	require.NoError(t, err)
	require.True(t, exists)
}

func TestStartRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, dir, addr string
	}{
		{"empty dir", "", "127.0.0.1:0"},
		{"bad addr", t.TempDir(), "not-an-address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := s3local.Start(tc.dir, tc.addr)
			require.Error(t, err)
		})
	}
}
