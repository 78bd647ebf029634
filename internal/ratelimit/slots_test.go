package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// One key's slots run out without touching another key's, a release
// gives its slot back once however often it is called, and a key with
// nothing in flight is forgotten.
func TestSlotsPerKey(t *testing.T) {
	s := NewSlots(2)
	r1, ok := s.TryAcquire("a")
	require.True(t, ok)
	r2, ok := s.TryAcquire("a")
	require.True(t, ok)
	_, ok = s.TryAcquire("a")
	require.False(t, ok, "a third slot of a key bounded to 2")
	rb, ok := s.TryAcquire("b")
	require.True(t, ok, "another key is not held up by a's")
	require.Equal(t, 2, s.InFlight("a"))

	r1()
	r1()
	require.Equal(t, 1, s.InFlight("a"), "a release counts once")
	r3, ok := s.TryAcquire("a")
	require.True(t, ok)
	r2()
	r3()
	rb()
	require.Empty(t, s.held, "keys with nothing in flight are forgotten")
}

func TestSlotsUnbounded(t *testing.T) {
	for _, s := range []*Slots{NewSlots(0), nil} {
		for range 100 {
			_, ok := s.TryAcquire("a")
			require.True(t, ok)
		}
		require.Zero(t, s.InFlight("a"))
	}
}
