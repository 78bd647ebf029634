package workflows

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// judgeCalls lists the steps of the judge's calls (Summarize with the
// "judge" prompt), sorted, and the summary each read, by step.
func judgeCalls(f *fakes) ([]string, map[string]string) {
	var steps []string
	read := map[string]string{}
	for step, in := range summarizeSteps(f) {
		if in.Prompt == "judge" {
			steps = append(steps, step)
			read[step] = in.ContextKey
		}
	}
	sort.Strings(steps)
	return steps, read
}

// TestJudgeReadsEachPairOnceAndEveryNewSummary guards the judge-once memo
// (gate.judge, compactionRun.judged): the LLM judge is a paid call whose
// verdict depends only on its (source, summary) pair, so a run asks it
// once per pair. Repairs that keep giving back the summary they repaired
// make three checks of one pair: one judge call, its verdict reused by
// every check. A repair that gives a new summary is a new pair: it is
// judged, and its checks never reuse the first summary's verdict.
func TestJudgeReadsEachPairOnceAndEveryNewSummary(t *testing.T) {
	t.Parallel()
	first := sumKey("history/summarize")
	drifting := func(pass int) activities.DriftResult {
		return activities.DriftResult{Score: 0.3, MissingCount: 2, MissingKey: "missing/" + string(rune('0'+pass))}
	}
	tests := []struct {
		name string
		// same: the repairs give back the summary they repaired.
		same   bool
		judged []string
		// verdicts are the judge keys the checks of passes 0, 1, 2 got.
		verdicts []string
	}{
		{name: "repairs give back the same summary", same: true,
			judged:   []string{"history/judge/0"},
			verdicts: []string{sumKey("history/judge/0"), sumKey("history/judge/0"), sumKey("history/judge/0")}},
		{name: "each repair gives a new summary",
			judged:   []string{"history/judge/0", "history/judge/1", "history/judge/2"},
			verdicts: []string{sumKey("history/judge/0"), sumKey("history/judge/1"), sumKey("history/judge/2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{drift: map[int]activities.DriftResult{0: drifting(0), 1: drifting(1), 2: {Score: 1, Passed: true}}}
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				if tt.same && in.Prompt == "repair" {
					return activities.SummarizeResult{Key: in.ContextKey, Model: "gpt-4o-mini"}, nil
				}
				return activities.SummarizeResult{Key: sumKey(in.Step), Model: "gpt-4o-mini"}, nil
			}
			run := testRun("offload-compact", `{"drift":{"repair_passes":2}}`)
			_, err := runCompactionInput(t, f, contract.CompactionInput{Run: run, InputKey: "t1/archive/abc", InputSHA256: "abc", Judge: true})
			require.NoError(t, err)
			judged, read := judgeCalls(f)
			require.Equal(t, tt.judged, judged)
			if tt.same {
				require.Equal(t, first, read["history/judge/0"])
			}
			var verdicts []string
			for _, d := range inputsOf[activities.DriftInput](f) {
				if d.Step == "history/drift/0" || d.Step == "history/drift/1" || d.Step == "history/drift/2" {
					verdicts = append(verdicts, d.JudgeKey)
				}
			}
			require.Equal(t, tt.verdicts, verdicts)
		})
	}
}

// TestJudgeNeverReadsADeterministicSummary guards the other half of the
// judge-once rule: a deterministic summary (the extractive fallback, or
// the replacement of a summary that drifted) only copies from its source,
// so the deterministic checks decide it alone and the judge is not paid
// to read it.
func TestJudgeNeverReadsADeterministicSummary(t *testing.T) {
	t.Parallel()
	drifting := activities.DriftResult{Score: 0.3, MissingCount: 2, MissingKey: "missing"}
	deterministic := "fallback(history/summarize/deterministic)"
	tests := []struct {
		name    string
		run     contract.Run
		setup   func(f *fakes)
		judged  []string
		offline string // the deterministic summary that was checked
	}{{
		name: "the replacement of a drifting summary", run: testRun("offload-compact", ""),
		setup:  func(f *fakes) { f.drift = map[int]activities.DriftResult{0: drifting, 1: drifting} },
		judged: []string{"history/judge/0", "history/judge/1"}, offline: deterministic,
	}, {
		name: "the extractive fallback of a failed summary", run: testRun("auto-summarize", ""),
		setup: func(f *fakes) {
			f.summarize = func(in activities.SummarizeInput) (activities.SummarizeResult, error) {
				if in.Step == "history/summarize" {
					return activities.SummarizeResult{}, rejected("refused")
				}
				return activities.SummarizeResult{Key: sumKey(in.Step), Model: "gpt-4o-mini"}, nil
			}
		},
		offline: "fallback(history/summarize/fallback)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakes{}
			tt.setup(f)
			_, err := runCompactionInput(t, f, contract.CompactionInput{Run: tt.run, InputKey: "t1/archive/abc", InputSHA256: "abc", Judge: true})
			require.NoError(t, err)
			judged, read := judgeCalls(f)
			require.Equal(t, tt.judged, judged)
			for step, key := range read {
				require.NotEqual(t, tt.offline, key, "%s read the deterministic summary", step)
			}
			var checked bool
			for _, d := range inputsOf[activities.DriftInput](f) {
				if d.SummaryKey == tt.offline {
					checked = true
					require.True(t, d.Offline)
					require.Empty(t, d.JudgeKey, "the deterministic checks decide it alone")
				}
			}
			require.True(t, checked, "the deterministic summary was checked")
		})
	}
}
