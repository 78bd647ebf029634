package activities_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// The steps that compact the history and end the run, on the in-memory
// stores.

// planned runs the plan step on the test conversation, stored as the
// gateway stores it (an archive).
func (u *unit) planned() (blob.Ref, activities.PlanResult) {
	u.t.Helper()
	in, _ := u.conversation()
	res, err := u.a.Plan(u.t.Context(), activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: in.SHA256})
	require.NoError(u.t, err)
	return in, res
}

// TestUnitPrepareHistory: a manual run over its limit summarizes all but
// the tail, and stores the transcript of what it summarizes; a run well
// under its limit, not forced, skips.
func TestUnitPrepareHistory(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		trigger string
		limit   int
		skip    bool
	}{
		{name: "manual, over the limit", trigger: "manual", limit: 4000},
		{name: "automatic, well under the limit", trigger: "auto", limit: 1000000, skip: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			u.run.Trigger, u.run.ContextLimit = tt.trigger, tt.limit
			in, _ := u.conversation()
			res, err := u.a.PrepareHistory(t.Context(), activities.HistoryInput{Run: u.run, WorkKey: in.Key})
			require.NoError(t, err)
			require.Equal(t, tt.skip, res.Skip)
			if tt.skip {
				require.NotEmpty(t, res.Reason)
				require.Empty(t, res.TranscriptKey)
				return
			}
			require.Positive(t, res.Split)
			require.Positive(t, res.Summarized)
			require.Positive(t, res.Kept)
			require.NotEmpty(t, u.get(res.TranscriptKey))
			require.Equal(t, "history/prepare", res.StepRecord.Name)
		})
	}
}

// TestUnitApplyHistory: the summary replaces the summarized messages and
// ends naming the id of the archived original's range it replaces.
func TestUnitApplyHistory(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, plan := u.planned()
	prep, err := u.a.PrepareHistory(t.Context(), activities.HistoryInput{Run: u.run, WorkKey: in.Key})
	require.NoError(t, err)
	require.False(t, prep.Skip)
	summary := u.put("summary", "The agent fixed the max_length check of CharField choices in django/db/models/fields/__init__.py.")
	res, err := u.a.ApplyHistory(t.Context(), activities.ApplyHistoryInput{Run: u.run, Step: "history/apply",
		WorkKey: in.Key, Split: prep.Split, SummaryKey: summary, ArchiveKey: plan.Archive.Key})
	require.NoError(t, err)
	require.NotEqual(t, in.Key, res.WorkKey)
	require.Less(t, res.Tokens, plan.TokensBefore)
	out := u.get(res.WorkKey)
	require.Contains(t, out, "max_length check of CharField")
	require.Contains(t, out, "recover_context tool, id: "+plan.Archive.SHA256, "the summary names the id that gives the messages back")
	conv, err := conversation.ParseAny([]byte(out))
	require.NoError(t, err)
	require.Less(t, len(conv.Messages), plan.Messages)
}

// TestUnitPrepareHandoff: the handoff's transcript is stored for the
// summarizer.
func TestUnitPrepareHandoff(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, _ := u.conversation()
	res, err := u.a.PrepareHandoff(t.Context(), activities.HandoffInput{Run: u.run, WorkKey: in.Key})
	require.NoError(t, err)
	require.False(t, res.Skip)
	require.NotEmpty(t, u.get(res.TranscriptKey))
	require.Equal(t, "handoff/prepare", res.StepRecord.Name)
}

// TestUnitCommit: commit stores the output, ends the run with the gathered
// records and its own, persists the watermark and releases the session's
// restored offloads (never another tenant's key); a retry changes nothing.
func TestUnitCommit(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := t.Context()
	in, plan := u.planned()
	offload := u.put(blob.KindOffload, "an offloaded tool result")
	require.NoError(t, u.store.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", Key: offload, ToolID: "call_1"}))
	foreign, err := u.blob.PutContentString(ctx, "other", blob.KindOffload, "another tenant's")
	require.NoError(t, err)
	commit := activities.CommitInput{Run: u.run, WorkKey: in.Key, ArchiveKey: plan.Archive.Key, TokensBefore: plan.TokensBefore,
		Steps: []store.Step{*plan.StepRecord}, Watermark: "call_9", DeleteOffloads: []string{offload, foreign.Key}}

	res, err := u.a.Commit(ctx, commit)
	require.NoError(t, err)
	require.True(t, res.Committed)
	require.Nil(t, res.StepRecord, "commit writes its own record")
	require.True(t, res.Outcome.OverLimit, "4,000 tokens are not reachable by commit alone")
	require.Equal(t, "over_limit", res.Outcome.Status)
	require.NotEmpty(t, res.Outcome.OverLimitReason)
	require.Equal(t, plan.TokensBefore, res.Outcome.TokensBefore)
	require.False(t, u.blob.has(offload), "the released offload is deleted")
	require.True(t, u.blob.has(foreign.Key), "another tenant's key is never released")
	_, err = conversation.ParseAny([]byte(u.get(res.Outcome.OutputKey)))
	require.NoError(t, err)
	if res.Outcome.HandoffKey != "" {
		require.True(t, u.blob.has(res.Outcome.HandoffKey))
	}
	run, err := u.store.GetRun(ctx, u.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunOverLimit, run.Status)
	// The workflow's result is the run's answer as every reader gets it.
	stored, err := run.Outcome()
	require.NoError(t, err)
	require.Equal(t, stored, res.Outcome)
	require.Equal(t, []string{"plan", "commit"}, u.store.stepNames())
	watermark, err := u.store.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, "call_9", watermark)

	commit.Steps, commit.DeleteOffloads = nil, nil
	again, err := u.a.Commit(ctx, commit)
	require.NoError(t, err)
	require.False(t, again.Committed, "a retried commit changes nothing")
	require.Equal(t, res.Outcome, again.Outcome)
	require.Equal(t, []string{"plan", "commit", "commit"}, u.store.stepNames())
}

// TestUnitCommitNotify: the commit tells the workflow to start a delivery
// only when the store's commit found a live endpoint of the run's tenant
// and the worker has a webhook store; a retried commit says the same.
func TestUnitCommitNotify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		webhooks bool
		hooks    bool
		want     bool
	}{
		{"endpoint and sender", true, true, true},
		{"no endpoint", false, true, false},
		{"worker without a webhook store", true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			u.store.webhooks["acme"] = tt.webhooks
			if tt.hooks {
				u.a.Hooks = newMemHooks()
			}
			in, plan := u.planned()
			commit := activities.CommitInput{Run: u.run, WorkKey: in.Key, ArchiveKey: plan.Archive.Key, TokensBefore: plan.TokensBefore}
			res, err := u.a.Commit(t.Context(), commit)
			require.NoError(t, err)
			require.True(t, res.Committed)
			require.Equal(t, tt.want, res.Notify)
			again, err := u.a.Commit(t.Context(), commit)
			require.NoError(t, err)
			require.False(t, again.Committed)
			require.Equal(t, tt.want, again.Notify, "a retried commit")
		})
	}
}

// TestUnitCommitReplay: a replay is a what-if. Its commit leaves the
// session's watermark and offloads as they were and records the
// watermark it reached in its stats, where a promotion reads it.
func TestUnitCommitReplay(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := t.Context()
	u.run.ReplayOf = "run-original"
	in, plan := u.planned()
	require.NoError(t, u.store.SetWatermark(ctx, "acme", "s1", "call_2", "run-original"))
	offload := u.put(blob.KindOffload, "an offloaded tool result")
	require.NoError(t, u.store.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", Key: offload, ToolID: "call_1"}))

	res, err := u.a.Commit(ctx, activities.CommitInput{Run: u.run, WorkKey: in.Key, ArchiveKey: plan.Archive.Key,
		TokensBefore: plan.TokensBefore, Watermark: "call_9", DeleteOffloads: []string{offload}})
	require.NoError(t, err)
	require.True(t, res.Committed)
	watermark, err := u.store.GetWatermark(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, "call_2", watermark, "a replay does not move the session's watermark")
	require.True(t, u.blob.has(offload), "a replay releases no offload of the session")
	run, err := u.store.GetRun(ctx, u.run.ID)
	require.NoError(t, err)
	stats, err := run.ParseStats()
	require.NoError(t, err)
	require.Equal(t, "call_9", stats.Watermark, "the watermark a promotion would move the session to")
}

// TestUnitCommitAfterFailure: a run that already failed is not committed.
func TestUnitCommitAfterFailure(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, plan := u.planned()
	_, err := u.a.FailRun(t.Context(), activities.FailInput{RunID: u.run.ID, Class: store.ErrorSummarizer, Message: "boom"})
	require.NoError(t, err)
	_, err = u.a.Commit(t.Context(), activities.CommitInput{Run: u.run, WorkKey: in.Key, ArchiveKey: plan.Archive.Key,
		TokensBefore: plan.TokensBefore})
	require.ErrorContains(t, err, "is already failed")
	require.True(t, slices.ContainsFunc(u.store.steps, func(st store.Step) bool {
		return st.Name == "commit" && st.Error != ""
	}), "the failed commit records its failure")
}

// TestUnitFailRun: a failure keeps the records of the steps before it; a
// run already final stays as it is.
func TestUnitFailRun(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	_, plan := u.planned()
	fail := activities.FailInput{RunID: u.run.ID, Class: store.ErrorSummarizer, Message: "history: the summarizer failed",
		Steps: []store.Step{*plan.StepRecord}}
	_, err := u.a.FailRun(t.Context(), fail)
	require.NoError(t, err)
	run, err := u.store.GetRun(t.Context(), u.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, run.Status)
	require.Equal(t, store.ErrorSummarizer, run.ErrorClass)
	require.Equal(t, []string{"plan"}, u.store.stepNames())

	fail.Message, fail.Steps = "a later failure", nil
	_, err = u.a.FailRun(t.Context(), fail)
	require.NoError(t, err)
	run, err = u.store.GetRun(t.Context(), u.run.ID)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(run.Error, "history:"), "the first failure stands")
}

// TestUnitReleaseIntermediates: a final run's intermediates go, the
// tenant's durable objects and another run's intermediates stay; a
// worker that keeps intermediates deletes nothing.
func TestUnitReleaseIntermediates(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ctx := t.Context()
	mine, err := u.blob.PutRunContentString(ctx, "acme", u.run.ID, "summary", "a summary")
	require.NoError(t, err)
	other, err := u.blob.PutRunContentString(ctx, "acme", "run-other", "summary", "a summary")
	require.NoError(t, err)
	output := u.put(blob.KindOutput, "the output")

	u.a.KeepIntermediates = true
	res, err := u.a.ReleaseIntermediates(ctx, activities.ReleaseInput{Run: u.run})
	require.NoError(t, err)
	require.Zero(t, res.Deleted)
	require.True(t, u.blob.has(mine.Key), "kept for debugging")

	u.a.KeepIntermediates = false
	res, err = u.a.ReleaseIntermediates(ctx, activities.ReleaseInput{Run: u.run})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted)
	require.False(t, u.blob.has(mine.Key))
	require.True(t, u.blob.has(other.Key), "another run's intermediates stay")
	require.True(t, u.blob.has(output), "durable objects stay")
}
