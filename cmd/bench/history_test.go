package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestHistoryAtScaleSmall runs measurement 9's code on a tiny history:
// the set-based load, the listing through the audit service, the writes
// through the store, the table sizes, the plans and the rows it reports.
func TestHistoryAtScaleSmall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hs := storetest.New(t)

	points, err := measureHistory(ctx, hs, []int{200, 400}, 5, 5)
	require.NoError(t, err)
	require.Len(t, points, 2)
	for _, p := range points {
		require.Len(t, p.newest, 5)
		require.Len(t, p.deep, 5)
		require.Len(t, p.session, 5)
		require.Len(t, p.write, 5)
		for _, c := range historyCalls {
			require.Len(t, p.calls[c], 5, c)
		}
		for _, kind := range historyPageKinds {
			require.Contains(t, p.plans[kind], "runs", kind)
		}
	}
	byName := map[string]tableSize{}
	for _, ts := range points[1].tables {
		byName[ts.name] = ts
		require.Positive(t, ts.total, ts.name)
	}
	// 400 runs: 6 steps and an event each; a verdict for one in 3, two
	// for one in 9. The 5 (+5 warm-up) runs written at 200 count too.
	require.EqualValues(t, 400, byName["runs"].rows)
	require.EqualValues(t, 400, byName["events"].rows)
	require.EqualValues(t, 400*6, byName["run_steps"].rows)
	require.InDelta(t, 400*(1.0/3+1.0/9), byName["drift_verdicts"].rows, 15)
	require.Contains(t, byName["runs"].indexNames, "runs_session_started_idx")

	rep := &report{}
	o := newOptions(false, testDataDir)
	o.historySizes, o.historySamples, o.historyWrites = []int{200, 400}, 5, 5
	reportHistory(rep, points, "t_schema", o)
	require.Len(t, rep.rows, 3)
	for _, r := range rep.rows {
		require.Equal(t, "9", r.id)
		require.NotContains(t, r.value, "failed")
	}
	require.Contains(t, rep.rows[0].ratio, "newest p50 ×")
	require.Len(t, rep.notes, 1)
	require.True(t, strings.HasPrefix(rep.notes[0], "9. History at scale"))
}

func TestThousands(t *testing.T) {
	t.Parallel()
	require.Equal(t, "1,000 then 100,000", joinInts([]int{1000, 100000}))
	require.Equal(t, "999", thousands(999))
	require.Equal(t, "1,234,567", thousands(1234567))
}
