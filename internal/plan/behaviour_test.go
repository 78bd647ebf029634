package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// Labelled fixtures for the behavioural drift check, cut from the real
// trajectories in testdata/conversations (a SWE-agent run of DeepSeek on
// django, one of Gemini on requests, a tau-bench airline dialogue of
// gpt-4o): the previous output is a head, a summary-log block the offline
// summarizer wrote of the middle, and the kept turns; what the agent did
// next is a slice of real messages.

// tauDialogue is the first airline dialogue of the tau-bench file (a list
// of tasks, each with its trajectory).
func tauDialogue(t *testing.T) conversation.Conversation {
	t.Helper()
	data := convtest.Read(t, "tau-bench/gpt-4o-airline.json")
	var tasks []struct {
		Traj json.RawMessage `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(data, &tasks))
	c, err := conversation.ParseAny(tasks[0].Traj)
	require.NoError(t, err)
	return c
}

// compacted is c's messages [0, head), a summary-log block of [head, cut)
// written by the offline summarizer, and the kept turns [cut, end).
func compacted(t *testing.T, c conversation.Conversation, head, cut, end int) conversation.Conversation {
	t.Helper()
	middle := c
	middle.Messages = c.Messages[head:cut]
	transcript := Transcript(middle, len(middle.Messages), make([]bool, len(middle.Messages)))
	res, err := offline.Summarizer{}.Summarize(t.Context(), llm.Request{Prompt: llm.PromptHistory, Text: transcript, TargetTokens: 1500})
	require.NoError(t, err)
	block := strategy.LogBlockText("1", res.Text+"\n\nRecover the summarized messages 2-9 with the recover_context tool, id: abc.m2-9")
	out := c
	out.Messages = append(append(append([]conversation.Message(nil), c.Messages[:head]...),
		conversation.Message{Role: conversation.RoleUser, Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "[Compressed History]\n\n" + block}}}),
		c.Messages[cut:end]...)
	return out
}

// then is prev followed by msgs.
func then(prev conversation.Conversation, msgs ...conversation.Message) conversation.Conversation {
	out := prev
	out.Messages = append(append([]conversation.Message(nil), prev.Messages...), msgs...)
	return out
}

func signalNames(s []BehaviourSignal) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Name)
	}
	return out
}

func TestBehaviourSignalsOnRealTrajectories(t *testing.T) {
	t.Parallel()
	django := convtest.Load(t, "django__django-11742.json")
	requests := convtest.Load(t, "swe-agent-gemini/psf__requests-1142.json")
	tau := tauDialogue(t)

	djangoPrev := compacted(t, django, 2, 130, 140)
	pending, open := pendingWork(lastSummary(djangoPrev))
	require.True(t, len(pending) > 0 || open > 0, "the django summary lists work still pending or errors open: %v %d", pending, open)
	// The task, then a block of: the agent asked for the user id and got it.
	tauPrev := compacted(t, tau, 2, 4, 4)

	tests := []struct {
		name string
		prev conversation.Conversation
		cur  conversation.Conversation
		want []string
	}{
		{"django: the real submit while errors are open", djangoPrev, then(djangoPrev, django.Messages[140]), []string{SignalCompletion}},
		{"django: a real middle turn on the task's files", djangoPrev, then(djangoPrev, django.Messages[40:44]...), nil},
		{"django: calls of another repository's run (requests)", djangoPrev, then(djangoPrev, requests.Messages[6:10]...), []string{SignalOffTarget}},
		{"tau: the agent asks the user again what it was told", tauPrev, then(tauPrev, tau.Messages[4]), []string{SignalClarification}},
		{"tau: the agent goes on with a lookup", tauPrev, then(tauPrev, tau.Messages[6:8]...), nil},
		{"no compaction before: nothing to check against", django, then(django, django.Messages[140]), nil},
		{"not a continuation: nothing to check", djangoPrev, django, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Behaviour(tt.prev, tt.cur)
			require.Equal(t, tt.want, signalNames(got), "%+v", got)
			for _, s := range got {
				require.GreaterOrEqual(t, s.Message, len(tt.prev.Messages), "the signal names a message the agent wrote after the compaction")
				require.NotEmpty(t, s.Note)
			}
			if len(got) > 0 {
				w := GoalDriftWarning(tt.cur, got)
				require.True(t, strings.HasPrefix(w, "⚠️ **Goal Drift Warning**"), w)
				for _, part := range []string{"**Detection:**", "**Original Intent:**", "**Current Action:**", "**Recovery Action:**", "**Recommendation:**"} {
					require.Contains(t, w, part)
				}
			}
		})
	}
}
