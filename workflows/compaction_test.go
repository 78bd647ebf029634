package workflows

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestCompactionStepOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		preset string
		setup  func(f *fakes)
		want   []string
	}{{
		name:   "history preset: plan, archive, deterministic, summary, drift, apply, commit",
		preset: "offload-compact",
		want:   []string{"Plan", "Deterministic", "PrepareHistory", "Summarize", "CheckDrift", "ApplyHistory", "Commit"},
	}, {
		name:   "history skipped by the plan",
		preset: "auto-summarize",
		setup:  func(f *fakes) { f.history = activities.HistoryPlan{Skip: true, Reason: "under trigger"} },
		want:   []string{"Plan", "Deterministic", "PrepareHistory", "Commit"},
	}, {
		name:   "deterministic reaches the target: no LLM pass",
		preset: "adaptive",
		setup:  func(f *fakes) { f.det.Done = true },
		want:   []string{"Plan", "Deterministic", "Commit"},
	}, {
		name:   "done skips map-reduce of a large result too",
		preset: "react-two-layer",
		setup: func(f *fakes) {
			largeRun(f, 3)
			f.det.Done = true
		},
		want: []string{"Plan", "Deterministic", "Commit"},
	}, {
		name:   "plan says skip: the input is committed unchanged",
		preset: "adaptive",
		setup: func(f *fakes) {
			f.plan = activities.PlanResult{Format: "openai", Skip: true, Reason: "debug verbosity"}
		},
		want: []string{"Plan", "Commit"},
	}, {
		name:   "watermark has no LLM pass",
		preset: "watermark",
		want:   []string{"Plan", "Deterministic", "Commit"},
	}, {
		name:   "react two layer: map-reduce, drift, apply, then layer 2",
		preset: "react-two-layer",
		setup:  func(f *fakes) { largeRun(f, 2) },
		want:   []string{"Plan", "Deterministic", "Chunk", "Summarize", "Summarize", "Merge", "CheckDrift", "ApplyResults", "PlanGlobal", "Commit"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			if tt.setup != nil {
				tt.setup(f)
			}
			res, err := runCompaction(t, f, testRun(tt.preset, ""))
			require.NoError(t, err)
			require.Equal(t, tt.want, f.names())
			require.Equal(t, "run-1", res.RunID)
			require.Equal(t, "archive/abc", res.ArchiveKey)
			commits := inputsOf[activities.CommitInput](f)
			require.Len(t, commits, 1)
			require.Equal(t, "out/"+commits[0].WorkKey, res.OutputKey, "the result names the committed output")
		})
	}
}

// TestArchiveInPlan: the plan step records the original's archive (the
// input the gateway stored), no other step archives, and every later step
// gets the plan's archive.
func TestArchiveInPlan(t *testing.T) {
	t.Parallel()
	in := contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/archive/abc", InputSHA256: "abc"}
	f := &fakes{}
	res, err := runCompactionInput(t, f, in)
	require.NoError(t, err)
	require.Equal(t, []string{"Plan", "Deterministic", "PrepareHistory", "Summarize", "CheckDrift", "ApplyHistory", "Commit"}, f.names())
	require.Equal(t, "archive/abc", res.ArchiveKey)
	require.Equal(t, "archive/abc", inputsOf[activities.CommitInput](f)[0].ArchiveKey)
}

// TestBatchedStepRecords: the records that successful steps return reach
// the commit, in the order the steps ended and once each; when the run
// fails, they reach the failure instead.
func TestBatchedStepRecords(t *testing.T) {
	t.Parallel()
	names := func(steps []store.Step) []string {
		var out []string
		for _, st := range steps {
			out = append(out, st.Name)
		}
		return out
	}
	in := contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/archive/abc", InputSHA256: "abc"}

	f := &fakes{}
	_, err := runCompactionInput(t, f, in)
	require.NoError(t, err)
	commits := inputsOf[activities.CommitInput](f)
	require.Len(t, commits, 1)
	require.Equal(t, []string{"plan", "deterministic", "history/summarize"}, names(commits[0].Steps))
	require.Equal(t, 100000, commits[0].TokensBefore, "the plan's figure goes to commit")

	f = &fakes{commitErr: errors.New("commit broke")}
	_, err = runCompactionInput(t, f, in)
	require.Error(t, err)
	fails := inputsOf[activities.FailInput](f)
	require.Len(t, fails, 1)
	require.Equal(t, []string{"plan", "deterministic", "history/summarize"}, names(fails[0].Steps))
}

func TestCompactionHistoryPassFeedsCommit(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	f.det.Watermark = "toolu_1"
	f.det.Passes = []activities.PassStat{{Name: "offload", Applied: true, Count: 2}}
	res, err := runCompaction(t, f, testRun("offload-compact", ""))
	require.NoError(t, err)

	sums := inputsOf[activities.SummarizeInput](f)
	require.Len(t, sums, 1)
	require.Equal(t, activities.SummarizeInput{
		Run: bare(testRun("offload-compact", "")), Step: "history/summarize", Prompt: "history", SourceKey: "transcript",
		ArchiveKey: "archive/abc", TargetTokens: 8000,
	}, sums[0])
	hist := inputsOf[activities.HistoryInput](f)
	require.Equal(t, 100000-90000, hist[0].TokensFreed, "tokens freed by the cheap passes decide offload-compact's rule")
	require.Equal(t, "work/det", hist[0].WorkKey)

	apply := inputsOf[activities.ApplyHistoryInput](f)
	require.Len(t, apply, 1)
	require.Equal(t, sumKey("history/summarize"), apply[0].SummaryKey)
	require.Equal(t, 10, apply[0].Split)

	commit := inputsOf[activities.CommitInput](f)[0]
	require.Equal(t, "work/history", commit.WorkKey)
	require.Equal(t, "toolu_1", commit.Watermark)
	require.Equal(t, []string{"offload/1"}, commit.DeleteOffloads, "offload-compact deletes restored offloads after the commit")
	require.Equal(t, "history-v1", commit.PromptVersion)
	require.False(t, commit.HistoryFailed)
	require.Equal(t, []string{"offload", "history"}, passNames(commit.Passes))
	require.Equal(t, "passed", res.Drift)
	require.Equal(t, commit.Passes, res.Passes)
}

func passNames(ps []activities.PassStat) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestMapReduceFansOutOneSummaryPerChunk(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 7} {
		t.Run(fmt.Sprintf("%d chunks", n), func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			largeRun(f, n)
			res, err := runCompaction(t, f, testRun("react-two-layer", ""))
			require.NoError(t, err)

			steps := summarizeSteps(f)
			require.Len(t, steps, n)
			var want []string
			for i := 0; i < n; i++ {
				in, ok := steps[fmt.Sprintf("large/0/summarize/%d", i)]
				require.True(t, ok, "chunk %d summarized", i)
				require.Equal(t, "chunk", in.Prompt)
				require.Equal(t, fmt.Sprintf("chunk/%d", i), in.SourceKey)
				require.Equal(t, "context/huge", in.ContextKey, "the turn's thought and action go along")
				require.Equal(t, int(float64(50000-i)*0.1), in.TargetChars)
				want = append(want, sumKey(in.Step))
			}
			merges := inputsOf[activities.MergeInput](f)
			require.Len(t, merges, 1)
			require.Equal(t, want, merges[0].Keys, "summaries are merged in chunk order")

			apply := inputsOf[activities.ApplyResultsInput](f)
			require.Len(t, apply, 1)
			require.Equal(t, []activities.Replacement{{Msg: 7, Block: 1, TextKey: "merged(large/0/merge)"}}, apply[0].Replacements)
			// The fake's apply step measures 0 after the deterministic 90,000:
			// the pass reports what it saved.
			require.Contains(t, res.Passes, activities.PassStat{Name: "map-reduce", Applied: true, Count: 1, TokensSaved: 90000})
			require.Equal(t, "passed", res.Drift)
			drift := inputsOf[activities.DriftInput](f)
			require.Len(t, drift, 1)
			require.Equal(t, "text/huge", drift[0].SourceKey, "the final text is checked against the whole result")
			require.Equal(t, []activities.Replacement{{Msg: 7, Block: 1, TextKey: "merged(large/0/merge)"}},
				inputsOf[activities.GlobalInput](f)[0].Exclude, "layer 2 leaves layer 1's results alone")
		})
	}
}

func TestMapReduceParallelismIsBounded(t *testing.T) {
	t.Parallel()
	const chunks = 6
	for _, p := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("parallelism %d", p), func(t *testing.T) {
			t.Parallel()
			f := &fakes{summarizeDelay: time.Minute}
			largeRun(f, chunks)
			env := newTestEnv()
			f.install(env)
			var mu sync.Mutex
			inFlight, peak, started := 0, 0, 0
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name != "Summarize" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				inFlight++
				started++
				peak = max(peak, inFlight)
			})
			env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				if info.ActivityType.Name != "Summarize" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				inFlight--
			})
			run := testRun("react-two-layer", fmt.Sprintf(`{"large_result":{"parallelism":%d}}`, p))
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: run, InputKey: "k", InputSHA256: "abc"})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, chunks, started)
			require.Equal(t, min(p, chunks), peak, "chunk summaries in flight at once")
		})
	}
}

func TestMapReduceFallsBackWhenSummarizerFails(t *testing.T) {
	chunk1Chars := 50000 - 1
	t.Parallel()
	tests := []struct {
		name      string
		overrides string
		err       error
		attempts  int
		mode      string
	}{
		{name: "rejected: no retry, extractive fallback", err: rejected("bad request"), attempts: 1, mode: "extractive"},
		{name: "rejected: truncate fallback", overrides: `{"large_result":{"fallback":"truncate"}}`, err: rejected("bad request"), attempts: 1, mode: "truncate"},
		{name: "server errors: retried up to the attempts, then fallback", err: unavailable("overloaded"), attempts: 3, mode: "extractive"},
		{name: "attempts come from the preset", overrides: `{"history":{"attempts":2}}`, err: unavailable("overloaded"), attempts: 2, mode: "extractive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			largeRun(f, 3)
			var mu sync.Mutex
			calls := 0
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				if in.Step == "large/0/summarize/1" {
					mu.Lock()
					calls++
					mu.Unlock()
					return activities.SummarizeResult{}, tt.err
				}
				return activities.SummarizeResult{Key: sumKey(in.Step)}, nil
			}
			_, err := runCompaction(t, f, testRun("react-two-layer", tt.overrides))
			require.NoError(t, err)
			require.Equal(t, tt.attempts, calls)

			fb := inputsOf[activities.FallbackInput](f)
			require.Len(t, fb, 1)
			require.Equal(t, activities.FallbackInput{
				Run: bare(testRun("react-two-layer", tt.overrides)), Step: "large/0/summarize/1/fallback",
				SourceKey: "chunk/1", TargetChars: int(float64(chunk1Chars) * 0.1), Mode: tt.mode,
			}, fb[0])
			merge := inputsOf[activities.MergeInput](f)[0]
			require.Equal(t, []string{sumKey("large/0/summarize/0"), "fallback(large/0/summarize/1/fallback)", sumKey("large/0/summarize/2")}, merge.Keys)
			// The run says it went through a fallback: its commit is
			// degraded, with the reason.
			commits := inputsOf[activities.CommitInput](f)
			require.Len(t, commits, 1)
			require.Contains(t, commits[0].Degraded, "the summarizer failed: the "+tt.mode+" fallback wrote a summary instead")
		})
	}
}

func TestMapReduceSecondPass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		merged     int
		secondPass bool
	}{
		{name: "at the bar: no second pass", merged: 50000},
		{name: "over the bar: second pass", merged: 50001, secondPass: true},
		{name: "far over the bar", merged: 400000, secondPass: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			largeRun(f, 4)
			f.mergedChars = tt.merged
			_, err := runCompaction(t, f, testRun("react-two-layer", ""))
			require.NoError(t, err)

			steps := summarizeSteps(f)
			second, ok := steps["large/0/second-pass"]
			require.Equal(t, tt.secondPass, ok)
			final := "merged(large/0/merge)"
			if tt.secondPass {
				require.Equal(t, "merge", second.Prompt)
				require.Equal(t, "merged(large/0/merge)", second.SourceKey)
				require.Equal(t, int(float64(tt.merged)*0.1), second.TargetChars)
				final = sumKey("large/0/second-pass")
			}
			require.Equal(t, final, inputsOf[activities.DriftInput](f)[0].SummaryKey)
			require.Equal(t, final, inputsOf[activities.ApplyResultsInput](f)[0].Replacements[0].TextKey)
		})
	}
}

func TestGlobalPassKeepsOriginalWhenSummaryFails(t *testing.T) {
	t.Parallel()
	targets := []activities.Target{
		{Msg: 3, Block: 0, Chars: 8000, TextKey: "r/3", ContextKey: "c/3"},
		{Msg: 5, Block: 0, Chars: 9000, TextKey: "r/5", ContextKey: "c/5"},
		{Msg: 9, Block: 2, Chars: 7000, TextKey: "r/9", ContextKey: "c/9"},
	}
	tests := []struct {
		name    string
		failing map[string]bool
		want    []activities.Replacement
		note    string
	}{{
		name: "all compressed",
		want: []activities.Replacement{{Msg: 3, TextKey: sumKey("global/0")}, {Msg: 5, TextKey: sumKey("global/1")}, {Msg: 9, Block: 2, TextKey: sumKey("global/2")}},
		note: "3 of 3 results compressed",
	}, {
		name:    "one fails: its original stays",
		failing: map[string]bool{"global/1": true},
		want:    []activities.Replacement{{Msg: 3, TextKey: sumKey("global/0")}, {Msg: 9, Block: 2, TextKey: sumKey("global/2")}},
		note:    "2 of 3 results compressed",
	}, {
		name:    "all fail: nothing applied",
		failing: map[string]bool{"global/0": true, "global/1": true, "global/2": true},
		note:    "0 of 3 results compressed",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{global: activities.GlobalResult{Targets: targets, Usage: 0.9}}
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				if tt.failing[in.Step] {
					return activities.SummarizeResult{}, rejected("refused")
				}
				return activities.SummarizeResult{Key: sumKey(in.Step)}, nil
			}
			res, err := runCompaction(t, f, testRun("react-two-layer", ""))
			require.NoError(t, err)
			require.Empty(t, inputsOf[activities.FallbackInput](f), "layer 2 has no fallback: the original is the fallback")

			for _, in := range inputsOf[activities.SummarizeInput](f) {
				require.Equal(t, "result", in.Prompt)
			}
			steps := summarizeSteps(f)
			require.Equal(t, "c/5", steps["global/1"].ContextKey)
			require.Equal(t, 900, steps["global/1"].TargetChars)

			apply := inputsOf[activities.ApplyResultsInput](f)
			if tt.want == nil {
				require.Empty(t, apply)
				require.Equal(t, "work/det", inputsOf[activities.CommitInput](f)[0].WorkKey)
			} else {
				require.Len(t, apply, 1)
				require.Equal(t, "apply/global", apply[0].Step)
				require.Equal(t, tt.want, apply[0].Replacements)
				require.Equal(t, "work/apply/global", inputsOf[activities.CommitInput](f)[0].WorkKey)
			}
			saved := 0
			if tt.want != nil {
				saved = 90000 // the fake's apply step measures 0 after 90,000
			}
			require.Contains(t, res.Passes, activities.PassStat{Name: "global-results", Applied: tt.want != nil, Count: len(tt.want), TokensSaved: saved, Note: tt.note})
		})
	}
}

func TestDriftGate(t *testing.T) {
	t.Parallel()
	fail := func(score float64, missing string) activities.DriftResult {
		return activities.DriftResult{Score: score, MissingCount: 3, MissingKey: missing}
	}
	pass := activities.DriftResult{Score: 0.9, Passed: true}
	first := sumKey("history/summarize")
	repair1 := sumKey("history/repair/1")
	deterministic := "fallback(history/summarize/deterministic)"
	tests := []struct {
		name       string
		overrides  string
		drift      map[int]activities.DriftResult
		repairFail bool
		offline    bool // the summarizer is the offline one
		verdict    string
		applied    string
		repairs    int
		// replaced: the deterministic summary replaced the LLM's.
		replaced bool
		// made: the deterministic replacement of an LLM summary that
		// failed its first check was made (beside the repairs when there
		// are any), used or not.
		made bool
		// passes are the drift checks' pass numbers, in order (the
		// replacement's, repair passes + 1, runs beside the repairs).
		passes []int
		patch  *activities.PatchInput
	}{{
		name: "passes at once", drift: map[int]activities.DriftResult{0: pass},
		verdict: "passed", applied: first, passes: []int{0},
	}, {
		name: "repair passes", drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: pass},
		verdict: "repaired", applied: repair1, repairs: 1, made: true, passes: []int{0, 1, 2},
	}, {
		name: "an LLM summary failing after repair is replaced by the deterministic one", drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: fail(0.5, "missing/1")},
		verdict: "replaced", applied: deterministic, repairs: 1, replaced: true, made: true, passes: []int{0, 1, 2},
	}, {
		name: "the deterministic one misses items too: they are appended to it", drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: fail(0.5, "missing/1"), 2: fail(0.7, "missing/2")},
		verdict: "replaced+patched", applied: "patched(" + deterministic + ")", repairs: 1, replaced: true, made: true, passes: []int{0, 1, 2},
		patch: &activities.PatchInput{Step: "history/patch", SummaryKey: deterministic, MissingKey: "missing/2"},
	}, {
		name: "offline summary failing after repair: patch the better summary", offline: true, drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: fail(0.5, "missing/1")},
		verdict: "patched", applied: "patched(" + repair1 + ")", repairs: 1, passes: []int{0, 1},
		patch: &activities.PatchInput{Step: "history/patch", SummaryKey: repair1, MissingKey: "missing/1"},
	}, {
		name: "offline, repair is worse: patch the first summary", offline: true, drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: fail(0.2, "missing/1")},
		verdict: "patched", applied: "patched(" + first + ")", repairs: 1, passes: []int{0, 1},
		patch: &activities.PatchInput{Step: "history/patch", SummaryKey: first, MissingKey: "missing/0"},
	}, {
		name: "offline, repair call fails: patch the first summary", offline: true, drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0")}, repairFail: true,
		verdict: "patched", applied: "patched(" + first + ")", repairs: 1, passes: []int{0},
		patch: &activities.PatchInput{Step: "history/patch", SummaryKey: first, MissingKey: "missing/0"},
	}, {
		name: "an LLM summary whose repair call fails is replaced", drift: map[int]activities.DriftResult{0: fail(0.3, "missing/0")}, repairFail: true,
		verdict: "replaced", applied: deterministic, repairs: 1, replaced: true, made: true, passes: []int{0, 2},
	}, {
		name:    "only last errors left out: the patch appends them to the model's summary, no repair",
		drift:   map[int]activities.DriftResult{0: {Score: 0.6, MissingCount: 2, MissingKey: "missing/0", PatchOnly: true}},
		verdict: "patched", applied: "patched(" + first + ")", passes: []int{0},
		patch: &activities.PatchInput{Step: "history/patch", SummaryKey: first, MissingKey: "missing/0"},
	}, {
		name: "no repair pass: the replacement is made after the first check", overrides: `{"drift":{"repair_passes":0}}`,
		drift:   map[int]activities.DriftResult{0: fail(0.3, "missing/0")},
		verdict: "replaced", applied: deterministic, replaced: true, made: true, passes: []int{0, 1},
	}, {
		name: "second of two repair passes passes", overrides: `{"drift":{"repair_passes":2}}`,
		drift:   map[int]activities.DriftResult{0: fail(0.3, "missing/0"), 1: fail(0.4, "missing/1"), 2: pass},
		verdict: "repaired", applied: sumKey("history/repair/2"), repairs: 2, made: true, passes: []int{0, 1, 2, 3},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{drift: tt.drift}
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				if tt.repairFail && in.Prompt == "repair" {
					return activities.SummarizeResult{}, rejected("refused")
				}
				model := "gpt-4o-mini"
				if tt.offline {
					model = "extractive"
				}
				return activities.SummarizeResult{Key: sumKey(in.Step), Model: model}, nil
			}
			run := testRun("offload-compact", tt.overrides)
			res, err := runCompaction(t, f, run)
			require.NoError(t, err)
			require.Equal(t, tt.verdict, res.Drift)
			require.Equal(t, tt.applied, inputsOf[activities.ApplyHistoryInput](f)[0].SummaryKey)

			var repairs []activities.SummarizeInput
			for _, in := range inputsOf[activities.SummarizeInput](f) {
				if in.Prompt == "repair" {
					repairs = append(repairs, in)
				}
			}
			require.Len(t, repairs, tt.repairs)
			if tt.repairs > 0 {
				require.Equal(t, activities.SummarizeInput{
					Run: bare(run), Step: "history/repair/1", Prompt: "repair", SourceKey: "transcript", ContextKey: first,
					MissingKey: "missing/0", ArchiveKey: "archive/abc", TargetTokens: 8000,
				}, repairs[0], "the repair names what is missing")
			}
			checks := inputsOf[activities.DriftInput](f)
			// The replacement's check runs beside the repairs: in any
			// order with theirs.
			sort.Slice(checks, func(i, j int) bool { return checks[i].Pass < checks[j].Pass })
			var passes []int
			for _, c := range checks {
				passes = append(passes, c.Pass)
				require.Equal(t, "transcript", c.SourceKey)
			}
			require.Equal(t, tt.passes, passes)
			fallbacks := inputsOf[activities.FallbackInput](f)
			if tt.made {
				require.Equal(t, []activities.FallbackInput{{Run: bare(run), Step: "history/summarize/deterministic", SourceKey: "transcript",
					TargetChars: 8000 * 4, Mode: "extractive", Prompt: "history", ArchiveKey: "archive/abc"}}, fallbacks)
				require.Equal(t, deterministic, checks[len(checks)-1].SummaryKey, "the deterministic summary is checked")
			} else {
				require.Empty(t, fallbacks)
			}

			patches := inputsOf[activities.PatchInput](f)
			if tt.patch == nil {
				require.Empty(t, patches)
				return
			}
			require.Len(t, patches, 1)
			want := *tt.patch
			want.Run = bare(run)
			require.Equal(t, want, patches[0])
		})
	}
}

// TestDriftGateReplacesBesideTheRepair checks that the deterministic
// replacement of an LLM summary that failed its first check, and the
// replacement's own check, run while the repair's summarizer call is out,
// whether the repair then passes (the replacement is left unused) or not
// (it is used as it is, with no step after the repair's check).
func TestDriftGateReplacesBesideTheRepair(t *testing.T) {
	t.Parallel()
	fail := activities.DriftResult{Score: 0.3, MissingCount: 3, MissingKey: "missing"}
	tests := []struct {
		name    string
		drift   map[int]activities.DriftResult
		verdict string
	}{
		{name: "the repair passes", drift: map[int]activities.DriftResult{0: fail}, verdict: "repaired"},
		{name: "the repair fails", drift: map[int]activities.DriftResult{0: fail, 1: fail}, verdict: "replaced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{drift: tt.drift, summarizeDelay: time.Minute}
			env := newTestEnv()
			f.install(env)
			// Beside the repair: after the first summary's call ended and
			// before the repair's did (the second call to end).
			var mu sync.Mutex
			callsDone := 0
			var beside []string
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				mu.Lock()
				defer mu.Unlock()
				if info.ActivityType.Name == "Fallback" && callsDone == 1 {
					beside = append(beside, "Fallback")
				}
			})
			env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				mu.Lock()
				defer mu.Unlock()
				if info.ActivityType.Name == "Summarize" {
					callsDone++
				}
			})
			env.SetOnLocalActivityStartedListener(func(_ *activity.Info, _ context.Context, args []interface{}) {
				mu.Lock()
				defer mu.Unlock()
				if len(args) == 1 {
					if in, ok := args[0].(activities.DriftInput); ok && in.Pass == 2 && callsDone == 1 {
						beside = append(beside, in.Step)
					}
				}
			})
			run := testRun("offload-compact", "")
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: run, InputKey: "k", InputSHA256: "abc"})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res contract.Outcome
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, tt.verdict, res.Drift)
			require.Equal(t, []string{"Fallback", "history/drift/2"}, beside,
				"the replacement and its check ran while the repair call was out")
		})
	}
}

// appErrorTypes lists the types of the application errors in err's
// chain: the workflow wraps the activity's error with context, so the
// activity's type sits below the wrapper's.
func appErrorTypes(err error) []string {
	var types []string
	for ; err != nil; err = errors.Unwrap(err) {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app == err {
			types = append(types, app.Type())
		}
	}
	return types
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestHistorySummaryFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		preset   string
		err      error
		attempts int
		failed   bool
	}{
		{name: "offload-compact leaves the history unchanged", preset: "offload-compact", err: rejected("invalid key"), attempts: 1, failed: true},
		{name: "offload-compact after three attempts", preset: "offload-compact", err: unavailable("overloaded"), attempts: 3, failed: true},
		{name: "auto-summarize falls back to the extractive summary", preset: "auto-summarize", err: rejected("invalid key"), attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			var mu sync.Mutex
			calls := 0
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return activities.SummarizeResult{}, tt.err
			}
			res, err := runCompaction(t, f, testRun(tt.preset, ""))
			require.NoError(t, err, "a failed summary does not fail the run")
			require.Equal(t, tt.attempts, calls)
			require.Equal(t, tt.failed, res.HistoryFailed)
			commit := inputsOf[activities.CommitInput](f)[0]
			require.Equal(t, tt.failed, commit.HistoryFailed)
			if tt.failed {
				require.Empty(t, inputsOf[activities.FallbackInput](f))
				require.Empty(t, inputsOf[activities.ApplyHistoryInput](f))
				require.Empty(t, inputsOf[activities.DriftInput](f))
				require.Empty(t, commit.DeleteOffloads, "nothing was restored into a summary, so nothing is deleted")
				require.Equal(t, "work/det", commit.WorkKey)
				require.Contains(t, commit.Passes, activities.PassStat{Name: "history", Note: "summary failed: history unchanged"})
				return
			}
			fb := inputsOf[activities.FallbackInput](f)
			require.Len(t, fb, 1)
			require.Equal(t, "extractive", fb[0].Mode)
			require.Equal(t, 2000*4, fb[0].TargetChars, "the token target becomes a character target")
			require.Equal(t, "history/summarize/fallback", fb[0].Step)
			require.Equal(t, "fallback(history/summarize/fallback)", inputsOf[activities.DriftInput](f)[0].SummaryKey)
			require.Len(t, inputsOf[activities.ApplyHistoryInput](f), 1)
		})
	}
}

func TestFailureMarksRunFailed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		preset  string
		setup   func(f *fakes)
		errType string
		want    []string
		class   store.ErrorClass
		message string // the public message holds it
	}{{
		name:   "bad input at plan",
		preset: "adaptive",
		setup: func(f *fakes) {
			f.planErr = temporal.NewNonRetryableApplicationError("message 3: bad role", activities.TypeBadInput, nil)
		},
		errType: activities.TypeBadInput,
		want:    []string{"Plan", "FailRun"},
		class:   store.ErrorBadInput,
		message: "plan: message 3: bad role",
	}, {
		name:   "no preset snapshot",
		preset: "adaptive",
		setup: func(f *fakes) {
			f.editRun = func(r *contract.Run) { r.Resolved = nil }
		},
		errType: activities.TypeConfig,
		want:    []string{"FailRun"},
		class:   store.ErrorConfig,
		message: "the deployment's configuration refused the run",
	}, {
		name:   "commit refused",
		preset: "watermark",
		setup: func(f *fakes) {
			f.commitErr = temporal.NewNonRetryableApplicationError(
				`commit run: ERROR: invalid byte sequence for encoding "UTF8": 0x00 (SQLSTATE 22021)`, activities.TypeDependency, nil)
		},
		errType: activities.TypeDependency,
		want:    []string{"Plan", "Deterministic", "Commit", "FailRun"},
		class:   store.ErrorDependency,
		message: "commit: Postgres or S3 failed",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			if tt.setup != nil {
				tt.setup(f)
			}
			_, err := runCompaction(t, f, testRun(tt.preset, ""))
			require.Error(t, err)
			require.Contains(t, appErrorTypes(err), tt.errType, "error %v", err)
			require.Equal(t, tt.want, f.names())
			fails := inputsOf[activities.FailInput](f)
			require.Len(t, fails, 1)
			require.Equal(t, "run-1", fails[0].RunID)
			// The run row gets a class and a public message; the chain
			// (activity ids, worker identity, SQLSTATE) stays in the log.
			require.Equal(t, tt.class, fails[0].Class)
			require.Contains(t, fails[0].Message, tt.message)
			for _, leak := range []string{"SQLSTATE", "identity", "scheduledEventID", "activity error", "0x00"} {
				require.NotContains(t, fails[0].Message, leak)
			}
		})
	}
}

func TestStepsRunLocallyAndSummariesOnTheLLMQueue(t *testing.T) {
	t.Parallel()
	// The steps up to the commit run locally; the release of the
	// intermediates is a regular activity on the workflow's own queue
	// (scheduled after the commit's workflow task is recorded). The
	// admission slot is handed on locally after the commit.
	steps := []string{"Plan", "Deterministic", "PrepareHistory", "CheckDrift", "ApplyHistory", "Commit", "Admit"}
	tests := []struct {
		name       string
		llmQueue   string
		wantQueues map[string]bool
		wantLocal  []string
		wantRemote []string
	}{
		{name: "LLM task queue set", llmQueue: "llm-q", wantQueues: map[string]bool{"llm-q": true, "default-test-taskqueue": true},
			wantLocal: steps, wantRemote: []string{"Summarize", "ReleaseIntermediates"}},
		{name: "no LLM task queue: the workflow's own", wantQueues: map[string]bool{"default-test-taskqueue": true},
			wantLocal: steps, wantRemote: []string{"Summarize", "ReleaseIntermediates"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			env := newTestEnv()
			f.install(env)
			var mu sync.Mutex
			var local, remote []string
			queues := map[string]bool{}
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				mu.Lock()
				defer mu.Unlock()
				local = append(local, info.ActivityType.Name)
			})
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				mu.Lock()
				defer mu.Unlock()
				remote = append(remote, info.ActivityType.Name)
				queues[info.TaskQueue] = true
			})
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "k", InputSHA256: "abc",
				LLMTaskQueue: tt.llmQueue})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, tt.wantLocal, local, "local activities")
			require.Equal(t, tt.wantRemote, remote, "regular activities")
			require.Equal(t, tt.wantQueues, queues)
		})
	}
}

// The gateway resolves the preset once, at submit: every S3/Postgres
// step gets the run's snapshot, even where resolving again would now give
// another answer, and the summarizer calls get only its model, so that
// the preset stays out of their recorded inputs.
func TestStepsGetTheRunsSnapshot(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	f.editPreset = func(p *policy.Preset) {
		p.SummarizerModel = "model-of-the-plan"
		p.History.TargetTokens = 1234
	}
	in := contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/archive/abc", InputSHA256: "abc"}
	_, err := runCompactionInput(t, f, in)
	require.NoError(t, err)

	plan := rawInputsOf[activities.PlanInput](f)
	require.Len(t, plan, 1)

	var later []contract.Run
	later = append(later, plan[0].Run)
	for _, in := range rawInputsOf[activities.DeterministicInput](f) {
		later = append(later, in.Run)
	}
	for _, in := range rawInputsOf[activities.HistoryInput](f) {
		later = append(later, in.Run)
	}
	for _, in := range rawInputsOf[activities.DriftInput](f) {
		later = append(later, in.Run)
	}
	for _, in := range rawInputsOf[activities.ApplyHistoryInput](f) {
		later = append(later, in.Run)
	}
	for _, in := range rawInputsOf[activities.CommitInput](f) {
		later = append(later, in.Run)
	}
	require.Len(t, later, 6)
	for _, run := range later {
		require.NotNil(t, run.Resolved)
		require.Equal(t, "model-of-the-plan", run.Resolved.SummarizerModel)
		require.Equal(t, 1234, run.Resolved.History.TargetTokens)
	}

	sums := rawInputsOf[activities.SummarizeInput](f)
	require.Len(t, sums, 1)
	require.Nil(t, sums[0].Run.Resolved, "a summarizer call's recorded input leaves the preset out")
	require.NotNil(t, sums[0].SummarizerModel)
	require.Equal(t, "model-of-the-plan", *sums[0].SummarizerModel)
	require.Equal(t, 1234, sums[0].TargetTokens, "the workflow decides from the plan's copy too")
}

// TestIntermediatesReleasedWhenFinal: a run's intermediates are released
// once it is final, after its commit and after its failure alike.
func TestIntermediatesReleasedWhenFinal(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	_, err := runCompaction(t, f, testRun("offload-compact", ""))
	require.NoError(t, err)
	require.Equal(t, []string{"run-1"}, f.released)

	failed := &fakes{planErr: temporal.NewNonRetryableApplicationError("message 3: bad role", activities.TypeBadInput, nil)}
	_, err = runCompaction(t, failed, testRun("offload-compact", ""))
	require.Error(t, err)
	require.Equal(t, []string{"FailRun"}, failed.names()[1:])
	require.Equal(t, []string{"run-1"}, failed.released, "a failed run's intermediates go too")
}

// finalEnds are the two ways a run becomes final: committed, or failed
// (here at its plan step).
var finalEnds = []struct {
	name    string
	planErr error
}{{name: "committed"}, {name: "failed", planErr: temporal.NewNonRetryableApplicationError("no plan", activities.TypeBadInput, nil)}}

// TestOutcomeUpdateAnswersBeforeTheRelease: a waiter of the outcome
// update gets the committed outcome before the run releases its
// intermediates (the release and the delivery's start are off the
// caller's path), and a failed run's waiter gets its error.
func TestOutcomeUpdateAnswersBeforeTheRelease(t *testing.T) {
	t.Parallel()
	for _, tt := range finalEnds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{planErr: tt.planErr}
			env := newTestEnv()
			f.install(env)
			var answered []string // the activities called before the answer
			released := -1        // the releases done before the answer
			var got contract.Outcome
			var gotErr error
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(contract.OutcomeUpdate, "waiter", &testsuite.TestUpdateCallback{
					OnAccept: func() {},
					OnReject: func(err error) { t.Errorf("the update was rejected: %v", err) },
					OnComplete: func(v any, err error) {
						answered = f.names()
						f.mu.Lock()
						released = len(f.released)
						f.mu.Unlock()
						gotErr = err
						if err == nil {
							got = v.(contract.Outcome)
						}
					},
				})
			}, 0)
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/input/abc", InputSHA256: "abc"})
			require.True(t, env.IsWorkflowCompleted())
			require.NotEmpty(t, answered, "the waiter was answered")
			require.Zero(t, released, "answered before the release")
			require.Equal(t, []string{"run-1"}, f.released, "the run released its intermediates after the answer")
			if tt.planErr != nil {
				require.Error(t, gotErr)
				require.Contains(t, answered, "FailRun", "answered once the failure is recorded")
				return
			}
			require.NoError(t, gotErr)
			require.Equal(t, "Commit", answered[len(answered)-1], "answered once the commit is recorded")
			var res contract.Outcome
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, res, got, "the update answers the workflow's result")
		})
	}
}

// TestCompactionOfARunFinalAlready: when the plan step finds the run
// final (committed by an execution of its steps whose workflow task
// Temporal never recorded), the workflow ends with the recorded outcome,
// runs no other step, records no failure and starts the run's webhook
// delivery, which the lost task never started.
func TestCompactionOfARunFinalAlready(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"succeeded", "over_limit"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			final := contract.Outcome{RunID: "run-1", Status: status, TokensAfter: 900}
			f.plan = activities.PlanResult{Format: "openai", TokensBefore: 100000, LevelBefore: "critical", ContextLimit: 128000, Final: &final}
			env := newTestEnv()
			f.install(env)
			var delivered []string
			env.RegisterWorkflowWithOptions(func(_ workflow.Context, in contract.DeliveryInput) error {
				delivered = append(delivered, in.RunID)
				return nil
			}, workflow.RegisterOptions{Name: contract.DeliveryWorkflow})
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/input/abc", InputSHA256: "abc"})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res contract.Outcome
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, final, res, "the recorded outcome")
			require.Equal(t, []string{"Plan"}, f.names(), "no step runs again, no failure is recorded")
			require.Equal(t, []string{"run-1"}, delivered, "the run's webhook is told")
		})
	}
}

// TestCompactionHandsItsSlotOn: a run that became final, committed or
// failed, hands its tenant's admission slot on at once (an Admit for no
// run after its last step) and tells the session of the run it admitted.
func TestCompactionHandsItsSlotOn(t *testing.T) {
	t.Parallel()
	for _, tt := range finalEnds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{planErr: tt.planErr, admit: activities.AdmitResult{Others: []activities.AdmittedRun{{RunID: "run-9", Session: "s2"}}}}
			env := newTestEnv()
			f.install(env)
			told := admitSignals(env, "s2")
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/input/abc", InputSHA256: "abc"})
			require.True(t, env.IsWorkflowCompleted())
			steps := f.names()
			last := "Commit"
			if tt.planErr != nil {
				last = "FailRun"
			}
			require.Equal(t, last, steps[len(steps)-1])
			require.Equal(t, []string{fmt.Sprintf("t1 \"\" after %d steps", len(steps))}, f.handedOn, "one handoff, once the run is final")
			require.Equal(t, []string{"run-9"}, told.wait(t, 1), "the admitted run's session is told")
		})
	}
}

// TestCompactionClosesOnceItsAdmissionSignalsAreOut: a run that handed
// its slot on does not close before its signal to the admitted run's
// session has gone out. Temporal drops a signal whose sender closed
// first, and the admitted run then waited for the retell or its recheck
// (15 to 30 s: the ceiling bench's p99).
func TestCompactionClosesOnceItsAdmissionSignalsAreOut(t *testing.T) {
	t.Parallel()
	f := &fakes{admit: activities.AdmitResult{Others: []activities.AdmittedRun{{RunID: "run-9", Session: "s2"}}}}
	env := newTestEnv()
	f.install(env)
	var delivered atomic.Bool
	env.OnSignalExternalWorkflow(mock.Anything, contract.SessionWorkflowID("t1", "s2"), "", contract.AdmitSignal, "run-9").Return(
		func(_, _, _, _ string, _ interface{}) error {
			// Slower than the rest of the run's end.
			time.Sleep(300 * time.Millisecond)
			delivered.Store(true)
			return nil
		})
	env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/input/abc", InputSHA256: "abc"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.True(t, delivered.Load(), "the run closed before its admission signal went out")
}

// TestCompactionHandOnFailing: a handoff that keeps failing (Postgres
// down) gives up after handOnTimeout; the run still succeeds, releases
// its intermediates and ends.
func TestCompactionHandOnFailing(t *testing.T) {
	t.Parallel()
	f := &fakes{admitErr: errors.New("connect: connection refused")}
	res, err := runCompaction(t, f, testRun("offload-compact", ""))
	require.NoError(t, err)
	require.Equal(t, "succeeded", res.Status)
	require.Greater(t, len(f.handedOn), 1, "the handoff was retried")
	require.LessOrEqual(t, len(f.handedOn), 10, "for a minute, not a step's hour")
	require.Equal(t, []string{"run-1"}, f.released, "the release still came")
}
