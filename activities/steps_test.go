package activities_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// stepEnv is one test's activities on real Postgres (a schema of its own)
// and S3 (a bucket of its own), run in Temporal's activity test
// environment, with one submitted run of a real conversation.
type stepEnv struct {
	t     *testing.T
	store *store.Store
	blob  *blob.Store
	env   *testsuite.TestActivityEnvironment
	run   contract.Run
	input blob.Ref
	data  []byte
	s3    *blobtest.RequestCounter
}

// The input is stored as the gateway stores it: once, as the archive of
// the caller's bytes, its SHA-256 checked by S3.
func newStepEnv(t *testing.T) *stepEnv {
	t.Helper()
	data, err := os.ReadFile("../testdata/conversations/django__django-11742.json")
	require.NoError(t, err, "the test conversation must be in testdata")
	counted, s3 := blobtest.WithCounter()
	e := &stepEnv{t: t, store: storetest.New(t), blob: blobtest.New(t, counted), data: data, s3: s3}
	a := &activities.Activities{Store: e.store, Blob: e.blob, Summarizer: offline.Summarizer{}, Limits: tokens.DefaultLimits(),
		LLMSlots: make(chan struct{}, 1)}
	var suite testsuite.WorkflowTestSuite
	e.env = suite.NewTestActivityEnvironment()
	e.env.RegisterActivity(a)

	ctx := t.Context()
	e.input, err = e.blob.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	e.run = contract.Run{ID: testRunID(t), Tenant: "acme", Session: "s1", EventID: "ev-1", Trigger: "manual",
		Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 4000}
	sub, err := e.store.SubmitRun(ctx, store.Run{ID: e.run.ID, Tenant: "acme", Session: "s1", EventID: "ev-1",
		Trigger: "manual", Preset: "offload-compact", InputKey: e.input.Key, InputSHA256: e.input.SHA256}, "body", nil)
	require.NoError(t, err)
	require.False(t, sub.Conflict)
	return e
}

// resolved is e.run with the snapshot of its preset the gateway would
// have given it at submit (tests change e.run.Preset after newStepEnv).
func (e *stepEnv) resolved() contract.Run {
	e.t.Helper()
	run := e.run
	if run.Resolved == nil {
		p, err := policy.Resolve(run.Preset, run.Overrides)
		require.NoError(e.t, err)
		run.Resolved = &p
	}
	return run
}

func (e *stepEnv) plan() activities.PlanResult {
	e.t.Helper()
	val, err := e.env.ExecuteActivity("Plan", activities.PlanInput{Run: e.resolved(), InputKey: e.input.Key, InputSHA256: e.input.SHA256})
	require.NoError(e.t, err)
	var res activities.PlanResult
	require.NoError(e.t, val.Get(&res))
	return res
}

// deterministic runs the Deterministic step on the input for e.run.
func (e *stepEnv) deterministic() activities.DeterministicResult {
	e.t.Helper()
	val, err := e.env.ExecuteActivity("Deterministic", activities.DeterministicInput{Run: e.resolved(), WorkKey: e.input.Key})
	require.NoError(e.t, err)
	var res activities.DeterministicResult
	require.NoError(e.t, val.Get(&res))
	return res
}

func (e *stepEnv) steps() []string {
	e.t.Helper()
	steps, err := e.store.ListSteps(e.t.Context(), e.run.ID)
	require.NoError(e.t, err)
	var names []string
	for _, st := range steps {
		names = append(names, st.Name)
	}
	return names
}

// TestPlanArchivesAndStartsTheRun: the plan step archives the original
// (restorable byte for byte), marks the run running with its figures and
// archive, and returns its record instead of writing it.
func TestPlanArchivesAndStartsTheRun(t *testing.T) {
	t.Parallel()
	e := newStepEnv(t)
	res := e.plan()
	require.NotNil(t, res.Archive)
	archived, err := e.blob.GetVerified(t.Context(), res.Archive.Key, res.Archive.SHA256)
	require.NoError(t, err)
	require.Equal(t, e.data, archived)

	run, err := e.store.GetRun(t.Context(), e.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, run.Status)
	require.Equal(t, res.Archive.Key, run.ArchiveKey)
	require.Equal(t, int64(res.TokensBefore), run.TokensBefore)
	require.Positive(t, run.TokensBefore)

	require.NotNil(t, res.StepRecord, "the record goes back to the workflow")
	require.Equal(t, "plan", res.StepRecord.Name)
	require.Equal(t, int64(len(e.data)), res.StepRecord.InputSize)
	require.Empty(t, e.steps(), "nothing written before the run ends")
}

// TestPlanArchive: the input the gateway stored as an archive is the
// run's archive, with no second upload; it restores the original byte for
// byte from S3 and is on the run's row.
func TestPlanArchive(t *testing.T) {
	t.Parallel()
	e := newStepEnv(t)
	before := e.s3.Count(http.MethodPut)
	res := e.plan()
	require.Zero(t, e.s3.Count(http.MethodPut)-before, "S3 PUTs of the plan step")
	require.NotNil(t, res.Archive)
	require.Equal(t, e.input.Key, res.Archive.Key, "the input is the archive")
	require.Equal(t, e.input.SHA256, res.Archive.SHA256)
	archived, err := e.blob.GetVerifiedFromS3(t.Context(), res.Archive.Key, res.Archive.SHA256)
	require.NoError(t, err)
	require.Equal(t, e.data, archived)
	run, err := e.store.GetRun(t.Context(), e.run.ID)
	require.NoError(t, err)
	require.Equal(t, res.Archive.Key, run.ArchiveKey)
	require.Equal(t, res.Archive.SHA256, run.ArchiveSHA256)
}

// TestCommitWritesTheGatheredRecords: commit writes the run's gathered
// records and its own with the run's final state; a retried commit, which
// changes nothing, records nothing either (a re-run after a timed-out
// workflow task must not leave a second row of each step).
func TestCommitWritesTheGatheredRecords(t *testing.T) {
	t.Parallel()
	e := newStepEnv(t)
	plan := e.plan()
	in := activities.CommitInput{Run: e.resolved(), WorkKey: e.input.Key, ArchiveKey: plan.Archive.Key,
		TokensBefore: plan.TokensBefore, Steps: []store.Step{*plan.StepRecord}}
	val, err := e.env.ExecuteActivity("Commit", in)
	require.NoError(t, err)
	var out activities.CommitResult
	require.NoError(t, val.Get(&out))
	require.True(t, out.Committed)
	require.Nil(t, out.StepRecord, "commit writes its own record")
	require.Equal(t, []string{"plan", "commit"}, e.steps())

	run, err := e.store.GetRun(t.Context(), e.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunOverLimit, run.Status, "a 4000-token limit is not reachable by commit alone")
	require.InDelta(t, 1.0, run.Ratio, 0.001)

	val, err = e.env.ExecuteActivity("Commit", in)
	require.NoError(t, err)
	require.NoError(t, val.Get(&out))
	require.False(t, out.Committed, "a retried commit changes nothing")
	require.Equal(t, []string{"plan", "commit"}, e.steps(), "the plan's and the commit's records once")
}

// TestFailRunWritesTheGatheredRecords: a failure keeps the steps that
// succeeded before it in the audit trail.
func TestFailRunWritesTheGatheredRecords(t *testing.T) {
	t.Parallel()
	e := newStepEnv(t)
	plan := e.plan()
	_, err := e.env.ExecuteActivity("FailRun", activities.FailInput{RunID: e.run.ID, Class: store.ErrorSummarizer,
		Message: "history: the summarizer failed", Steps: []store.Step{*plan.StepRecord}})
	require.NoError(t, err)
	run, err := e.store.GetRun(t.Context(), e.run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, run.Status)
	require.Equal(t, "history: the summarizer failed", run.Error)
	require.Equal(t, store.ErrorSummarizer, run.ErrorClass)
	require.Equal(t, []string{"plan"}, e.steps())
}

// TestCommitOutputsTheSavedWorkAsIs: when the last step saved the working
// conversation, commit puts those very bytes out instead of rendering the
// conversation again; a conversation no step changed (the input, which
// the gateway stored as its archive) goes back as the caller's own bytes.
func TestCommitOutputsTheSavedWorkAsIs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind string
	}{
		{name: "a saved working copy goes out as it is", kind: blob.KindWork},
		{name: "an unchanged input goes out as it is", kind: blob.KindArchive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newStepEnv(t)
			plan := e.plan()
			conv, err := conversation.ParseAny(e.data)
			require.NoError(t, err)
			canonical, err := conversation.Render(conv)
			require.NoError(t, err)
			var indented bytes.Buffer
			require.NoError(t, json.Indent(&indented, canonical, "", "  "))
			work, err := e.blob.PutContent(t.Context(), "acme", tt.kind, indented.Bytes())
			require.NoError(t, err)

			val, err := e.env.ExecuteActivity("Commit", activities.CommitInput{Run: e.resolved(), WorkKey: work.Key,
				ArchiveKey: plan.Archive.Key, TokensBefore: plan.TokensBefore, Steps: []store.Step{*plan.StepRecord}})
			require.NoError(t, err)
			var out activities.CommitResult
			require.NoError(t, val.Get(&out))
			output, err := e.blob.GetVerified(t.Context(), out.Outcome.OutputKey, out.Outcome.OutputSHA256)
			require.NoError(t, err)
			require.Equal(t, indented.Bytes(), output, "not the rendering %d bytes long", len(canonical))
		})
	}
}
