package activities_test

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// TestUnitApplyHistoryKeepsTheTaskAndPins: under every preset that
// summarizes the history, a manual run over its limit summarizes the
// older messages, and the system prompt, the first user message (the
// task) and a user message pinned in the middle of the summarized range
// ("IMPORTANT: ...") come out of ApplyHistory byte for byte, beside the
// summary, rather than folded into it.
func TestUnitApplyHistoryKeepsTheTaskAndPins(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../testdata/conversations/django__django-11742.json")
	require.NoError(t, err)
	orig, err := conversation.ParseAny(data)
	require.NoError(t, err)
	require.Equal(t, conversation.RoleSystem, orig.Messages[0].Role)
	require.Equal(t, conversation.RoleUser, orig.Messages[1].Role, "the task")
	// A pin between two tool turns, well inside what is summarized.
	const at = 12
	require.Equal(t, conversation.RoleTool, orig.Messages[at-1].Role)
	pin := conversation.Message{Role: conversation.RoleUser, Shape: orig.Messages[1].Shape,
		Blocks: []conversation.Block{{Kind: conversation.KindText, Text: "IMPORTANT: keep the public API of CharField unchanged."}}}
	orig.Messages = slices.Insert(orig.Messages, at, pin)
	pinned, err := conversation.Render(orig)
	require.NoError(t, err)
	protected := []conversation.Message{orig.Messages[0], orig.Messages[1], orig.Messages[at]}

	for _, preset := range []string{policy.OffloadCompact, policy.AutoSummarize, policy.ThreeTier, policy.Adaptive} {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			ctx := t.Context()
			u.run.Preset, u.run.Resolved = preset, resolve(t, preset)
			in, err := u.blob.PutContent(ctx, u.run.Tenant, blob.KindArchive, pinned)
			require.NoError(t, err)
			pr, err := u.a.Plan(ctx, activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: in.SHA256})
			require.NoError(t, err)
			prep, err := u.a.PrepareHistory(ctx, activities.HistoryInput{Run: u.run, WorkKey: in.Key})
			require.NoError(t, err)
			require.False(t, prep.Skip, prep.Reason)
			require.Greater(t, prep.Split, at, "the pin lies in the summarized range")
			summary := u.put("summary", "The agent located the max_length check of CharField in django/db/models/fields/__init__.py.")
			res, err := u.a.ApplyHistory(ctx, activities.ApplyHistoryInput{Run: u.run, Step: "history/apply",
				WorkKey: in.Key, Split: prep.Split, SummaryKey: summary, ArchiveKey: pr.Archive.Key})
			require.NoError(t, err)
			out, err := conversation.ParseAny([]byte(u.get(res.WorkKey)))
			require.NoError(t, err)
			require.Less(t, len(out.Messages), len(orig.Messages), "older messages were summarized")
			require.Contains(t, u.get(res.WorkKey), "max_length check of CharField", "the summary is in")
			for _, m := range protected {
				require.True(t, slices.ContainsFunc(out.Messages, func(o conversation.Message) bool {
					return o.Role == m.Role && slices.EqualFunc(o.Blocks, m.Blocks, func(a, b conversation.Block) bool {
						return a.Kind == b.Kind && a.Text == b.Text
					})
				}), "kept verbatim: %.80q", m.Blocks[0].Text)
			}
		})
	}
}
