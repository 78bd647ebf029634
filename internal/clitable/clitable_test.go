package clitable

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
)

// TestRunNamesCounterAndLevelReason: a committed run's report names the
// counter (with its margin) and, for a run that ended RED or above, why;
// a run under RED has no level line.
func TestRunNamesCounterAndLevelReason(t *testing.T) {
	t.Parallel()
	red := contract.Outcome{RunID: "r1", Status: "succeeded", OutputKey: "k", LevelAfter: "RED", Counter: "o200k_base×1.25 (claude)",
		Stats: contract.Stats{Unit: "tokens", LevelReason: "80% of limit 40000 (o200k_base×1.25 (claude)) after every step: a ReAct trajectory never drops a turn"}}
	var sb strings.Builder
	Run(&sb, red)
	require.Contains(t, sb.String(), "counter  o200k_base×1.25 (claude)")
	require.Contains(t, sb.String(), "level    80% of limit 40000")

	green := red
	green.LevelAfter, green.LevelReason = "GREEN", ""
	sb.Reset()
	Run(&sb, green)
	require.NotContains(t, sb.String(), "level ")
}
