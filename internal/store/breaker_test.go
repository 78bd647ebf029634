package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/store/storetest"
)

// TestSessionBreaker: failed runs in a row open a session's breaker under
// an enabled rule; a rule that cannot open one (BREAKER_RUNS=0, no
// minimum interval) reads nothing at all, so it works on a closed store.
func TestSessionBreaker(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	for range 2 {
		r := newRun(t, s, "acme", "s1")
		_, err := s.FailRun(ctx, r.ID, store.Failure{Message: "boom"})
		require.NoError(t, err)
	}
	tests := []struct {
		name    string
		rule    store.BreakerRule
		enabled bool
		open    bool
	}{
		{name: "two failures, a rule of two", rule: store.BreakerRule{Runs: 2, Window: time.Hour}, enabled: true, open: true},
		{name: "two failures, a rule of three", rule: store.BreakerRule{Runs: 3, Window: time.Hour}, enabled: true},
		{name: "a minimum interval alone", rule: store.BreakerRule{Window: time.Hour, MinInterval: time.Hour}, enabled: true, open: true},
		{name: "BREAKER_RUNS=0 with a window", rule: store.BreakerRule{Window: time.Hour, MinFreed: 0.05}},
		{name: "the zero rule", rule: store.BreakerRule{}},
	}
	closed := storetest.Open(t, storetest.NewURL(t))
	closed.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.enabled, tt.rule.Enabled())
			b, err := s.SessionBreaker(ctx, "acme", "s1", tt.rule, time.Now())
			require.NoError(t, err)
			require.Equal(t, tt.open, b.Open)
			_, err = closed.SessionBreaker(ctx, "acme", "s1", tt.rule, time.Now())
			if tt.enabled {
				require.Error(t, err, "an enabled rule reads the session's runs")
			} else {
				require.NoError(t, err, "a disabled rule reads nothing")
			}
		})
	}
}
