package devstack

import (
	"context"
	"fmt"

	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/ctxcompact/orchestrator/internal/app"
)

// TestServer starts the in-process Temporal server that the end-to-end
// tests and the bench share with the dev stack's settings: temporaltest
// (SQLite in memory) under the dev stack's dynamic config (one partition
// per task queue, search attributes usable at once), with the workflows'
// search attributes registered. Start is the same stack kept on disk for
// a developer; together they are the one stack the three build on.
//
// opts come after the stack's own, so a caller can add a client logger.
// temporaltest panics when it cannot start without a *testing.T; that is
// an error here. Stop the server with StopTestServer.
func TestServer(ctx context.Context, opts ...temporaltest.TestServerOption) (ts *temporaltest.TestServer, err error) {
	defer func() {
		if r := recover(); r != nil {
			ts, err = nil, fmt.Errorf("start temporal test server: %v", r)
		}
	}()
	all := append([]temporaltest.TestServerOption{
		temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(devDynamicConfig())),
	}, opts...)
	ts = temporaltest.NewServer(all...)
	if err := app.RegisterSearchAttributes(ctx, ts.GetDefaultClient(), ts.GetDefaultNamespace()); err != nil {
		_ = StopTestServer(ts)
		return nil, fmt.Errorf("register search attributes: %w", err)
	}
	return ts, nil
}

// StopTestServer stops a TestServer. temporaltest reports a shutdown
// error through the *testing.T it does not have by panicking; that is an
// error here.
func StopTestServer(ts *temporaltest.TestServer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stop temporal test server: %v", r)
		}
	}()
	ts.Stop()
	return nil
}
