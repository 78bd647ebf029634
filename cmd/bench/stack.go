package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/devkit/devstack"
	"github.com/ctxcompact/orchestrator/internal/devkit/s3server"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// defaultDatabaseURL is the tests' database (storetest.DefaultURL), used
// when DATABASE_URL is unset; the bench works in a schema of its own and
// drops it at the end.
const defaultDatabaseURL = storetest.DefaultURL

// bucket is the one S3 bucket of a bench run.
const bucket = "bench"

// s3Keys are the static credentials of the S3 server the bench starts.
const (
	s3AccessKey = "bench"
	s3SecretKey = "bench-secret-key"
)

// stack is the real stack of one bench run, all of it local: the
// in-process Temporal server, Postgres (a fresh schema behind a counting
// proxy), an S3 server (versitygw or the embedded s3local) behind a
// counting HTTP transport, and the deployment's worker settings.
type stack struct {
	cfg      config.Config
	temporal *temporaltest.TestServer
	client   client.Client
	store    *store.Store
	blob     *blob.Store

	pg       *pgProxy
	pgAdmin  string // the database URL without the proxy, for the schema and backend CPU
	schema   string
	appName  string // application_name of the store's connections
	pgServer string // "PostgreSQL 15.x" as the server reports it

	s3Name     string // "versitygw …" or "s3local (gofakes3) …"
	s3PID      int    // the versitygw process, 0 for s3local (in-process)
	s3Requests atomic.Int64
	s3Kinds    *tally // S3 requests by "METHOD kind"

	activities *activityCounter

	tmp     string
	closers []func() error
}

// startStack brings every service up; on error what was started is
// stopped again.
func startStack(ctx context.Context) (*stack, error) {
	s := &stack{activities: newActivityCounter(), s3Kinds: newTally()}
	fail := func(err error) (*stack, error) { return nil, errors.Join(err, s.close()) }

	cfg, err := config.Load()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	s.cfg = cfg
	tmp, err := os.MkdirTemp("", "ctxcompact-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s.tmp = tmp
	s.closers = append(s.closers, func() error { return os.RemoveAll(tmp) })

	if err := s.startPostgres(ctx); err != nil {
		return fail(err)
	}
	if err := s.startS3(ctx); err != nil {
		return fail(err)
	}
	if err := s.startTemporal(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// close stops everything in reverse order and reports every failure.
func (s *stack) close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// startPostgres creates a fresh schema, puts the counting proxy in front
// of the server and opens the store on the schema through the proxy.
func (s *stack) startPostgres(ctx context.Context) error {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = defaultDatabaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not err: url's error quotes the URL, password included.
		return errors.New("DATABASE_URL must be a postgres:// URL with a host (the bench puts a proxy in front of it)")
	}
	s.pgAdmin = base

	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("connect to postgres at %s (set DATABASE_URL): %w", u.Host, err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "show server_version").Scan(&s.pgServer); err != nil {
		return fmt.Errorf("postgres server version: %w", err)
	}
	if _, s.schema, err = storetest.CreateSchema(ctx, base, "bench_"); err != nil {
		return err
	}
	s.appName = "ctxcompact-" + s.schema
	s.closers = append(s.closers, s.dropSchema)

	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	proxy, err := startPGProxy(target)
	if err != nil {
		return err
	}
	s.pg = proxy
	s.closers = append(s.closers, proxy.close)

	pu := *u
	pu.Host = proxy.addr()
	q := pu.Query()
	q.Set("search_path", s.schema)
	q.Set("application_name", s.appName)
	// The proxy reads the protocol, so the leg to it must be clear text;
	// it only ever listens on loopback.
	q.Set("sslmode", "disable")
	pu.RawQuery = q.Encode()
	st, err := store.Open(ctx, pu.String())
	if err != nil {
		return fmt.Errorf("open store through the proxy: %w", err)
	}
	s.store = st
	s.closers = append(s.closers, func() error { st.Close(); return nil })
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate schema %s: %w", s.schema, err)
	}
	return nil
}

func (s *stack) dropSchema() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return storetest.DropSchema(ctx, s.pgAdmin, s.schema)
}

// startS3 prefers versitygw (a production S3 gateway) when installed, else
// the embedded s3local server, both over a temporary folder.
func (s *stack) startS3(ctx context.Context) error {
	srv, err := s3server.Start(s3server.Auto, filepath.Join(s.tmp, "s3"), "127.0.0.1:0", s3AccessKey, s3SecretKey)
	if err != nil {
		return fmt.Errorf("start S3 server: %w", err)
	}
	s.closers = append(s.closers, srv.Stop)
	endpoint := srv.Endpoint
	s.s3PID, s.s3Name = srv.PID, srv.Description
	// The transport mirrors the AWS SDK's default client (10 idle
	// connections per host) and counts every request.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 100
	tr.MaxIdleConnsPerHost = 10
	bl, err := blob.New(ctx, blob.Config{
		Endpoint: endpoint, Bucket: bucket, AccessKey: s3AccessKey, SecretKey: s3SecretKey, PathStyle: true,
		HTTPClient: &http.Client{Transport: countingTransport{base: tr, n: &s.s3Requests, kinds: s.s3Kinds}},
		CacheBytes: int64(s.cfg.BlobCacheMB) << 20, // BLOB_CACHE_MB, as the worker
	})
	if err != nil {
		return fmt.Errorf("s3 client: %w", err)
	}
	if err := bl.EnsureBucket(ctx); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	s.blob = bl
	return nil
}

// countingTransport counts the HTTP requests of the S3 client, in all
// and by method and kind of object.
type countingTransport struct {
	base  http.RoundTripper
	n     *atomic.Int64
	kinds *tally
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.kinds.add(r.Method + " " + objectKind(r.URL.Path))
	return c.base.RoundTrip(r)
}

// objectKind is the kind segment of a content key in a path-style S3 URL
// (/bucket/tenants/{tenant}/{kind}/…), "bucket" for a request on the
// bucket itself, "other" for any other key.
func objectKind(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(parts) <= 1 || (len(parts) == 2 && parts[1] == ""):
		return "bucket"
	case len(parts) >= 4 && parts[1] == "tenants":
		return parts[3]
	default:
		return "other"
	}
}

// tally counts events by name, safe for concurrent use.
type tally struct {
	mu sync.Mutex
	n  map[string]int64
}

func newTally() *tally { return &tally{n: map[string]int64{}} }

func (k *tally) add(name string) {
	k.mu.Lock()
	k.n[name]++
	k.mu.Unlock()
}

// snapshot copies the counts.
func (k *tally) snapshot() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int64, len(k.n))
	for name, v := range k.n {
		out[name] = v
	}
	return out
}

// perRun is what grew from before to after, per run, as "name x.x"
// sorted by name.
func perRun(before, after map[string]int64, runs float64) string {
	var parts []string
	for name, v := range after {
		if d := v - before[name]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, float64(d)/runs))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// startTemporal starts the in-process Temporal server the end-to-end
// tests use too (devstack.TestServer: SQLite in memory, one partition per
// task queue), with the worker's own log discarded: every failed attempt
// of 5. is an error line that would bury the table, and failed runs show
// in it instead.
func (s *stack) startTemporal(ctx context.Context) error {
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	ts, err := devstack.TestServer(ctx, temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	if err != nil {
		return err
	}
	s.temporal = ts
	s.client = ts.GetDefaultClient()
	s.closers = append(s.closers, func() error { return devstack.StopTestServer(ts) })
	return nil
}

// counts are the cumulative counters of the stack.
type counts struct {
	activities int64
	pgTrips    int64
	s3Requests int64
}

func (s *stack) counts() counts {
	return counts{activities: s.activities.total.Load(), pgTrips: s.pg.roundTrips.Load(), s3Requests: s.s3Requests.Load()}
}

func (c counts) sub(o counts) counts {
	return counts{activities: c.activities - o.activities, pgTrips: c.pgTrips - o.pgTrips, s3Requests: c.s3Requests - o.s3Requests}
}

// activityCounter is a worker interceptor counting activity executions
// (every attempt).
type activityCounter struct {
	interceptor.WorkerInterceptorBase
	total  atomic.Int64
	byType *tally
}

func newActivityCounter() *activityCounter {
	return &activityCounter{byType: newTally()}
}

// InterceptActivity counts and runs one activity attempt.
func (c *activityCounter) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &countingActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, c: c}
}

// snapshot copies the per-type counts.
func (c *activityCounter) snapshot() map[string]int64 { return c.byType.snapshot() }

type countingActivity struct {
	interceptor.ActivityInboundInterceptorBase
	c *activityCounter
}

// ExecuteActivity counts the attempt by activity type.
func (a *countingActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	a.c.total.Add(1)
	name := "?"
	if info := activityInfo(ctx); info != "" {
		name = info
	}
	a.c.byType.add(name)
	return a.Next.ExecuteActivity(ctx, in)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on Linux; a fixed name still works
		// for one run at a time.
		return "fixed"
	}
	return hex.EncodeToString(b)
}
