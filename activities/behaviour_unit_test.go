package activities_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestUnitCommitWarnsOfBehaviourDrift: the first event after a
// compaction whose agent declares the task done while the summary lists
// pending work and an open error: the commit records a behaviour drift
// verdict naming the message, says it in the outcome, and appends the
// Goal Drift Warning at the output's tail, after everything the agent
// holds (the stable prefix is untouched). With the preset option off,
// nothing is checked. When the tail is a call still waiting for its
// result, the warning is not written (it would split the pair).
func TestUnitCommitWarnsOfBehaviourDrift(t *testing.T) {
	t.Parallel()
	block := "[Compressed History]\n\n<session-log block=\"1\">\n## Pending Tasks\n- Run the test suite again after the fix in app/core.py\n\n" +
		"## Debugging & Issues\n- AssertionError: expected 3, got 2 — open (pytest tests/test_app.py)\n</session-log>"
	prevMsgs := []map[string]any{
		{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix the failing test in tests/test_app.py"},
		{"role": "user", "content": block},
		{"role": "assistant", "content": "I changed app/core.py; running the tests next."},
	}
	done := map[string]any{"role": "assistant", "content": "The task is complete."}
	pendingCall := map[string]any{"role": "assistant", "content": "The task is complete.", "tool_calls": []any{map[string]any{
		"id": "call_9", "type": "function", "function": map[string]any{"name": "submit", "arguments": "{}"}}}}
	tests := []struct {
		name     string
		next     map[string]any
		behave   bool
		signals  []string
		appended bool
	}{
		{"done declared early", done, true, []string{"premature-completion"}, true},
		{"a submit call pending at the tail", pendingCall, true, []string{"premature-completion"}, false},
		{"the option off", done, false, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			ctx := t.Context()
			u.run.Trigger, u.run.ContextLimit = "threshold", 100_000
			u.run.Resolved.Drift.Behaviour = tt.behave
			render := func(msgs []map[string]any) []byte {
				data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
				require.NoError(t, err)
				return data
			}
			prevKey := u.put(blob.KindOutput, string(render(prevMsgs)))
			u.store.latest["acme/s1"] = store.Output{RunID: "run-prev", Key: prevKey}
			input := render(append(append([]map[string]any(nil), prevMsgs...), tt.next))
			ref, err := u.blob.PutContent(ctx, u.run.Tenant, blob.KindArchive, input)
			require.NoError(t, err)
			res, err := u.a.Commit(ctx, activities.CommitInput{Run: u.run, WorkKey: ref.Key, ArchiveKey: ref.Key, TokensBefore: 200})
			require.NoError(t, err)
			o := res.Outcome
			require.Equal(t, tt.signals, o.BehaviourDrift)
			require.Equal(t, tt.appended, o.GoalDriftWarning)
			out, err := conversation.ParseAny([]byte(u.get(o.OutputKey)))
			require.NoError(t, err)
			last := out.Messages[len(out.Messages)-1]
			warned := strings.HasPrefix(last.Blocks[0].Text, "⚠️ **Goal Drift Warning**")
			require.Equal(t, tt.appended, warned)
			if tt.appended {
				require.Equal(t, conversation.RoleUser, last.Role)
				require.Contains(t, last.Blocks[0].Text, "Fix the failing test in tests/test_app.py", "the original intent")
				require.Equal(t, 6, len(out.Messages), "the input's messages unchanged, then the warning")
			} else {
				require.Equal(t, string(input), u.get(o.OutputKey), "no warning: the output is the input")
			}
			var verdicts []store.Drift
			for _, d := range u.store.drifts {
				if d.RunID == u.run.ID && strings.HasPrefix(d.Step, "behaviour/") {
					verdicts = append(verdicts, d)
				}
			}
			require.Len(t, verdicts, len(tt.signals))
			for _, d := range verdicts {
				require.False(t, d.Passed)
				require.Contains(t, d.Verdict, "message 4")
			}
		})
	}
}
