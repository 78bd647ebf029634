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
	return startWith(ctx, cfg, startup{})
}

// StartWaiting is Start for the long-running servers (the worker, `starter
// serve`, `starter mcp`): a dependency that does not answer yet (Postgres,
// S3 or Temporal still starting, or cut off for a moment) is tried again,
// from one second doubling to startRetryMax, each failure logged, until
// STARTUP_TIMEOUT has passed since the start. Each is opened in turn and
// kept: a process needs its three links up one after another, not all at
// once. A process that exited at the first refused connection was
// restarted by its supervisor with a backoff of its own (Kubernetes' grows
// to five minutes); in the chaos soak, workers started by a rolling deploy
// under link faults stayed down for four minutes, each start meeting a
// fault on one link or another. A configuration that cannot work (an
// unreadable limit, a bad summarizer URL) is not retried: waiting does not
// fix it.
func StartWaiting(ctx context.Context, cfg config.Config) (*Process, error) {
	return startWith(ctx, cfg, startup{deadline: time.Now().Add(cfg.StartupTimeout), timeout: cfg.StartupTimeout, first: time.Second})
}

func startWith(ctx context.Context, cfg config.Config, st startup) (*Process, error) {
	deps, err := openDeps(ctx, cfg, st)
	if err != nil {
		return nil, err
	}
	var c client.Client
	if err := st.do(ctx, func(context.Context) (err error) {
		c, err = DialWith(cfg, deps.Metrics)
		return err
	}); err != nil {
		deps.Close()
		return nil, err
	}
	return &Process{Deps: deps, Temporal: c}, nil
}

// startRetryMax is the longest pause between two attempts of a step of
// StartWaiting.
const startRetryMax = 10 * time.Second

// startup says how the steps of opening the dependencies run: once each
// (the zero value), or each again until it succeeds, before deadline.
type startup struct {
	deadline time.Time
	timeout  time.Duration // what deadline came from, for the error
	first    time.Duration // the first pause, doubling to startRetryMax
}

// do runs step until it succeeds, fails with an *invalidConfig, ctx
// ends, or the next try would start past the deadline.
func (st startup) do(ctx context.Context, step func(context.Context) error) error {
	pause := st.first
	for attempt := 1; ; attempt++ {
		err := step(ctx)
		var invalid *invalidConfig
		switch {
		case err == nil:
			return nil
		case errors.As(err, &invalid):
			return err
		case st.deadline.IsZero() || time.Now().Add(pause).After(st.deadline):
			if attempt == 1 {
				return err
			}
			return fmt.Errorf("gave up after %d attempts within %s (STARTUP_TIMEOUT): %w", attempt, st.timeout, err)
		}
		slog.Warn("a dependency is not answering yet; trying again", "attempt", attempt, "in", pause, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for the dependencies: %w", err)
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
