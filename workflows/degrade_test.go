package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// TestEveryFallbackMarksTheRunDegraded guards the run's degraded reasons
// (CommitInput.Degraded, which the outcome, the status API and the web UI
// show): each way a run falls back to something less than it was asked
// for says so, in its own plain words, at commit. A run that fell back
// silently reads as a clean success, and the tenant never learns that
// its conversation holds an extractive summary, a result left as it was,
// or a summary the judge never read.
func TestEveryFallbackMarksTheRunDegraded(t *testing.T) {
	t.Parallel()
	failing := func(steps ...string) func(activities.SummarizeInput) (activities.SummarizeResult, error) {
		fail := map[string]bool{}
		for _, s := range steps {
			fail[s] = true
		}
		return func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
			if fail[in.Step] || fail[in.Prompt] {
				return activities.SummarizeResult{}, rejected("refused")
			}
			return activities.SummarizeResult{Key: sumKey(in.Step), Model: "gpt-4o-mini"}, nil
		}
	}
	drifting := activities.DriftResult{Score: 0.3, MissingCount: 3, MissingKey: "missing"}
	tests := []struct {
		name  string
		run   contract.Run
		judge bool
		setup func(f *fakes)
		// failFallback fails the no-LLM fallback of this step too.
		failFallback string
		want         []string
	}{{
		name: "nothing fell back", run: testRun("offload-compact", ""), judge: true,
		setup: func(f *fakes) {},
	}, {
		name: "the history summary fell back to the extractive one", run: testRun("auto-summarize", ""),
		setup: func(f *fakes) { f.summarize = failing("history/summarize") },
		want:  []string{"the summarizer failed: the extractive fallback wrote a summary instead"},
	}, {
		name: "the history summary failed: history unchanged", run: testRun("offload-compact", ""),
		setup: func(f *fakes) { f.summarize = failing("history/summarize") },
		want:  []string{"the summarizer failed: the history was left unchanged"},
	}, {
		name: "a result of the global pass kept its original text", run: testRun("react-two-layer", ""),
		setup: func(f *fakes) {
			f.global = activities.GlobalResult{Usage: 0.9, Targets: []activities.Target{
				{Msg: 3, Chars: 8000, TextKey: "r/3", ContextKey: "c/3"},
				{Msg: 5, Chars: 9000, TextKey: "r/5", ContextKey: "c/5"},
			}}
			f.summarize = failing("global/1")
		},
		want: []string{"the summarizer failed: some results kept their original text"},
	}, {
		name: "the judge was unreachable", run: testRun("offload-compact", ""), judge: true,
		setup: func(f *fakes) { f.summarize = failing("judge") },
		want:  []string{"the LLM judge was unreachable: the deterministic checks decided"},
	}, {
		name: "a drifting summary was replaced by the deterministic one", run: testRun("offload-compact", ""),
		setup: func(f *fakes) { f.drift = map[int]activities.DriftResult{0: drifting, 1: drifting} },
		want:  []string{"a summary failed its drift checks after repair: the deterministic summary replaced it"},
	}, {
		name: "the handoff's summary failed, its fallback too", run: testRun("react-two-layer", ""),
		setup: func(f *fakes) {
			f.plan = activities.PlanResult{Format: "openai", TokensBefore: 120000, LevelBefore: "CRITICAL", ContextLimit: 128000}
			f.det = activities.DeterministicResult{WorkKey: "work/det", Tokens: 50000, Done: true}
			f.summarize = failing("handoff/summarize")
		},
		failFallback: "handoff/summarize/fallback",
		want: []string{"the summarizer failed: the extractive fallback wrote a summary instead",
			"the summarizer failed: the handoff's summary is the offline one"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			tt.setup(f)
			env := newTestEnv()
			if tt.failFallback != "" {
				// Registered before the fakes: the first mock that
				// matches answers.
				var a *activities.Activities
				env.OnActivity(a.Fallback, mock.Anything, mock.Anything).Return(
					func(_ context.Context, in activities.FallbackInput) (activities.SummarizeResult, error) {
						f.record("Fallback", in)
						if in.Step == tt.failFallback {
							return activities.SummarizeResult{}, temporal.NewNonRetryableApplicationError("transcript unreadable", activities.TypeBadInput, nil)
						}
						return activities.SummarizeResult{Key: "fallback(" + in.Step + ")", Chars: in.TargetChars, Model: in.Mode, Fallback: in.Mode}, nil
					})
			}
			f.install(env)
			env.ExecuteWorkflow(Compaction, contract.CompactionInput{Run: tt.run, InputKey: "t1/archive/abc", InputSHA256: "abc", Judge: tt.judge})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError(), "a fallback does not fail the run")
			commits := inputsOf[activities.CommitInput](f)
			require.Len(t, commits, 1)
			require.Equal(t, tt.want, commits[0].Degraded)
		})
	}
}
