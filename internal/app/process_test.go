package app

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// TestRetryStart: a dependency that answers after a few refusals is
// waited for; a configuration error, the timeout and a stop end the
// wait, each saying why.
func TestStartupStep(t *testing.T) {
	t.Parallel()
	refused := errors.New("connect: connection refused")
	tests := []struct {
		name     string
		timeout  time.Duration
		failures int    // calls that fail before one succeeds
		err      error  // what the failing calls return
		calls    int    // 0: at least two
		wantErr  string // "" succeeds
	}{
		{name: "answers at once", timeout: time.Minute, calls: 1},
		{name: "answers after two refusals", timeout: time.Minute, failures: 2, err: refused, calls: 3},
		{name: "a configuration error is not retried", timeout: time.Minute, failures: 5, err: &invalidConfig{errors.New("summarizer: llm config: bad URL")},
			calls: 1, wantErr: "bad URL"},
		{name: "no timeout: one call", timeout: 0, failures: 5, err: refused, calls: 1, wantErr: "connection refused"},
		// How many calls fit in the timeout depends on the machine's
		// pace: at least two (calls 0 says so).
		{name: "gives up at the timeout", timeout: 50 * time.Millisecond, failures: 100, err: refused,
			wantErr: "within 50ms (STARTUP_TIMEOUT): connect: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			st := startup{timeout: tt.timeout, first: 10 * time.Millisecond}
			if tt.timeout > 0 {
				st.deadline = time.Now().Add(tt.timeout)
			}
			got := ""
			err := st.do(t.Context(), func(context.Context) error {
				calls++
				if calls <= tt.failures {
					return tt.err
				}
				got = "open"
				return nil
			})
			if tt.calls == 0 {
				require.GreaterOrEqual(t, calls, 2)
				require.ErrorContains(t, err, "gave up after")
			} else {
				require.Equal(t, tt.calls, calls)
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "open", got)
		})
	}
}

// TestStartupStopsWithItsContext: a process told to stop while it
// waits for its dependencies stops at once, not at the timeout.
func TestStartupStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	start := time.Now()
	st := startup{deadline: time.Now().Add(2 * time.Hour), timeout: 2 * time.Hour, first: time.Hour}
	err := st.do(ctx, func(context.Context) error {
		cancel()
		return errors.New("connect: connection refused")
	})
	require.ErrorContains(t, err, "stopped while waiting for the dependencies")
	require.Less(t, time.Since(start), time.Minute)
}

// TestServeMetricsAnswersReadiness: the metrics server, started once the
// dependencies are open, answers the worker's readiness probe and serves
// the metrics.
func TestServeMetricsAnswersReadiness(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	stop, err := ServeMetrics(addr, metrics.New())
	require.NoError(t, err)
	defer stop()
	for path, want := range map[string]string{"/readyz": "ok", "/metrics": "go_goroutines"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, string(body), want, path)
	}
}
