package activities_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// The steps that work on a whole conversation, on the in-memory stores.

// TestUnitPlan: the plan step starts the run with its figures and
// archive and hands its record back; the archive is the input the gateway
// stored, recorded with no write.
func TestUnitPlan(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, data := u.conversation()
	before := u.blob.putCount()
	res, err := u.a.Plan(t.Context(), activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: in.SHA256})
	require.NoError(t, err)
	require.Zero(t, u.blob.putCount()-before, "the input is the archive: nothing is written")
	require.NotNil(t, res.Archive)
	require.Equal(t, activities.ArchiveResult{Key: in.Key, SHA256: in.SHA256, Size: int64(len(data))}, *res.Archive)
	require.Positive(t, res.TokensBefore)
	require.False(t, res.Skip)
	require.NotNil(t, res.StepRecord)
	require.Equal(t, "plan", res.StepRecord.Name)
	require.Empty(t, u.store.stepNames(), "the record goes back to the workflow")

	run, err := u.store.GetRun(t.Context(), u.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, run.Status)
	require.Equal(t, in.Key, run.ArchiveKey)
	require.Equal(t, in.SHA256, run.ArchiveSHA256)
	require.Equal(t, int64(res.TokensBefore), run.TokensBefore)
}

// TestUnitPlanOfAFinalRun: a plan step that finds its run final already
// (committed by an execution of its steps whose workflow task Temporal
// never recorded: the chaos soak's worker cut off after the commit) hands
// back the recorded outcome instead of failing the run, and changes
// nothing.
func TestUnitPlanOfAFinalRun(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, _ := u.conversation()
	pin := activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: in.SHA256}
	first, err := u.a.Plan(t.Context(), pin)
	require.NoError(t, err)
	require.Nil(t, first.Final, "a live run is planned")
	_, err = u.store.CommitRun(t.Context(), u.run.ID, store.RunResult{TokensAfter: 10, OutputKey: in.Key, OutputSHA256: in.SHA256})
	require.NoError(t, err)

	again, err := u.a.Plan(t.Context(), pin)
	require.NoError(t, err, "a final run is not a failure")
	require.NotNil(t, again.Final)
	require.Equal(t, string(store.RunSucceeded), again.Final.Status)
	require.Equal(t, u.run.ID, again.Final.RunID)
	require.Equal(t, in.Key, again.Final.OutputKey)
	run, err := u.store.GetRun(t.Context(), u.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, run.Status, "the row is unchanged")

	// A run the reconciler marked failed stays failed: the step fails
	// for good, saying so.
	failed := newUnit(t)
	fin, _ := failed.conversation()
	_, err = failed.store.FailRun(t.Context(), failed.run.ID, store.Failure{Message: "worker lost"})
	require.NoError(t, err)
	_, err = failed.a.Plan(t.Context(), activities.PlanInput{Run: failed.run, InputKey: fin.Key, InputSHA256: fin.SHA256})
	require.ErrorContains(t, err, "already recorded failed")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.True(t, app.NonRetryable())
}

// TestUnitPlanRefusesAnInputThatIsNotAnArchive: only the gateway starts
// runs, and it stores every input as its archive. An input of another
// kind (an output, a working copy) is never copied nor recorded as the
// original: the step fails for good, writes nothing and leaves the run
// pending without an archive.
func TestUnitPlanRefusesAnInputThatIsNotAnArchive(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{blob.KindOutput, blob.KindWork, blob.KindOffload} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			data, err := os.ReadFile("../testdata/conversations/django__django-11742.json")
			require.NoError(t, err)
			in, err := u.blob.PutContent(t.Context(), u.run.Tenant, kind, data)
			require.NoError(t, err)
			before := u.blob.putCount()
			_, err = u.a.Plan(t.Context(), activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: in.SHA256})
			require.ErrorContains(t, err, "is not the archive")
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.True(t, app.NonRetryable())
			require.Zero(t, u.blob.putCount()-before, "nothing is copied")
			run, err := u.store.GetRun(t.Context(), u.run.ID)
			require.NoError(t, err)
			require.Equal(t, store.RunPending, run.Status)
			require.Empty(t, run.ArchiveKey)
		})
	}
}

// TestUnitPlanRefusesADamagedInput: an input whose bytes are not its
// SHA-256 fails the step, and the failure is recorded.
func TestUnitPlanRefusesADamagedInput(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, _ := u.conversation()
	_, err := u.a.Plan(t.Context(), activities.PlanInput{Run: u.run, InputKey: in.Key, InputSHA256: blob.SHA256Hex(nil)})
	require.Error(t, err)
	require.Equal(t, []string{"plan"}, u.store.stepNames(), "a failed step writes its own record")
}

// TestUnitDeterministic: passes that change nothing hand on the input's
// key; passes that do store a smaller working copy and leave the input.
func TestUnitDeterministic(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		preset  string
		limit   int
		changed bool
	}{
		{name: "watermark under the limit", preset: "watermark", limit: 200000},
		{name: "three-tier far over the limit", preset: "three-tier", limit: 4000, changed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			u.run.Preset, u.run.ContextLimit, u.run.Resolved = tt.preset, tt.limit, resolve(t, tt.preset)
			in, data := u.conversation()
			res, err := u.a.Deterministic(t.Context(), activities.DeterministicInput{Run: u.run, WorkKey: in.Key})
			require.NoError(t, err)
			require.NotNil(t, res.StepRecord)
			require.NotEmpty(t, res.Passes)
			if !tt.changed {
				require.Equal(t, in.Key, res.WorkKey)
				return
			}
			require.NotEqual(t, in.Key, res.WorkKey)
			require.Less(t, len(u.get(res.WorkKey)), len(data))
			require.Equal(t, string(data), u.get(in.Key), "the input is never changed")
		})
	}
}

// TestUnitFitBudget: a ladder stage saves the conversation only when it
// changed it, and records and stores what it offloads; an unknown stage
// is a configuration error, not retried.
func TestUnitFitBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		stage    string
		applied  bool
		offloads int
	}{
		{stage: activities.FitOffload, applied: true, offloads: 1},
		{stage: activities.FitTruncate, applied: true},
		{stage: activities.FitRelieve, applied: true, offloads: 1},
		{stage: activities.FitOffloadSmall},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			u.run.ContextLimit = 8000
			in, _ := u.conversation()
			res, err := u.a.FitBudget(t.Context(), activities.FitInput{Run: u.run, WorkKey: in.Key, Stage: tt.stage})
			require.NoError(t, err)
			require.Equal(t, tt.applied, res.Pass.Applied)
			require.Equal(t, tt.applied, res.WorkKey != in.Key, "a new work key exactly when the stage applied")
			require.True(t, u.blob.has(res.WorkKey))
			require.True(t, res.AboveGoal, "8,000 tokens are out of reach of one stage")
			require.True(t, res.HistoryAllowed)
			offs, err := u.store.ListOffloads(t.Context(), "acme", "s1", false)
			require.NoError(t, err)
			require.Len(t, offs, tt.offloads)
			for _, o := range offs {
				require.True(t, u.blob.has(o.Key), "an offload is stored under the key it was recorded with")
			}
		})
	}
	t.Run("unknown stage", func(t *testing.T) {
		t.Parallel()
		u := newUnit(t)
		u.run.ContextLimit = 8000
		in, _ := u.conversation()
		_, err := u.a.FitBudget(t.Context(), activities.FitInput{Run: u.run, WorkKey: in.Key, Stage: "no-such-stage"})
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		require.True(t, app.NonRetryable())
	})
}

// TestUnitPlanGlobal: over its trigger, layer 2 lists tool results to
// rewrite, each stored for the summarizer; excluded ones are left out.
func TestUnitPlanGlobal(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	u.run.Preset, u.run.Resolved = policy.ReactTwoLayer, resolve(t, policy.ReactTwoLayer)
	in, _ := u.conversation()
	res, err := u.a.PlanGlobal(t.Context(), activities.GlobalInput{Run: u.run, WorkKey: in.Key})
	require.NoError(t, err)
	require.Positive(t, res.Usage)
	require.NotEmpty(t, res.Targets)
	for _, tg := range res.Targets {
		require.NotEmpty(t, u.get(tg.TextKey))
	}
	first := res.Targets[0]
	again, err := u.a.PlanGlobal(t.Context(), activities.GlobalInput{Run: u.run, WorkKey: in.Key,
		Exclude: []activities.Replacement{{Msg: first.Msg, Block: first.Block}}})
	require.NoError(t, err)
	require.Len(t, again.Targets, len(res.Targets)-1)
	for _, tg := range again.Targets {
		require.False(t, tg.Msg == first.Msg && tg.Block == first.Block, "an excluded result is not listed again")
	}
}

// TestUnitApplyResults: a rewritten result replaces the original in a
// new working copy; a position out of range is refused.
func TestUnitApplyResults(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, _ := u.conversation()
	conv, err := conversation.ParseAny([]byte(u.get(in.Key)))
	require.NoError(t, err)
	msg, block := -1, -1
	for i, m := range conv.Messages {
		for j, b := range m.Blocks {
			if b.Kind == conversation.KindToolResult && msg < 0 {
				msg, block = i, j
			}
		}
	}
	require.GreaterOrEqual(t, msg, 0, "the test conversation has a tool result")
	text := u.put("summary", "REWRITTEN RESULT")
	res, err := u.a.ApplyResults(t.Context(), activities.ApplyResultsInput{Run: u.run, Step: "large/0/apply",
		WorkKey: in.Key, Replacements: []activities.Replacement{{Msg: msg, Block: block, TextKey: text}}})
	require.NoError(t, err)
	require.NotEqual(t, in.Key, res.WorkKey)
	out, err := conversation.ParseAny([]byte(u.get(res.WorkKey)))
	require.NoError(t, err)
	require.Contains(t, out.Messages[msg].Blocks[block].Text, "REWRITTEN RESULT")

	_, err = u.a.ApplyResults(t.Context(), activities.ApplyResultsInput{Run: u.run, Step: "large/1/apply",
		WorkKey: in.Key, Replacements: []activities.Replacement{{Msg: len(conv.Messages), TextKey: text}}})
	require.ErrorContains(t, err, "out of range")
}
