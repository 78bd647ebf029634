package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// call is one activity call seen by the fakes.
type call struct {
	name string
	in   any
}

// fakes stands in for every activity. The fields are the answers; the
// zero value answers like a run where every step succeeds. The fake
// results carry keys derived from the step, so a test can tell which
// output a later step consumed.
type fakes struct {
	// released lists the runs whose intermediates were released.
	released []string
	// handedOn lists, for each Admit call, the run asked about ("" when
	// a finished run hands its slot on) and the steps called before it;
	// admit is their answer.
	handedOn []string
	admit    activities.AdmitResult
	admitErr error
	plan     activities.PlanResult
	planErr  error
	// editPreset, when set, changes the run's snapshot of its preset
	// (as if the deployment's overrides had set it).
	editPreset func(*policy.Preset)
	// editRun, when set, changes the run the workflow is started with.
	editRun func(*contract.Run)
	det     activities.DeterministicResult
	chunk   activities.ChunkResult
	// mergedChars is the size the merge step reports.
	mergedChars int
	global      activities.GlobalResult
	history     activities.HistoryPlan
	// fit answers FitBudget by stage; a missing stage leaves the work as
	// it is and under the goal.
	fit       map[string]activities.FitResult
	commitErr error
	// summarize, when set, answers Summarize; by default every call
	// succeeds with the key "sum(<step>)".
	summarize func(in activities.SummarizeInput) (activities.SummarizeResult, error)
	// drift answers CheckDrift by pass; missing passes pass.
	drift map[int]activities.DriftResult
	// summarizeDelay holds every Summarize call this long on the test
	// clock, so that calls overlap when the workflow allows it.
	summarizeDelay time.Duration

	mu    sync.Mutex
	calls []call
}

func (f *fakes) record(name string, in any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{name: name, in: in})
}

// names lists the activities called, in order.
func (f *fakes) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = c.name
	}
	return out
}

// inputsOf returns the inputs of every call whose input has type T, in
// call order.
//
// The copy of the resolved preset every step gets (Run.Resolved) and the
// summarizer model taken from it are left out, so that expectations name
// what each test is about; rawInputsOf keeps them.
func inputsOf[T any](f *fakes) []T {
	out := rawInputsOf[T](f)
	for i := range out {
		out[i] = withoutPreset(out[i])
	}
	return out
}

// rawInputsOf lists the inputs of type T as the steps received them.
func rawInputsOf[T any](f *fakes) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, c := range f.calls {
		if in, ok := c.in.(T); ok {
			out = append(out, in)
		}
	}
	return out
}

// withoutPreset clears the Run.Resolved field and a SummarizeInput's
// SummarizerModel of a step input, whatever its type.
func withoutPreset[T any](in T) T {
	v := reflect.ValueOf(&in).Elem()
	if v.Kind() != reflect.Struct {
		return in
	}
	if run := v.FieldByName("Run"); run.IsValid() && run.Type() == reflect.TypeOf(contract.Run{}) {
		run.FieldByName("Resolved").Set(reflect.Zero(run.FieldByName("Resolved").Type()))
	}
	if m := v.FieldByName("SummarizerModel"); m.IsValid() && m.Kind() == reflect.Pointer {
		m.Set(reflect.Zero(m.Type()))
	}
	return in
}

// summarizeSteps maps each Summarize step to its input (the last attempt).
func summarizeSteps(f *fakes) map[string]activities.SummarizeInput {
	out := map[string]activities.SummarizeInput{}
	for _, in := range inputsOf[activities.SummarizeInput](f) {
		out[in.Step] = in
	}
	return out
}

func sumKey(step string) string { return "sum(" + step + ")" }

// install registers the fakes as mocks of every activity on env.
func (f *fakes) install(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanInput) (activities.PlanResult, error) {
			f.record("Plan", in)
			if f.planErr != nil {
				return activities.PlanResult{}, f.planErr
			}
			p := f.plan
			if p.Format == "" {
				// Over its limit at the start; the deterministic fake
				// (90,000 tokens) brings it under the ladder's goal.
				p.Format, p.TokensBefore, p.LevelBefore, p.ContextLimit = "openai", 100000, "critical", 128000
			}
			p.Archive = &activities.ArchiveResult{Key: "archive/" + in.InputSHA256, SHA256: in.InputSHA256, Size: 10}
			p.StepRecord = stepOf(in.Run, "plan")
			return p, nil
		})
	env.OnActivity(a.Deterministic, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeterministicInput) (activities.DeterministicResult, error) {
			f.record("Deterministic", in)
			d := f.det
			if d.WorkKey == "" {
				d.WorkKey = "work/det"
			}
			if d.Tokens == 0 {
				d.Tokens = 90000
			}
			d.StepRecord = stepOf(in.Run, "deterministic")
			return d, nil
		})
	env.OnActivity(a.Chunk, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ChunkInput) (activities.ChunkResult, error) {
			f.record("Chunk", in)
			return f.chunk, nil
		})
	sum := env.OnActivity(a.Summarize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SummarizeInput) (activities.SummarizeResult, error) {
			f.record("Summarize", in)
			if f.summarize != nil {
				return f.summarize(in)
			}
			res := activities.SummarizeResult{Key: sumKey(in.Step), Chars: 100, Model: "m", PromptVersion: in.Prompt + "-v1"}
			res.StepRecord = stepOf(in.Run, in.Step)
			return res, nil
		})
	if f.summarizeDelay > 0 {
		sum.After(f.summarizeDelay)
	}
	env.OnActivity(a.Fallback, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FallbackInput) (activities.SummarizeResult, error) {
			f.record("Fallback", in)
			return activities.SummarizeResult{Key: "fallback(" + in.Step + ")", Chars: in.TargetChars, Model: in.Mode, Fallback: in.Mode}, nil
		})
	env.OnActivity(a.Merge, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MergeInput) (activities.MergeResult, error) {
			f.record("Merge", in)
			return activities.MergeResult{Key: "merged(" + in.Step + ")", Chars: f.mergedChars}, nil
		})
	env.OnActivity(a.ApplyResults, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ApplyResultsInput) (activities.WorkResult, error) {
			f.record("ApplyResults", in)
			return activities.WorkResult{WorkKey: "work/" + in.Step}, nil
		})
	env.OnActivity(a.PlanGlobal, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.GlobalInput) (activities.GlobalResult, error) {
			f.record("PlanGlobal", in)
			return f.global, nil
		})
	env.OnActivity(a.PrepareHandoff, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HandoffInput) (activities.HandoffPrep, error) {
			f.record("PrepareHandoff", in)
			return activities.HandoffPrep{TranscriptKey: "handoff-transcript"}, nil
		})
	env.OnActivity(a.PrepareHistory, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HistoryInput) (activities.HistoryPlan, error) {
			f.record("PrepareHistory", in)
			h := f.history
			if !h.Skip && h.TranscriptKey == "" {
				h = activities.HistoryPlan{Split: 10, TranscriptKey: "transcript", Summarized: 9, Restored: []string{"offload/1"}}
			}
			return h, nil
		})
	env.OnActivity(a.CheckDrift, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DriftInput) (activities.DriftResult, error) {
			f.record("CheckDrift", in)
			if d, ok := f.drift[in.Pass]; ok {
				return d, nil
			}
			return activities.DriftResult{Score: 1, Passed: true}, nil
		})
	env.OnActivity(a.Patch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PatchInput) (activities.SummarizeResult, error) {
			f.record("Patch", in)
			return activities.SummarizeResult{Key: "patched(" + in.SummaryKey + ")"}, nil
		})
	env.OnActivity(a.ApplyHistory, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ApplyHistoryInput) (activities.WorkResult, error) {
			f.record("ApplyHistory", in)
			return activities.WorkResult{WorkKey: "work/history"}, nil
		})
	env.OnActivity(a.FitBudget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FitInput) (activities.FitResult, error) {
			f.record("FitBudget/"+in.Stage, in)
			r, ok := f.fit[in.Stage]
			if !ok {
				return activities.FitResult{WorkKey: in.WorkKey}, nil
			}
			return r, nil
		})
	env.OnActivity(a.Commit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CommitInput) (activities.CommitResult, error) {
			f.record("Commit", in)
			if f.commitErr != nil {
				return activities.CommitResult{}, f.commitErr
			}
			return activities.CommitResult{Committed: true, Outcome: contract.Outcome{RunID: in.Run.ID, Status: "succeeded",
				OutputKey: "out/" + in.WorkKey, OutputSHA256: "sha", TokensBefore: in.TokensBefore, TokensAfter: 1000, Ratio: 0.01,
				LevelAfter: "normal", Stats: contract.Stats{LevelBefore: in.LevelBefore, Drift: in.Drift, Passes: in.Passes,
					HistoryFailed: in.HistoryFailed, PreservedCount: in.Preserved, ArchiveKey: in.ArchiveKey}}}, nil
		})
	env.OnActivity(a.ReleaseIntermediates, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ReleaseInput) (activities.ReleaseResult, error) {
			// Kept apart from the steps' calls: the step-order tests
			// name the compaction's steps.
			f.mu.Lock()
			defer f.mu.Unlock()
			f.released = append(f.released, in.Run.ID)
			return activities.ReleaseResult{Deleted: 3}, nil
		})
	var ad *activities.Admission
	env.OnActivity(ad.Admit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AdmitInput) (activities.AdmitResult, error) {
			// Kept apart from the steps' calls, as released is.
			f.mu.Lock()
			defer f.mu.Unlock()
			f.handedOn = append(f.handedOn, fmt.Sprintf("%s %q after %d steps", in.Tenant, in.RunID, len(f.calls)))
			return f.admit, f.admitErr
		})
	env.OnActivity(a.FailRun, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FailInput) (activities.FailResult, error) {
			f.record("FailRun", in)
			return activities.FailResult{}, nil
		})
}

// newTestEnv is a test workflow environment that logs only errors: the
// SDK's debug lines would bury a failure.
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	return suite.NewTestWorkflowEnvironment()
}

// quietLogger drops every log line.
func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// testRun is a run of the named preset with optional JSON overrides.
// stepOf is the record a step of a run that batches its records
// returns (nil for other runs); the execution id is the step's name.
func stepOf(run contract.Run, name string) *store.Step {
	return &store.Step{RunID: run.ID, Name: name, Attempt: 1, Kind: "fake", Execution: name}
}

func testRun(preset, overrides string) contract.Run {
	r := contract.Run{ID: "run-1", Tenant: "t1", Session: "s1", EventID: "ev-1", Trigger: "threshold", Preset: preset, Model: "gpt-4o"}
	if overrides != "" {
		r.Overrides = json.RawMessage(overrides)
	}
	// The gateway's snapshot, resolved once at submit.
	resolved, err := policy.Resolve(r.Preset, r.Overrides)
	if err != nil {
		panic(fmt.Sprintf("test preset %s: %v", preset, err))
	}
	r.Resolved = &resolved
	return r
}

// bare is run without its preset snapshot, as inputsOf lists step inputs.
func bare(run contract.Run) contract.Run {
	run.Resolved = nil
	return run
}

// runCompaction runs the Compaction workflow against the fakes and
// returns its result and error.
func runCompaction(t *testing.T, f *fakes, run contract.Run) (contract.Outcome, error) {
	t.Helper()
	return runCompactionInput(t, f, contract.CompactionInput{Run: run, InputKey: "t1/archive/abc", InputSHA256: "abc"})
}

// runCompactionInput is runCompaction with the whole input.
func runCompactionInput(t *testing.T, f *fakes, in contract.CompactionInput) (contract.Outcome, error) {
	t.Helper()
	if f.editRun != nil {
		f.editRun(&in.Run)
	}
	if f.editPreset != nil {
		preset := *in.Run.Resolved
		f.editPreset(&preset)
		in.Run.Resolved = &preset
	}
	env := newTestEnv()
	f.install(env)
	env.ExecuteWorkflow(Compaction, in)
	require.True(t, env.IsWorkflowCompleted())
	var res contract.Outcome
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
	}
	return res, err
}

// rejected is a summarizer error no retry will fix.
func rejected(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, activities.TypeLLMRejected, nil)
}

// unavailable is a summarizer error worth retrying.
func unavailable(msg string) error {
	return temporal.NewApplicationError(msg, "server_error")
}

// largeRun is a deterministic result with one huge tool result to
// map-reduce, in n chunks of 50,000 characters.
func largeRun(f *fakes, n int) {
	f.det = activities.DeterministicResult{WorkKey: "work/det", Tokens: 90000, LargeResults: []activities.Target{
		{Msg: 7, Block: 1, Chars: n * 50000, TextKey: "text/huge", ContextKey: "context/huge"},
	}}
	f.chunk = activities.ChunkResult{}
	for i := 0; i < n; i++ {
		f.chunk.Keys = append(f.chunk.Keys, fmt.Sprintf("chunk/%d", i))
		f.chunk.Chars = append(f.chunk.Chars, 50000-i)
	}
	f.mergedChars = 5000
}
