package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGroupFailures: failures that differ only in ids and figures are
// one line with their count, and every other kind keeps a line of its
// own however many of the first kind come before it.
func TestGroupFailures(t *testing.T) {
	t.Parallel()
	var failures []string
	for _, id := range []string{"run-1a2b3c", "run-9f8e7d", "run-00ff11"} {
		failures = append(failures, "replay of run "+id+": workflow not found")
	}
	failures = append(failures, "3 steps have more than one successful step row",
		"replay of run run-aaa111: workflow not found",
		"run run-5 is succeeded but its Compaction workflow ended Failed")
	require.Equal(t, []failureGroup{
		{first: "replay of run run-1a2b3c: workflow not found", n: 4},
		{first: "3 steps have more than one successful step row", n: 1},
		{first: "run run-5 is succeeded but its Compaction workflow ended Failed", n: 1},
	}, groupFailures(failures))
	require.Empty(t, groupFailures(nil))
}

// TestDrainSaysEachTenantsBacklog: the first and last run final after the
// faults, per tenant, and the pace between.
func TestDrainSaysEachTenantsBacklog(t *testing.T) {
	t.Parallel()
	var r Report
	require.Equal(t, "–", r.drainText())
	for _, s := range []int{6, 90, 30} {
		r.drainOf("tenant-1").add(time.Duration(s) * time.Second)
	}
	r.drainOf("tenant-0").add(2 * time.Second)
	require.Equal(t, "tenant-0: 1 runs, first final after 2s, last after 2s (0.5 runs/s); "+
		"tenant-1: 3 runs, first final after 6s, last after 1m30s (0.0 runs/s)", r.drainText())
}
