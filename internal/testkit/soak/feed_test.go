package soak

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFeedStopsWithItsContext: the load's end stops the feeder even with
// most jobs left and a long pace (the 10,000-event run's feeder slept
// its pace after each job and kept the checks from running for half an
// hour), and a feeder whose clients take every job hands out all of
// them in order.
func TestFeedStopsWithItsContext(t *testing.T) {
	t.Parallel()
	var got []int
	require.Equal(t, 5, feed(t.Context(), 5, 0, func(i int) bool { got = append(got, i); return true }))
	require.Equal(t, []int{0, 1, 2, 3, 4}, got)

	ctx, cancel := context.WithCancel(t.Context())
	var sent atomic.Int64
	done := make(chan int, 1)
	go func() {
		done <- feed(ctx, 10000, time.Hour, func(int) bool { sent.Add(1); return true })
	}()
	require.Eventually(t, func() bool { return sent.Load() == 1 }, 10*time.Second, time.Millisecond, "job 0 is due at once")
	cancel()
	select {
	case n := <-done:
		require.Equal(t, 1, n, "only the job handed out counts")
	case <-time.After(10 * time.Second):
		t.Fatal("the feeder kept going after its context ended")
	}

	// Clients that never take a job: the end of the load ends the wait.
	ctx, cancel = context.WithCancel(t.Context())
	go func() {
		done <- feed(ctx, 3, 0, func(int) bool { <-ctx.Done(); return false })
	}()
	cancel()
	select {
	case n := <-done:
		require.Zero(t, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the feeder waited on busy clients after its context ended")
	}
}
