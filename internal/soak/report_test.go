package soak

import (
	"testing"

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
