package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

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
