package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TestInspectCountsLayer2AfterLayer1: a trajectory over layer 2's 80%
// trigger only because of one huge result is brought under it by layer
// 1's map-reduce of that result, so inspect (like a run) reports no
// layer-2 target; without the huge result's weight it would have counted
// every result above 5,000 characters.
func TestInspectCountsLayer2AfterLayer1(t *testing.T) {
	t.Parallel()
	mid := strings.Repeat("row of output data\n", 400) // 7,600 chars: a layer-2 size
	huge := strings.Repeat("log line of a very long build\n", 5500)
	doc := map[string]any{"execution": map[string]any{"tool_calls": []any{
		map[string]any{"thought": "list", "action": map[string]any{"tool": "ls"}, "result": mid},
		map[string]any{"thought": "read", "action": map[string]any{"tool": "cat"}, "result": mid},
		map[string]any{"thought": "build", "action": map[string]any{"tool": "make"}, "result": huge},
	}}}
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	conv, err := conversation.ParseAny(data)
	require.NoError(t, err)
	require.Equal(t, conversation.FormatReAct, conv.Format)

	p := preset(t, policy.ReactTwoLayer, "")
	r, err := Inspect(conv, p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Greater(t, r.Usage, p.GlobalResults.TriggerUsage, "over layer 2's trigger before layer 1")
	require.Equal(t, 1, r.LargeResults, "layer 1 takes the huge result")
	require.Zero(t, r.GlobalResults, "after layer 1 the trajectory is far under layer 2's trigger")
}
