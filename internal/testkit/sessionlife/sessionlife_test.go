package sessionlife

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

func msg(role conversation.Role, blocks ...conversation.Block) conversation.Message {
	return conversation.Message{Role: role, Blocks: blocks}
}

func text(s string) conversation.Block {
	return conversation.Block{Kind: conversation.KindText, Text: s}
}

// TestReplay: turns are appended whole, an event is sent each time the
// conversation reaches the trigger, the next turns continue from the
// output with only what was appended since, a turn whose call was never
// answered is left out, and cycled turns get fresh call ids.
func TestReplay(t *testing.T) {
	t.Parallel()
	use := func(id string) conversation.Block {
		return conversation.Block{Kind: conversation.KindToolUse, ToolID: id, ToolName: "bash", Input: `{"command":"ls"}`}
	}
	result := func(id string) conversation.Block {
		return conversation.Block{Kind: conversation.KindToolResult, ToolID: id, Text: "a result of some length to fill the context"}
	}
	src := conversation.Conversation{Format: conversation.FormatOpenAI, Messages: []conversation.Message{
		msg(conversation.RoleSystem, text("system")), msg(conversation.RoleUser, text("fix the bug")),
		msg(conversation.RoleAssistant, use("c1")), msg(conversation.RoleTool, result("c1")),
		msg(conversation.RoleAssistant, use("c2")), msg(conversation.RoleTool, result("c2")),
		msg(conversation.RoleAssistant, use("c3")), // never answered
	}}
	head, turns := Turns(src)
	require.Len(t, head, 2)
	require.Len(t, turns, 3)
	counter, err := tokens.New("o200k_base")
	require.NoError(t, err)
	var events []Event
	ids := map[string]bool{}
	res, err := Replay(t.Context(), src, Options{Limit: 100, Trigger: 0.3, Counter: counter, Compactions: 4, Cycle: true},
		func(_ context.Context, ev Event) (contract.Outcome, []byte, error) {
			events = append(events, ev)
			c, err := conversation.Parse(ev.Data, conversation.FormatOpenAI)
			require.NoError(t, err)
			require.NoError(t, conversation.CheckPairing(c), "event %d keeps every call with its result", ev.N)
			for _, m := range c.Messages {
				for _, b := range m.Blocks {
					if b.Kind == conversation.KindToolUse {
						ids[b.ToolID] = true
					}
				}
			}
			// The "compaction" keeps the head and the last turn.
			out := c
			out.Messages = append(append([]conversation.Message(nil), c.Messages[:2]...), c.Messages[len(c.Messages)-2:]...)
			data, err := conversation.Render(out)
			return contract.Outcome{RunID: "r", Status: "succeeded", OutputKey: "k"}, data, err
		})
	require.NoError(t, err)
	require.Len(t, res.Compactions, 4)
	require.Nil(t, events[0].Base)
	for _, ev := range events[1:] {
		require.NotNil(t, ev.Base)
		require.NotEmpty(t, ev.Appended, "event %d carries what was appended since", ev.N)
		require.Positive(t, ev.New)
		require.Less(t, ev.New, len(ev.Data))
		msgs, err := MessagesJSON(conversation.FormatOpenAI, ev.Appended)
		require.NoError(t, err)
		require.Contains(t, string(msgs), `"role":"tool"`)
	}
	require.Positive(t, res.Skipped, "the unanswered call is left out")
	require.False(t, ids["c3"])
	require.True(t, ids["c1-c1"] || ids["c2-c1"], "cycled turns get fresh ids: %v", ids)
}
