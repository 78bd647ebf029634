package blobtest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

func TestMain(m *testing.M) { Main(m) }

func TestStartServerRejectsUnknownName(t *testing.T) {
	t.Parallel()
	_, err := startServer("minio")
	require.ErrorContains(t, err, EnvServer)
}

func TestNewGivesEachTestItsOwnBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := New(t), New(t)
	require.NotEqual(t, a.Bucket(), b.Bucket())

	_, err := a.Put(ctx, "shared/key", []byte("from a"))
	require.NoError(t, err)
	exists, err := b.Exists(ctx, "shared/key")
	require.NoError(t, err)
	require.False(t, exists, "buckets must be isolated")
}

func TestProxyDownRefusesAndUpRestores(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	proxy, err := NewProxy(backend.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	get := func() (string, error) {
		// A fresh client each time, so no pooled connection hides the state.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(proxy.Endpoint())
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}

	body, err := get()
	require.NoError(t, err)
	require.Equal(t, "ok", body)

	proxy.Down()
	proxy.Down() // idempotent
	require.True(t, servesNothing(t, proxy.Addr()), "a down proxy must not serve connections")
	_, err = get()
	require.Error(t, err)

	require.NoError(t, proxy.Up())
	require.NoError(t, proxy.Up()) // idempotent
	body, err = get()
	require.NoError(t, err)
	require.Equal(t, "ok", body)

	require.NoError(t, proxy.Close())
	require.Error(t, proxy.Up(), "a closed proxy cannot come back")
}

func TestNewBehindProxyRoutesThroughProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One attempt: the SDK's backoff would only slow the test down.
	store, proxy := NewBehindProxy(t, func(cfg *blob.Config) { cfg.MaxAttempts = 1 })
	_, err := store.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)

	proxy.Down()
	_, err = store.Get(ctx, "k")
	require.Error(t, err, "with the proxy down the store must not reach S3")
	require.NoError(t, proxy.Up())
	got, err := store.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
}

// servesNothing reports whether a connection to addr is refused or cut at
// once, without a timeout.
func servesNothing(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return true
	}
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
