package workflows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/plan"
)

// TestBudgetLadder checks the order of the ladder's steps and that each
// runs only while the conversation is still over the goal.
func TestBudgetLadder(t *testing.T) {
	t.Parallel()
	over := func(key string, allowHistory bool) activities.FitResult {
		return activities.FitResult{WorkKey: key, Tokens: 200000, AboveGoal: true, HistoryAllowed: allowHistory,
			Pass: activities.PassStat{Name: "budget/x", Applied: true, Count: 1}}
	}
	under := func(key string) activities.FitResult {
		return activities.FitResult{WorkKey: key, Tokens: 1000, Pass: activities.PassStat{Name: "budget/y", Applied: true, Count: 1}}
	}
	tests := []struct {
		name       string
		preset     string
		detTokens  int
		fit        map[string]activities.FitResult
		wantSteps  []string
		wantWork   string
		wantLadder bool
	}{
		{name: "under the goal: no ladder", preset: "three-tier", detTokens: 50000,
			wantSteps: nil, wantWork: "work/det"},
		{name: "offload is enough", preset: "three-tier", detTokens: 500000,
			fit:       map[string]activities.FitResult{"offload": under("work/fit-offload")},
			wantSteps: []string{"FitBudget/offload"}, wantWork: "work/fit-offload", wantLadder: true},
		{name: "offload, history with a smaller tail, truncate", preset: "three-tier", detTokens: 500000,
			fit: map[string]activities.FitResult{"offload": over("work/fit-offload", true),
				"truncate": under("work/fit-truncate")},
			wantSteps: []string{"FitBudget/offload", "PrepareHistory", "ApplyHistory", "FitBudget/truncate"},
			wantWork:  "work/fit-truncate", wantLadder: true},
		{name: "a ReAct trajectory never drops a turn", preset: "react-two-layer", detTokens: 500000,
			fit: map[string]activities.FitResult{"offload": over("work/fit-offload", false),
				"truncate": under("work/fit-truncate")},
			wantSteps: []string{"FitBudget/offload", "FitBudget/truncate"},
			wantWork:  "work/fit-truncate", wantLadder: true},
		{name: "opted out by an explicit setting", preset: "watermark", detTokens: 500000,
			wantSteps: nil, wantWork: "work/det"},
		{name: "fits its goal but would end RED: relieve by offloading", preset: "auto-summarize", detTokens: 100000,
			fit:       map[string]activities.FitResult{"relieve": under("work/fit-relieve")},
			wantSteps: []string{"FitBudget/relieve"}, wantWork: "work/fit-relieve"},
		{name: "the ladder ends CRITICAL: relieve after it", preset: "react-two-layer", detTokens: 500000,
			fit: map[string]activities.FitResult{"offload": over("work/fit-offload", false),
				"truncate": {WorkKey: "work/fit-truncate", Tokens: 112000, Pass: activities.PassStat{Name: "budget/truncate", Applied: true}},
				"relieve":  under("work/fit-relieve")},
			wantSteps: []string{"FitBudget/offload", "FitBudget/truncate", "FitBudget/relieve"},
			wantWork:  "work/fit-relieve", wantLadder: true},
		{name: "still over after truncation: the small results go last", preset: "react-two-layer", detTokens: 500000,
			fit: map[string]activities.FitResult{"offload": over("work/fit-offload", false), "truncate": over("work/fit-truncate", false),
				"offload-small": under("work/fit-small")},
			wantSteps: []string{"FitBudget/offload", "FitBudget/truncate", "FitBudget/offload-small"},
			wantWork:  "work/fit-small", wantLadder: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{fit: tt.fit}
			f.plan = activities.PlanResult{Format: "openai", TokensBefore: 600000, LevelBefore: "CRITICAL", ContextLimit: 128000}
			f.det = activities.DeterministicResult{WorkKey: "work/det", Tokens: tt.detTokens, Done: true}
			run := testRun(tt.preset, "")
			if tt.name == "opted out by an explicit setting" {
				run = testRun(tt.preset, `{"budget":{"enabled":false}}`)
			}
			_, err := runCompactionInput(t, f, contract.CompactionInput{Run: run, InputKey: "t1/archive/abc", InputSHA256: "abc"})
			require.NoError(t, err)

			var ladder []string
			for _, n := range f.names() {
				switch n {
				case "FitBudget/offload", "FitBudget/truncate", "FitBudget/offload-small", "FitBudget/relieve", "PrepareHistory", "ApplyHistory":
					ladder = append(ladder, n)
				}
			}
			require.Equal(t, tt.wantSteps, ladder)
			commits := inputsOf[activities.CommitInput](f)
			require.Len(t, commits, 1)
			require.Equal(t, tt.wantWork, commits[0].WorkKey, "commit takes the ladder's last conversation")
			require.Equal(t, tt.wantLadder, commits[0].Ladder)

			for _, h := range inputsOf[activities.HistoryInput](f) {
				require.True(t, h.Ladder, "the ladder's history step is forced with the ladder's tail")
				require.Equal(t, plan.LadderHistory+"/prepare", h.Step)
			}
			for _, s := range inputsOf[activities.SummarizeInput](f) {
				if strings.HasPrefix(s.Step, "handoff/") {
					continue // the run started CRITICAL: its handoff's summary
				}
				require.Equal(t, plan.LadderHistory+"/summarize", s.Step)
				require.LessOrEqual(t, s.TargetTokens, 128000/4, "the ladder's summary leaves room under the goal")
			}
		})
	}
}

// TestJudgeAsksTheSummarizerForTheVerdict: with Judge set, each drift
// check of a history summary gets the LLM judge's verdict first; without
// it, no judge call is made.
func TestJudgeAsksTheSummarizerForTheVerdict(t *testing.T) {
	t.Parallel()
	for _, judge := range []bool{true, false} {
		f := &fakes{}
		_, err := runCompactionInput(t, f, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/archive/abc", InputSHA256: "abc", Judge: judge})
		require.NoError(t, err)
		steps := summarizeSteps(f)
		in, called := steps["history/judge/0"]
		require.Equal(t, judge, called)
		drift := inputsOf[activities.DriftInput](f)
		require.NotEmpty(t, drift)
		if judge {
			require.Equal(t, "judge", in.Prompt)
			require.Equal(t, "transcript", in.SourceKey, "the judge reads the transcript")
			require.Equal(t, sumKey("history/summarize"), in.ContextKey, "and the summary")
			require.Equal(t, sumKey("history/judge/0"), drift[0].JudgeKey)
		} else {
			require.Empty(t, drift[0].JudgeKey)
		}
	}
}

// TestHandoffSummary: a run that starts or ends CRITICAL (or over its
// limit, or a checkpoint) gives commit its handoff's summary: the run's
// own history summary when it made one; else one made by the summarizer
// with the session prompt and drift-checked, beside the passes (of the
// input) for a preset without history that starts CRITICAL, after them
// (of what they reached) otherwise. A run that neither starts nor ends
// CRITICAL, and a ReAct trajectory, make none.
func TestHandoffSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		preset      string
		format      string
		levelBefore string
		trigger     string
		history     bool   // the preset's history summary runs
		prep        string // the conversation a summary is made of; "" none
		key         string // what commit gets
		note        string
	}{
		{name: "started CRITICAL, no history: beside the passes", preset: "react-two-layer", format: "openai", levelBefore: "CRITICAL",
			prep: "t1/archive/abc", key: sumKey("handoff/summarize"), note: "summary by m, drift passed"},
		{name: "started CRITICAL, history skipped: after the passes", preset: "three-tier", format: "openai", levelBefore: "CRITICAL",
			prep: "work/det", key: sumKey("handoff/summarize"), note: "summary by m, drift passed"},
		{name: "started CRITICAL, history made: reused", preset: "three-tier", format: "openai", levelBefore: "CRITICAL", history: true,
			key: sumKey("history/summarize"), note: "the run's history summary"},
		{name: "a checkpoint", preset: "three-tier", format: "anthropic", levelBefore: "ORANGE", trigger: "checkpoint",
			prep: "work/det", key: sumKey("handoff/summarize"), note: "summary by m, drift passed"},
		{name: "neither", preset: "three-tier", format: "openai", levelBefore: "RED"},
		{name: "a ReAct trajectory", preset: "watermark", format: "react", levelBefore: "CRITICAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			f.plan = activities.PlanResult{Format: tt.format, TokensBefore: 120000, LevelBefore: tt.levelBefore, ContextLimit: 128000}
			f.det = activities.DeterministicResult{WorkKey: "work/det", Tokens: 50000, Done: !tt.history}
			run := testRun(tt.preset, "")
			if tt.trigger != "" {
				run.Trigger = tt.trigger
			}
			_, err := runCompactionInput(t, f, contract.CompactionInput{Run: run, InputKey: "t1/archive/abc", InputSHA256: "abc"})
			require.NoError(t, err)
			commit := inputsOf[activities.CommitInput](f)[0]
			prep := inputsOf[activities.HandoffInput](f)
			if tt.prep == "" {
				require.Empty(t, prep)
			} else {
				require.Equal(t, []activities.HandoffInput{{Run: bare(run), WorkKey: tt.prep}}, prep)
				sum := summarizeSteps(f)["handoff/summarize"]
				require.Equal(t, "session", sum.Prompt)
				require.Equal(t, "handoff-transcript", sum.SourceKey)
				require.Equal(t, plan.HandoffSummaryChars, sum.TargetChars)
				var checked bool
				for _, d := range inputsOf[activities.DriftInput](f) {
					checked = checked || (d.Step == "handoff/drift/0" && d.SourceKey == "handoff-transcript")
				}
				require.True(t, checked, "the handoff's summary is drift-checked")
			}
			if tt.key == "" {
				for _, p := range commit.Passes {
					require.NotEqual(t, "handoff/summary", p.Name)
				}
				return
			}
			require.Equal(t, tt.key, commit.HandoffSummaryKey)
			require.Contains(t, commit.Passes, activities.PassStat{Name: "handoff/summary", Applied: true, Count: 1, Note: tt.note})
		})
	}
}

// TestJudgeReadsAPairOnce: a repair that gives back the summary it
// repaired makes the next check read the same (source, summary) pair:
// the judge's verdict of it is reused, never asked for twice.
func TestJudgeReadsAPairOnce(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	first := sumKey("history/summarize")
	f.drift = map[int]activities.DriftResult{0: {Score: 0.3, MissingCount: 2, MissingKey: "missing/0"}}
	f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
		if in.Step == "history/repair/1" {
			return activities.SummarizeResult{Key: first}, nil // nothing to add: the same summary back
		}
		return activities.SummarizeResult{Key: sumKey(in.Step)}, nil
	}
	_, err := runCompactionInput(t, f, contract.CompactionInput{Run: testRun("offload-compact", ""), InputKey: "t1/archive/abc", InputSHA256: "abc", Judge: true})
	require.NoError(t, err)
	var judged []string
	for step, in := range summarizeSteps(f) {
		if in.Prompt == "judge" && in.ContextKey == first {
			judged = append(judged, step)
		}
	}
	require.Equal(t, []string{"history/judge/0"}, judged, "one judgement of the pair")
	var checks []activities.DriftInput
	for _, d := range inputsOf[activities.DriftInput](f) {
		if d.SummaryKey == first {
			checks = append(checks, d)
		}
	}
	require.Len(t, checks, 2, "the pair is checked twice")
	require.Equal(t, checks[0].JudgeKey, checks[1].JudgeKey, "with the one verdict")
}
