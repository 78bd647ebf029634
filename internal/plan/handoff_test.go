package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TestHandoffKeepsIntentSummaryAndLastTurn: the three-tier design's fresh session is
// the system prompt, the task verbatim, a handoff summary naming the
// archive and the offloads, and the last turn, with tool pairing intact.
func TestHandoffKeepsIntentSummaryAndLastTurn(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.ThreeTier, "")
	out, ok, err := Handoff(conv, p, HandoffRefs{Level: "CRITICAL", Usage: 0.87, ArchiveID: "abc",
		Offloads: [][2]string{{"0123", "bash"}}})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, conversation.CheckPairing(out))
	require.Less(t, len(out.Messages), len(conv.Messages))
	require.Equal(t, conv.Messages[0], out.Messages[0], "system prompt")
	require.Equal(t, conv.Messages[1], out.Messages[1], "the task, verbatim")
	summary := out.Messages[2].Blocks[0].Text
	require.True(t, strings.HasPrefix(summary, "## Session Handoff"))
	require.Contains(t, summary, "recover_context tool, id: abc", "the archive by its id")
	require.Contains(t, summary, "recover_context tool, id: 0123")
	require.Contains(t, summary, "CRITICAL (87.0%")
	n := len(conv.Messages)
	require.Equal(t, conv.Messages[n-1], out.Messages[len(out.Messages)-1], "the last turn, verbatim")

	react := conversation.Conversation{Format: conversation.FormatReAct}
	_, ok, err = Handoff(react, p, HandoffRefs{})
	require.NoError(t, err)
	require.False(t, ok, "a ReAct trajectory is not handed off")
}

// TestFitHandoff: a handoff whose task is a 600,000-character user
// message fits its own budget: the task keeps its opening and a pointer,
// and the offload holds the whole message byte for byte; the large
// results of the last turn are offloaded as the ladder does; a handoff
// already under its budget is unchanged.
func TestFitHandoff(t *testing.T) {
	t.Parallel()
	conv := overflowing(t, "../../testdata/conversations/django__django-11742.json", strings.Repeat("log line 42: connection reset\n", 4000))
	var task strings.Builder
	for i := 0; task.Len() < 600_000; i++ {
		task.WriteString("Requirement " + strings.Repeat("x", i%13) + ": the handler must keep working when the upstream resets.\n")
	}
	for i, m := range conv.Messages {
		if m.Role == conversation.RoleUser {
			conv.Messages[i].Blocks[0].Text = task.String()
			break
		}
	}
	p := preset(t, policy.ThreeTier, "")
	b, err := NewBudget(p, "gpt-4o", 40_000, tokens.Limits{})
	require.NoError(t, err)
	handoff, ok, err := Handoff(conv, p, HandoffRefs{Level: "CRITICAL", Usage: 3.2})
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, b.Measure(handoff), b.Limit, "the handoff as built is over the limit")

	out, offloads, fits, err := FitHandoff(handoff, p, b, key)
	require.NoError(t, err)
	require.True(t, fits)
	require.LessOrEqual(t, b.Measure(out), LadderGoal(p, b))
	require.NoError(t, conversation.CheckPairing(out))
	var user *Offload
	for i := range offloads {
		if offloads[i].ToolName == "user-message" {
			user = &offloads[i]
		}
	}
	require.NotNil(t, user, "the oversized task is offloaded")
	require.Equal(t, task.String(), user.Text, "byte for byte")
	id := user.Key[strings.LastIndexByte(user.Key, '/')+1:]
	kept := out.Messages[1].Blocks[0].Text
	require.True(t, strings.HasPrefix(kept, task.String()[:handoffHeadChars]), "the task keeps its opening")
	require.Contains(t, kept, "recover_context tool, id: "+id)

	small, offloads, fits, err := FitHandoff(out, p, b, key)
	require.NoError(t, err)
	require.True(t, fits)
	require.Empty(t, offloads)
	require.Equal(t, out, small)
}

// TestHandoffOfACompactedConversation: an earlier summary is not the
// user's last words; a compacted conversation still hands off, with the
// summary inside what the handoff summarizes.
func TestHandoffOfACompactedConversation(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.ThreeTier, "")
	protected := strategy.Protected(conv, Protection(p))
	split := strategy.SplitPoint(conv, 3, protected)
	compacted, _, err := strategy.Compact(conv, split, "SUMMARY-MARK of the work so far", strategy.StyleCompressedHistory, protected)
	require.NoError(t, err)
	_, _, transcript, ok := HandoffTranscript(compacted, p)
	require.True(t, ok)
	require.Contains(t, transcript, "SUMMARY-MARK")
	out, ok, err := Handoff(compacted, p, HandoffRefs{Level: "CRITICAL", Usage: 0.9})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, conversation.CheckPairing(out))
}

// TestTranscriptIsWrittenOnce: the transcript is the one every header
// and text make, one after another, and is written into a buffer of its
// size: about one copy of what it holds is allocated, where a buffer
// grown as it went allocated about five.
func TestTranscriptIsWrittenOnce(t *testing.T) {
	conv := sample(t)
	// A result of an error, and a header of every kind.
	for i, m := range conv.Messages {
		if m.Role == conversation.RoleTool {
			conv.Messages[i].Blocks[0].IsError = true
			break
		}
	}
	protected := make([]bool, len(conv.Messages))
	protected[0] = true
	var want strings.Builder
	for i, m := range conv.Messages[:len(conv.Messages)-2] {
		if protected[i] {
			continue
		}
		for _, blk := range m.Blocks {
			switch blk.Kind {
			case conversation.KindText, conversation.KindThinking:
				fmt.Fprintf(&want, "[%s]\n%s\n\n", m.Role, blk.Text)
			case conversation.KindToolUse:
				fmt.Fprintf(&want, "[assistant tool call %s]\n%s\n\n", blk.ToolName, blk.Input)
			case conversation.KindToolResult:
				label := "tool result"
				if blk.IsError {
					label = "tool error"
				}
				fmt.Fprintf(&want, "[tool %s %s]\n%s\n\n", label, blk.ToolName, blk.Text)
			}
		}
	}
	require.Equal(t, want.String(), Transcript(conv, len(conv.Messages)-2, protected))
	require.Contains(t, want.String(), "[tool tool error ")

	// Ten copies of the conversation, as one transcript of megabytes.
	big := conv
	for range 10 {
		big.Messages = append(big.Messages, conv.Messages...)
	}
	var text string
	alloc := memtest.Allocated(func() { text = Transcript(big, len(big.Messages), nil) })
	require.Less(t, alloc, uint64(len(text))*3/2, "a transcript of %d bytes allocated %d", len(text), alloc)
}

// TestHandoffCarriesTheWholeLog: a handoff in a session that already has
// a summary log keeps every block (and a reflection that replaced
// earlier ones) byte for byte, each with its recovery line, in every
// preset that keeps a log; the handoff's own summary covers what came
// after them. Without the log's protection the blocks were part of the
// middle and only the newest summary survived. A preset without a log
// summarizes them again, as the source design does.
func TestHandoffCarriesTheWholeLog(t *testing.T) {
	t.Parallel()
	reflection := "[Compressed History]\n\n" + strategy.LogBlockText("1-3", "Reflection of 3 session log blocks: REFLECTED-MARK\n\nRecover the summarized messages 2-40 with the recover_context tool, id: aaa.m2-40")
	block4 := "[Compressed History]\n\n" + strategy.LogBlockText("4", "BLOCK4-MARK the agent ran the tests\n\nRecover the summarized messages 41-60 with the recover_context tool, id: aaa.m41-60")
	for _, name := range []string{policy.ThreeTier, policy.Adaptive, policy.OffloadCompact, policy.AutoSummarize} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conv := sample(t)
			withLog := conv
			withLog.Messages = append([]conversation.Message{conv.Messages[0], conv.Messages[1],
				text(conversation.RoleUser, reflection), text(conversation.RoleUser, block4)}, conv.Messages[2:]...)
			p := preset(t, name, "")
			out, ok, err := Handoff(withLog, p, HandoffRefs{Level: "CRITICAL", Usage: 0.9, ArchiveID: "abc"})
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, conversation.CheckPairing(out))
			rendered, err := conversation.Render(out)
			require.NoError(t, err)
			all := string(rendered)
			_, _, transcript, _ := HandoffTranscript(withLog, p)
			if !p.History.Log.Enabled {
				require.Contains(t, transcript, "BLOCK4-MARK", "without a log the blocks are summarized again")
				return
			}
			require.Equal(t, reflection, out.Messages[2].Blocks[0].Text, "the reflection, byte for byte")
			require.Equal(t, block4, out.Messages[3].Blocks[0].Text, "every block, byte for byte")
			require.Contains(t, all, "id: aaa.m2-40", "the reflection's recovery line")
			require.Contains(t, all, "id: aaa.m41-60", "the block's recovery line")
			require.NotContains(t, transcript, "BLOCK4-MARK", "the handoff summarizes what the log does not hold")
			require.True(t, strings.HasPrefix(out.Messages[4].Blocks[0].Text, "## Session Handoff"), "the handoff's summary follows the log")
		})
	}
}

// TestHandoffRightAfterTheLog: a handoff made by the run that just
// appended the log's newest block: the history summary it made is that
// block, which the handoff carries once (not again as its summary); and
// when nothing lies between the log and the last turn, the handoff is
// still made, its note before the last turn.
func TestHandoffRightAfterTheLog(t *testing.T) {
	t.Parallel()
	p := preset(t, policy.ThreeTier, "")
	require.True(t, p.History.Log.Enabled)
	conv := sample(t)
	body := "### Session Intent\n- NEWEST-BLOCK-MARK fix the check\n\nRecover the summarized messages 2-80 with the recover_context tool, id: aaa.m2-80"
	block := strategy.SessionSummaryHeading + " [s1]\n\n" + strategy.LogBlockText("1", body)
	withLog := conv
	withLog.Messages = append([]conversation.Message{conv.Messages[0], conv.Messages[1], text(conversation.RoleUser, block)}, conv.Messages[len(conv.Messages)-8:]...)
	out, ok, err := Handoff(withLog, p, HandoffRefs{Level: "CRITICAL", Usage: 0.9, ArchiveID: "abc", Made: body})
	require.NoError(t, err)
	require.True(t, ok)
	rendered, err := conversation.Render(out)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(rendered), "NEWEST-BLOCK-MARK"), "the newest block once, not again as the handoff's summary")

	for _, between := range [][]conversation.Message{nil, {text(conversation.RoleAssistant, "Continuing.")}} {
		bare := conv
		bare.Messages = append(append([]conversation.Message{conv.Messages[0], conv.Messages[1], text(conversation.RoleUser, block)},
			between...), text(conversation.RoleUser, "Go on with the tests."))
		out, ok, err = Handoff(bare, p, HandoffRefs{Level: "CRITICAL", Usage: 0.9, ArchiveID: "abc", Made: body})
		require.NoError(t, err)
		require.True(t, ok, "a handoff all the same (%d between)", len(between))
		require.NoError(t, conversation.CheckPairing(out))
		require.Len(t, out.Messages, 5, "system, task, the log, the note, the last turn")
		require.Equal(t, block, out.Messages[2].Blocks[0].Text)
		note := out.Messages[3].Blocks[0].Text
		require.True(t, strings.HasPrefix(note, "## Session Handoff"), note)
		require.Contains(t, note, "id: abc")
		require.NotContains(t, note, "NEWEST-BLOCK-MARK")
		require.Equal(t, "Go on with the tests.", out.Messages[4].Blocks[0].Text)
	}
}
