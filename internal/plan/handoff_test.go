package plan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// TestHandoffKeepsIntentSummaryAndLastTurn: seed 004's fresh session is
// the system prompt, the task verbatim, a handoff summary naming the
// archive and the offloads, and the last turn, with tool pairing intact.
func TestHandoffKeepsIntentSummaryAndLastTurn(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.ThreeTier, "")
	out, ok, err := Handoff(conv, p, HandoffRefs{Level: "CRITICAL", Usage: 0.87, ArchiveKey: "tenants/t/archive/ab/abc",
		Offloads: [][2]string{{"0123", "bash"}}})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, conversation.CheckPairing(out))
	require.Less(t, len(out.Messages), len(conv.Messages))
	require.Equal(t, conv.Messages[0], out.Messages[0], "system prompt")
	require.Equal(t, conv.Messages[1], out.Messages[1], "the task, verbatim")
	summary := out.Messages[2].Blocks[0].Text
	require.True(t, strings.HasPrefix(summary, "## Session Handoff"))
	require.Contains(t, summary, "tenants/t/archive/ab/abc")
	require.Contains(t, summary, "recover_context tool, id: 0123")
	require.Contains(t, summary, "CRITICAL (87.0%")
	n := len(conv.Messages)
	require.Equal(t, conv.Messages[n-1], out.Messages[len(out.Messages)-1], "the last turn, verbatim")

	react := conversation.Conversation{Format: conversation.FormatReAct}
	_, ok, err = Handoff(react, p, HandoffRefs{})
	require.NoError(t, err)
	require.False(t, ok, "a ReAct trajectory is not handed off")
}
