package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With the one slot held and a flood of one key's waiters queued first,
// another key's single waiter is served second, not after the flood; a
// key alone is served in its own order.
func TestFairSlotsTakeTurns(t *testing.T) {
	f := NewFairSlots(1)
	hold, err := f.Acquire(t.Context(), "flood")
	require.NoError(t, err)

	var mu sync.Mutex
	var served []string
	var wg sync.WaitGroup
	wait := func(key string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := f.Acquire(context.Background(), key)
			if err != nil {
				return
			}
			mu.Lock()
			served = append(served, key)
			mu.Unlock()
			release()
		}()
	}
	for range 5 {
		wait("flood")
	}
	require.Eventually(t, func() bool { return f.Waiting("flood") == 5 }, 5*time.Second, time.Millisecond)
	wait("quiet")
	require.Eventually(t, func() bool { return f.Waiting("quiet") == 1 }, 5*time.Second, time.Millisecond)
	hold()
	wg.Wait()
	require.Equal(t, []string{"flood", "quiet", "flood", "flood", "flood", "flood"}, served,
		"the quiet key waits one turn, not behind the whole flood")
}

// A waiter that gives up leaves the line, and the slot it may have been
// handed goes on; releasing twice frees one slot.
func TestFairSlotsCancel(t *testing.T) {
	f := NewFairSlots(1)
	hold, err := f.Acquire(t.Context(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = f.Acquire(ctx, "b")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, f.Waiting("b"))
	hold()
	hold()
	r1, err := f.Acquire(t.Context(), "c")
	require.NoError(t, err)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	_, err = f.Acquire(ctx2, "d")
	require.Error(t, err, "one slot: a double release freed only one")
	r1()
}
