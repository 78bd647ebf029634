package metrics_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// gathered is every metric of m's registry by name: the sum of a
// counter's or gauge's series, a histogram's sample count.
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch {
			case s.GetCounter() != nil:
				out[f.GetName()] += s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				out[f.GetName()] += s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				out[f.GetName()] += float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestAdmissionMetrics: an Admit call's waits and retold runs are
// counted; the gauges report what their read returns at each scrape, and
// none of them when the read fails.
func TestAdmissionMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.Admission([]time.Duration{2 * time.Second, 30 * time.Second}, 3)
	m.Admission(nil, 1)
	var fail error
	load := metrics.AdmissionLoad{Waiting: 7, InFlight: 4, TenantsWaiting: 2, OldestWait: 90 * time.Second}
	m.WatchAdmission(func(ctx context.Context) (metrics.AdmissionLoad, error) {
		_, ok := ctx.Deadline()
		require.True(t, ok, "the read is bounded")
		return load, fail
	})
	got := gathered(t, m)
	require.Equal(t, 2.0, got["compactor_admission_wait_seconds"])
	require.Equal(t, 4.0, got["compactor_admission_retold_total"])
	require.Equal(t, 7.0, got["compactor_admission_waiting_runs"])
	require.Equal(t, 4.0, got["compactor_admission_in_flight_runs"])
	require.Equal(t, 2.0, got["compactor_admission_tenants_waiting"])
	require.Equal(t, 90.0, got["compactor_admission_oldest_wait_seconds"])

	// Read at each scrape, not kept.
	load.Waiting = 0
	require.Zero(t, gathered(t, m)["compactor_admission_waiting_runs"])

	fail = errors.New("postgres down")
	got = gathered(t, m)
	for _, name := range []string{"compactor_admission_waiting_runs", "compactor_admission_in_flight_runs",
		"compactor_admission_tenants_waiting", "compactor_admission_oldest_wait_seconds"} {
		require.NotContains(t, got, name, "a failed read reports no figure")
	}
	require.Equal(t, 4.0, got["compactor_admission_retold_total"], "the other metrics are still reported")
}

// TestNilMetricsRecordNothing: a nil *Metrics (tests and tools) takes
// every call.
func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Admission([]time.Duration{time.Second}, 1)
	m.WatchAdmission(func(context.Context) (metrics.AdmissionLoad, error) { return metrics.AdmissionLoad{}, nil })
	m.Step("plan", 1, time.Millisecond, nil)
}

// TestLiveHeapIsExported: the runtime's live heap after the last
// collection is among the Go collector's metrics, and it follows what is
// live (the soak reads it to say whether a process came back to its
// quiet level).
func TestLiveHeapIsExported(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	runtime.GC()
	before := gathered(t, m)["go_gc_heap_live_bytes"]
	require.Positive(t, before, "go_gc_heap_live_bytes is exported")
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	runtime.GC()
	require.Greater(t, gathered(t, m)["go_gc_heap_live_bytes"], before+32<<20, "a 64 MB live slice shows")
	runtime.KeepAlive(held)
}
