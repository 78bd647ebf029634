package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestDailyRunStatsCountsByDayAndOutcome(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	day1 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	create := func(tenant string, started time.Time, status store.RunStatus, before, after int64, replayOf string) string {
		t.Helper()
		r := store.Run{ID: uuid.NewString(), Tenant: tenant, Session: "s1", Status: status, StartedAt: started,
			TokensBefore: before, TokensAfter: after, ReplayOf: replayOf}
		if status.Final() {
			r.FinishedAt = started.Add(time.Minute)
		}
		if status == store.RunOverLimit || status == store.RunFailed {
			r.Error = "reason"
		}
		_, created, err := s.CreateRun(ctx, r)
		require.NoError(t, err)
		require.True(t, created)
		return r.ID
	}
	// Day 1: two successes, one over the limit, one failure; a replay of a
	// success counts as a run but saves nothing.
	first := create("acme", day1.Add(time.Hour), store.RunSucceeded, 1000, 400, "")
	create("acme", day1.Add(2*time.Hour), store.RunSucceeded, 500, 100, "")
	create("acme", day1.Add(3*time.Hour), store.RunOverLimit, 9000, 8000, "")
	create("acme", day1.Add(23*time.Hour+59*time.Minute), store.RunFailed, 700, 0, "")
	create("acme", day1.Add(4*time.Hour), store.RunSucceeded, 1000, 10, first)
	// Day 2: a live run.
	create("acme", day2.Add(2*time.Minute), store.RunRunning, 300, 0, "")
	// Before the window, and another tenant: not counted.
	create("acme", day1.Add(-time.Minute), store.RunSucceeded, 100, 1, "")
	create("globex", day1.Add(time.Hour), store.RunSucceeded, 100000, 1, "")

	got, err := s.DailyRunStats(ctx, "acme", day1)
	require.NoError(t, err)
	require.Equal(t, []store.DailyRuns{
		{Day: day1, Succeeded: 3, OverLimit: 1, Failed: 1, Replays: 1, TokensSaved: 600 + 400 + 1000},
		{Day: day2, Live: 1},
	}, got)
	require.Equal(t, 5, got[0].Total())

	none, err := s.DailyRunStats(ctx, "initech", day1)
	require.NoError(t, err)
	require.Empty(t, none)

	_, err = s.DailyRunStats(ctx, "", day1)
	require.ErrorContains(t, err, "tenant is empty")
}

func TestListRunsFiltersByPreset(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	for _, preset := range []string{"adaptive", "three-tier", "adaptive"} {
		_, _, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: "acme", Session: "s1", Preset: preset})
		require.NoError(t, err)
	}
	_, _, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: "globex", Session: "s1", Preset: "three-tier"})
	require.NoError(t, err)

	runs, err := s.ListRuns(ctx, store.RunFilter{Tenant: "acme", Preset: "three-tier"})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "three-tier", runs[0].Preset)
	runs, err = s.ListRuns(ctx, store.RunFilter{Tenant: "acme", Preset: "adaptive"})
	require.NoError(t, err)
	require.Len(t, runs, 2)
}
