// Package blobtest gives tests a blob.Store on a real S3 protocol server,
// each test in its own bucket.
//
// One server runs per test binary, started on first use. The preferred
// server is versitygw (a production S3 gateway, installed by
// deploy/install-versitygw.sh) over a temporary folder; if its binary is not
// found, the embedded s3local server is used instead. Env BLOBTEST_SERVER=
// versitygw or s3local forces one, and then a missing server fails the test
// rather than falling back.
//
// Packages using blobtest should stop the server when their tests end:
//
//	func TestMain(m *testing.M) { blobtest.Main(m) }
//
// Without it the versitygw process still dies with the test binary (Linux
// parent-death signal), but its temporary folder is left behind.
package blobtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/devkit/s3server"
)

// Server names accepted in EnvServer and returned by ServerName.
const (
	ServerVersityGW = s3server.VersityGW
	ServerS3Local   = s3server.S3Local
)

// EnvServer is the environment variable that forces a server.
const EnvServer = "BLOBTEST_SERVER"

// Credentials of the test server's root account.
const (
	AccessKey = "blobtest"
	SecretKey = "blobtest-secret-key"
)

// server is the one S3 server of this test binary.
type server struct {
	name     string
	endpoint string
	addr     string // host:port, for proxies
	stop     func() error
}

var (
	startOnce sync.Once
	started   *server
	startErr  error
	bucketSeq atomic.Int64
	logOnce   sync.Once
)

// Main runs the package's tests, then stops the shared server, and exits
// with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "blobtest: stop server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Stop stops the shared server if one was started and removes its data.
// Tests must not use blobtest after Stop.
func Stop() error {
	if started == nil {
		return nil
	}
	s := started
	started = nil
	return s.stop()
}

// ServerName returns which server backs the stores ("versitygw" or
// "s3local"), starting it if needed.
func ServerName(t testing.TB) string {
	t.Helper()
	return shared(t).name
}

// Endpoint returns the base URL of the shared server, starting it if
// needed. Use it with AccessKey/SecretKey and path-style addressing.
func Endpoint(t testing.TB) string {
	t.Helper()
	return shared(t).endpoint
}

// Option adjusts the blob.Config of a test store before it is built, e.g. to
// set ListPageSize or an HTTPClient.
type Option func(*blob.Config)

// NewConfig creates a fresh bucket for t on the shared server and returns a
// blob.Config for it, for code under test that builds its own Store. On
// versitygw the bucket is emptied and removed when the test ends.
func NewConfig(t testing.TB, opts ...Option) blob.Config {
	t.Helper()
	srv := shared(t)
	cfg := blob.Config{
		Endpoint:  srv.endpoint,
		Bucket:    bucketName(t),
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		PathStyle: true,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	store := newStore(t, cfg)
	// s3local leaves emptied key "folders" behind, so its buckets never
	// become deletable; its data goes with the folder at Stop anyway.
	if srv.name == ServerVersityGW {
		t.Cleanup(func() { removeBucket(t, store) })
	}
	return cfg
}

// New returns a Store on a fresh bucket of the shared server.
func New(t testing.TB, opts ...Option) *blob.Store {
	t.Helper()
	return newStore(t, NewConfig(t, opts...))
}

// NewBehindProxy returns a Store on a fresh bucket whose every request goes
// through a Proxy, so the test can make S3 unavailable with Down and bring
// it back with Up. The proxy is closed when the test ends.
func NewBehindProxy(t testing.TB, opts ...Option) (*blob.Store, *Proxy) {
	t.Helper()
	srv := shared(t)
	proxy, err := NewProxy(srv.addr)
	if err != nil {
		t.Fatalf("blobtest: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := NewConfig(t, opts...)
	cfg.Endpoint = proxy.Endpoint()
	return newStore(t, cfg), proxy
}

func newStore(t testing.TB, cfg blob.Config) *blob.Store {
	t.Helper()
	store, err := blob.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("blobtest: new store: %v", err)
	}
	if err := store.EnsureBucket(context.Background()); err != nil {
		t.Fatalf("blobtest: create bucket %q: %v", cfg.Bucket, err)
	}
	return store
}

// bucketName is unique within the server's life and valid for S3 (3-63
// lowercase letters, digits, hyphens).
func bucketName(t testing.TB) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("blobtest: random bucket suffix: %v", err)
	}
	return fmt.Sprintf("bt-%d-%s", bucketSeq.Add(1), hex.EncodeToString(b[:]))
}

// removeBucket is best effort: a leftover bucket only costs disk in a
// folder removed by Stop, so failures are logged, not fatal.
func removeBucket(t testing.TB, store *blob.Store) {
	ctx := context.Background()
	keys, err := store.List(ctx, "")
	if err != nil {
		t.Logf("blobtest: cleanup list bucket %q: %v", store.Bucket(), err)
		return
	}
	for _, k := range keys {
		if err := store.Delete(ctx, k); err != nil {
			t.Logf("blobtest: cleanup %q: %v", k, err)
		}
	}
	_, err = store.Client().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(store.Bucket())})
	var missing *types.NoSuchBucket
	if err != nil && !errors.As(err, &missing) {
		t.Logf("blobtest: cleanup delete bucket %q: %v", store.Bucket(), err)
	}
}

// shared starts the server on first use and fails t if it cannot.
func shared(t testing.TB) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an S3 server: skipped under -short")
	}
	startOnce.Do(func() { started, startErr = startServer(os.Getenv(EnvServer)) })
	if startErr != nil {
		t.Fatalf("blobtest: %v", startErr)
	}
	if started == nil {
		t.Fatal("blobtest: server already stopped")
	}
	logOnce.Do(func() { t.Logf("blobtest: S3 server %s at %s", started.name, started.endpoint) })
	return started
}

func startServer(forced string) (*server, error) {
	if forced != ServerVersityGW && forced != ServerS3Local && forced != "" {
		return nil, fmt.Errorf("%s=%q: want %q or %q", EnvServer, forced, ServerVersityGW, ServerS3Local)
	}
	dir, err := os.MkdirTemp("", "blobtest-s3-")
	if err != nil {
		return nil, fmt.Errorf("S3 server data dir: %w", err)
	}
	srv, err := s3server.Start(forced, dir, "127.0.0.1:0", AccessKey, SecretKey)
	if err != nil {
		_ = os.RemoveAll(dir)
		if forced != "" {
			return nil, fmt.Errorf("%s=%s: %w", EnvServer, forced, err)
		}
		return nil, err
	}
	return &server{
		name:     srv.Kind,
		endpoint: srv.Endpoint,
		addr:     srv.Addr,
		stop: func() error {
			return errors.Join(srv.Stop(), os.RemoveAll(dir))
		},
	}, nil
}
