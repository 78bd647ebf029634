package app

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// stopper is a worker whose Stop runs stop; nothing else of it is used.
type stopper struct {
	worker.Worker
	stop func()
}

func (s stopper) Stop() { s.stop() }

func (s stopper) Start() error { return nil }

// TestWorkersStopAtOnceAndBounded: a stopping process stops its workers
// at once (one worker's slow stop does not hold the others' back), and
// returns past its bound even when a worker never lets go (the chaos
// soak's rolling deploy: a worker cut off from Temporal held its process
// for over 2 minutes after SIGTERM).
func TestWorkersStopAtOnceAndBounded(t *testing.T) {
	t.Parallel()
	// Erasures stops first; it lets go only once Main was asked to stop.
	mainAsked := make(chan struct{})
	w := Workers{
		Erasures:    stopper{stop: func() { <-mainAsked }},
		Main:        stopper{stop: func() { close(mainAsked) }},
		StopTimeout: 2 * time.Second,
	}
	require.True(t, w.Stop(), "every worker stopped")

	never := make(chan struct{})
	defer close(never)
	stopped := make(chan struct{})
	w = Workers{
		Main:        stopper{stop: func() { <-never }},
		LLM:         stopper{stop: func() { close(stopped) }},
		StopTimeout: -stopMargin + 50*time.Millisecond,
	}
	require.False(t, w.Stop(), "a worker that never stops does not hold the process")
	select {
	case <-stopped:
	default:
		t.Fatal("the other worker was stopped too")
	}
}

// TestWorkersRunStopsOnASignalDuringStartup: a SIGTERM that arrives
// while the process is still starting (after its signal context is made,
// before its workers run) stops it once they run. With Run waiting on
// worker.InterruptCh(), registered only then, the signal was lost and the
// chaos soak's rolling deploy had to kill the worker two minutes later.
// Not parallel: it signals the test process.
func TestWorkersRunStopsOnASignalDuringStartup(t *testing.T) {
	ctx, stop := SignalContext()
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the signal context did not see SIGTERM")
	}

	stopped := make(chan struct{})
	w := Workers{Main: stopper{stop: func() { close(stopped) }}, StopTimeout: time.Second}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after a SIGTERM that came before it")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the workers were not stopped")
	}
}
