package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
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
			b, err := s.SessionBreaker(ctx, "acme", "s1", tt.rule, time.Now(), "")
			require.NoError(t, err)
			require.Equal(t, tt.open, b.Open)
			_, err = closed.SessionBreaker(ctx, "acme", "s1", tt.rule, time.Now(), "")
			if tt.enabled {
				require.Error(t, err, "an enabled rule reads the session's runs")
			} else {
				require.NoError(t, err, "a disabled rule reads nothing")
			}
		})
	}
}

// TestSessionBreakerTellsALoopFromALongSession: three runs in a row that
// freed almost nothing open the breaker only for an event that brings
// nothing new (the request or the output of one of them again); a long
// session whose agent keeps appending messages still gets its run.
func TestSessionBreakerTellsALoopFromALongSession(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	rule := store.BreakerRule{Runs: 3, Window: time.Hour, MinFreed: 0.05}
	for i := range 3 {
		r, created, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: "acme", Session: "long",
			InputSHA256: fmt.Sprintf("%064x", i+1), TokensBefore: 1000})
		require.NoError(t, err)
		require.True(t, created)
		c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 990, OutputKey: "k", OutputSHA256: fmt.Sprintf("%064x", 100+i)})
		require.NoError(t, err)
		require.True(t, c.Committed)
	}
	for _, tc := range []struct {
		name  string
		input string
		open  bool
	}{
		{"new messages since the last run", fmt.Sprintf("%064x", 999), false},
		{"the last run's request again", fmt.Sprintf("%064x", 3), true},
		{"an earlier run's output sent back unchanged", fmt.Sprintf("%064x", 101), true},
		{"the status view (a repeat)", "", true},
	} {
		b, err := s.SessionBreaker(ctx, "acme", "long", rule, time.Now(), tc.input)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.open, b.Open, tc.name)
		if tc.open {
			require.Contains(t, b.Reason, "nothing new", tc.name)
		}
	}
}

// TestSessionBreakerCountsARunThatFreesNothing: a run that freed nothing
// at all (tokens_after == tokens_before, as when a compaction that would
// not pay keeps its input as it came) is the plainest run that freed
// too little. Three of them in a row open the breaker for the same
// conversation sent again, under the deployment's default rule and under
// a rule asking for any saving at all; one run that freed enough among
// them keeps it closed.
func TestSessionBreakerCountsARunThatFreesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	same := fmt.Sprintf("%064x", 7) // the conversation, sent again and again
	commit := func(session string, before, after int64) {
		t.Helper()
		r, created, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: "acme", Session: session,
			Trigger: "auto", InputSHA256: same, TokensBefore: before})
		require.NoError(t, err)
		require.True(t, created)
		c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: after, OutputKey: "k", OutputSHA256: same})
		require.NoError(t, err)
		require.True(t, c.Committed)
		time.Sleep(5 * time.Millisecond) // runs of a session start one after another
	}
	for range 3 {
		commit("stuck", 1000, 1000)
	}
	commit("saved", 1000, 1000)
	commit("saved", 1000, 500) // freed half
	commit("saved", 1000, 1000)
	for _, rule := range []store.BreakerRule{
		{Runs: 3, Window: time.Hour, MinFreed: 0.05}, // the deployment's default
		{Runs: 3, Window: time.Hour, MinFreed: 0.001},
	} {
		b, err := s.SessionBreaker(ctx, "acme", "stuck", rule, time.Now(), same)
		require.NoError(t, err)
		require.True(t, b.Open, "three runs that freed nothing, min freed %v", rule.MinFreed)
		require.Contains(t, b.Reason, "freed less than")
		b, err = s.SessionBreaker(ctx, "acme", "saved", rule, time.Now(), same)
		require.NoError(t, err)
		require.False(t, b.Open, "a run that freed half is no loop, min freed %v", rule.MinFreed)
	}
}
