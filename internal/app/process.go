package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/internal/config"
)

// Process is what every long-running command opens (the worker, `starter
// serve`, `starter mcp`, `starter compact` and the dev command): the
// dependencies and a Temporal client that reports the SDK's metrics into
// theirs. Opening it in one place keeps the commands from drifting apart
// in what they connect to and in what order they close it.
type Process struct {
	*Deps
	// Temporal is the client of TEMPORAL_ADDRESS.
	Temporal client.Client
}

// Start opens the dependencies (see Open) and dials Temporal. On error
// nothing stays open.
func Start(ctx context.Context, cfg config.Config) (*Process, error) {
	deps, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c, err := DialWith(cfg, deps.Metrics)
	if err != nil {
		deps.Close()
		return nil, err
	}
	return &Process{Deps: deps, Temporal: c}, nil
}

// StartWaiting is Start for the long-running servers (the worker, `starter
// serve`, `starter mcp`): a dependency that does not answer yet (Postgres,
// S3 or Temporal still starting, or cut off for a moment) is tried again,
// from one second doubling to startRetryMax, for cfg.StartupTimeout
// (STARTUP_TIMEOUT), each failure logged. A process that exited at the
// first refused connection was restarted by its supervisor with a backoff
// of its own (Kubernetes' grows to five minutes), so a short outage at
// start cost minutes of a worker; the chaos soak counted hundreds of such
// exits. A configuration that cannot work (an unreadable limit, a bad
// summarizer URL) is not retried: waiting does not fix it.
func StartWaiting(ctx context.Context, cfg config.Config) (*Process, error) {
	return retryStart(ctx, cfg.StartupTimeout, time.Second, func(ctx context.Context) (*Process, error) {
		return Start(ctx, cfg)
	})
}

// startRetryMax is the longest pause between two attempts of StartWaiting.
const startRetryMax = 10 * time.Second

// retryStart calls open until it succeeds, fails with an *invalidConfig,
// ctx ends, or timeout has passed since the first call (0: one call).
// It pauses first, doubling to startRetryMax, between calls.
func retryStart[T any](ctx context.Context, timeout, first time.Duration, open func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(timeout)
	pause := first
	for attempt := 1; ; attempt++ {
		v, err := open(ctx)
		var invalid *invalidConfig
		switch {
		case err == nil:
			return v, nil
		case errors.As(err, &invalid):
			return v, err
		case time.Now().Add(pause).After(deadline):
			if attempt == 1 {
				return v, err
			}
			return v, fmt.Errorf("gave up after %d attempts in %s (STARTUP_TIMEOUT): %w", attempt, timeout, err)
		}
		slog.Warn("a dependency is not answering yet; trying again", "attempt", attempt, "in", pause, "error", err)
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("stopped while waiting for the dependencies: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, startRetryMax)
	}
}

// invalidConfig is an error of the configuration, which waiting for the
// dependencies does not fix (retryStart gives up at once).
type invalidConfig struct{ err error }

func (e *invalidConfig) Error() string { return e.err.Error() }
func (e *invalidConfig) Unwrap() error { return e.err }

// Close closes the Temporal client, then the dependencies.
func (p *Process) Close() {
	p.Temporal.Close()
	p.Deps.Close()
}

// SignalContext is the context of a command: it ends on SIGINT or SIGTERM
// (Ctrl-C, or the orchestrator stopping a pod), which is where every
// command starts its graceful shutdown.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
