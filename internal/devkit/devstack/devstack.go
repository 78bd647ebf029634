// Package devstack runs everything the orchestrator needs on one developer
// machine: an in-process Temporal server persisted in SQLite, a throw-away
// Postgres cluster and an embedded S3-compatible server over a folder.
//
// It links the Temporal server, so only the dev command and tests may import
// it; the production binaries must not.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Default names the stack uses.
const (
	// DefaultDir is the state folder used when Options.Dir is empty.
	DefaultDir = ".devstack"
	// Namespace is the Temporal namespace registered on every start.
	Namespace = "default"
	// Bucket is the S3 bucket created on every start.
	Bucket = "compactor"
)

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir is the state folder; everything the stack persists lives below it.
	// Empty means DefaultDir relative to the working directory.
	Dir string
	// DatabaseURL, when set, is used as is and no Postgres is started.
	DatabaseURL string
	// TemporalPort is the frontend gRPC port on 127.0.0.1, S3Port the S3
	// server's and PostgresPort the private cluster's; 0 keeps the port
	// this Dir used last (Dir/ports.json) while it is free, else picks a
	// free one.
	TemporalPort int
	S3Port       int
	PostgresPort int
	// Log receives the Temporal server's warnings and errors; nil discards them.
	Log io.Writer
}

// Stack describes the running services. Close stops what Start started.
type Stack struct {
	// TemporalAddress is the frontend host:port for client.Dial.
	TemporalAddress string
	// Namespace is the registered Temporal namespace.
	Namespace string
	// DatabaseURL is a pgx connection string to the application database.
	DatabaseURL string
	// S3Endpoint is the base URL of the S3-compatible server (path-style).
	S3Endpoint string
	// S3Bucket is the bucket that already exists on S3Endpoint.
	S3Bucket string
	// S3AccessKey and S3SecretKey are the static credentials to sign with.
	S3AccessKey string
	S3SecretKey string

	// closers run in reverse order on Close.
	closers []func() error
}

// Start brings up Temporal, Postgres and S3 under opts.Dir and returns their
// addresses. On error everything already started is stopped again.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	dir := opts.Dir
	if dir == "" {
		dir = DefaultDir
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve devstack dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create devstack dir: %w", err)
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}

	s := &Stack{Namespace: Namespace}
	fail := func(err error) (*Stack, error) {
		return nil, errors.Join(err, s.Close())
	}

	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, unlock)

	remembered, err := loadPorts(dir)
	if err != nil {
		return fail(err)
	}
	var ports Ports
	// Postgres first: it is the piece most likely to be missing, and failing
	// before the Temporal server starts keeps the error fast.
	pgPort, err := pickPort(opts.PostgresPort, remembered.Postgres)
	if err != nil {
		return fail(fmt.Errorf("postgres port: %w", err))
	}
	dbURL, stopDB, err := startPostgres(ctx, dir, opts.DatabaseURL, pgPort)
	if err != nil {
		return fail(err)
	}
	s.DatabaseURL = dbURL
	s.closers = append(s.closers, stopDB)
	ports.Postgres = portOf(dbURL)

	temporalPort, err := pickPort(opts.TemporalPort, remembered.Temporal)
	if err != nil {
		return fail(fmt.Errorf("temporal port: %w", err))
	}
	temporalAddr, stopTemporal, err := startTemporal(ctx, dir, temporalPort, logw)
	if err != nil {
		return fail(err)
	}
	s.TemporalAddress = temporalAddr
	s.closers = append(s.closers, stopTemporal)
	ports.Temporal = portOf(temporalAddr)

	s3Port, err := pickPort(opts.S3Port, remembered.S3)
	if err != nil {
		return fail(fmt.Errorf("s3 port: %w", err))
	}
	s3, err := startS3(ctx, dir, s3Port)
	if err != nil {
		return fail(err)
	}
	ports.S3 = portOf(s3.endpoint)
	if opts.DatabaseURL != "" {
		ports.Postgres = remembered.Postgres
	}
	if err := savePorts(dir, ports); err != nil {
		return fail(err)
	}
	s.S3Endpoint = s3.endpoint
	s.S3Bucket = Bucket
	s.S3AccessKey = s3.accessKey
	s.S3SecretKey = s3.secretKey
	s.closers = append(s.closers, s3.close)

	return s, nil
}

// Close stops every service Start started, in reverse order, and reports all
// failures. Calling it again is a no-op.
func (s *Stack) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// lockDir takes an exclusive lock on dir so a second dev command cannot run
// on the same state (it would stop the first one's Postgres). The kernel
// drops the lock when the process dies, so a crash leaves nothing stale.
func lockDir(dir string) (func() error, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("devstack dir %s is in use by another process (lock %s): %w", dir, path, err)
	}
	return f.Close, nil
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1. Listeners stay
// open until all are picked so the kernel cannot hand out one port twice;
// another process may still grab one before we bind it, which is acceptable
// for a dev stack.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portOf is the port of a host:port, a URL or a postgres URL; 0 if none.
func portOf(addr string) int {
	if u, err := url.Parse(addr); err == nil && u.Port() != "" {
		n, _ := strconv.Atoi(u.Port())
		return n
	}
	if _, p, err := net.SplitHostPort(addr); err == nil {
		n, _ := strconv.Atoi(p)
		return n
	}
	return 0
}
