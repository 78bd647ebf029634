package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// judgeTokens bounds a judge's answer.
const judgeTokens = 800

// replacement is the deterministic summary that replaces sum, an LLM
// summary of the transcript at sourceKey, when it fails its drift checks
// after repair (see driftGate); nil when sum is already deterministic.
func (r *compactionRun) replacement(step string, sum activities.SummarizeResult, sourceKey string, targetChars int, prompt string) *activities.FallbackInput {
	if sum.Offline() {
		return nil
	}
	return &activities.FallbackInput{Run: r.run, Step: step + "/summarize/deterministic", SourceKey: sourceKey,
		TargetChars: targetChars, Mode: "extractive", Prompt: prompt, ArchiveKey: r.archive.Key}
}

// gate is one summary's drift gate: what each of its checks needs.
type gate struct {
	r                           *compactionRun
	preset                      policy.Preset
	step, sourceKey, archiveKey string
	// judgeOnce: the judge reads a (source, summary) pair once per run,
	// and never a deterministic summary (runs since that version).
	judgeOnce bool
}

// driftGate checks a summary against its source; below the bar it runs the
// repair passes naming what is missing. A summary that still fails is
// replaced by the deterministic one when deterministic is given (an LLM
// summary: it may have invented what it says, and the extractive summary
// only copies), checked again; what is still missing then is appended
// (the least aggressive result that keeps it). It returns the summary's
// key and the verdict.
func (r *compactionRun) driftGate(ctx workflow.Context, preset policy.Preset, step, sourceKey, summaryKey, archiveKey string,
	deterministic *activities.FallbackInput) (string, string, error) {
	g := gate{r: r, preset: preset, step: step, sourceKey: sourceKey, archiveKey: archiveKey,
		judgeOnce: r.changed(ctx, "judge-once")}
	// A summary without a deterministic replacement is itself
	// deterministic (see replacement): it only copies from its source.
	d, err := g.check(ctx, 0, summaryKey, deterministic == nil)
	if err != nil || d.Passed {
		return summaryKey, "passed", err
	}
	if d.PatchOnly {
		// Only some of the last errors are left out: the patch appends
		// their lines as they are, and the summary stays the model's.
		return g.patch(ctx, summaryKey, d, "patched")
	}
	// The deterministic replacement does not depend on the repairs: it is
	// made and checked beside the first repair's summarizer call, so that
	// a summary that still fails after its repairs is replaced at once
	// rather than after two more steps. A repair that passes leaves it
	// unused (its object goes with the run's intermediates).
	var replacement workflow.Future
	if deterministic != nil && preset.Drift.RepairPasses > 0 &&
		r.changed(ctx, "replacement-beside-repair") {
		replacement = g.startReplacement(ctx, *deterministic)
		// Waited for on every way out, used or not: the run's
		// intermediates are released after its commit or its failure,
		// and the replacement must not write its object after that.
		defer func() {
			if err := replacement.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("deterministic replacement beside the repair failed", "run", r.run.ID, "error", err)
			}
		}()
	}
	summaryKey, d, passed, err := g.repair(ctx, summaryKey, d)
	if err != nil {
		return "", "", err
	}
	if passed {
		return summaryKey, "repaired", nil
	}
	return g.lastResort(ctx, summaryKey, d, deterministic, replacement)
}

// repair runs the preset's repair passes on the summary at summaryKey,
// whose check was d. It returns the best summary and its check, and
// whether it passed; a repair call that fails ends the repairs.
func (g gate) repair(ctx workflow.Context, summaryKey string, d activities.DriftResult) (string, activities.DriftResult, bool, error) {
	for pass := 1; pass <= g.preset.Drift.RepairPasses; pass++ {
		repaired, rerr := g.r.summarizeOrFallback(ctx, activities.SummarizeInput{
			Run: g.r.run, Step: fmt.Sprintf("%s/repair/%d", g.step, pass), Prompt: "repair", SourceKey: g.sourceKey,
			ContextKey: summaryKey, MissingKey: d.MissingKey, ArchiveKey: g.archiveKey, TargetTokens: g.preset.History.TargetTokens,
		}, g.preset.History.Attempts, "")
		if rerr != nil {
			workflow.GetLogger(ctx).Warn("repair pass failed", "run", g.r.run.ID, "error", rerr)
			break
		}
		nd, err := g.check(ctx, pass, repaired.Key, repaired.Offline())
		if err != nil {
			return "", d, false, err
		}
		if nd.Passed {
			return repaired.Key, nd, true, nil
		}
		if nd.Score >= d.Score {
			summaryKey, d = repaired.Key, nd
		}
	}
	return summaryKey, d, false, nil
}

// replacementMade is a deterministic replacement summary and its drift
// check.
type replacementMade struct {
	Key   string
	Check activities.DriftResult
}

// makeReplacement makes the deterministic replacement as a local step
// and checks it.
func (g gate) makeReplacement(ctx workflow.Context, deterministic activities.FallbackInput) (replacementMade, error) {
	var a *activities.Activities
	return g.checkReplacement(ctx, g.r.step(ctx, a.Fallback, deterministic))
}

// checkReplacement checks the deterministic replacement that made (its
// Fallback step) gives.
func (g gate) checkReplacement(ctx workflow.Context, made workflow.Future) (replacementMade, error) {
	var fb activities.SummarizeResult
	if err := made.Get(ctx, &fb); err != nil {
		return replacementMade{}, fmt.Errorf("deterministic summary: %w", err)
	}
	d, err := g.check(ctx, g.preset.Drift.RepairPasses+1, fb.Key, true)
	if err != nil {
		return replacementMade{}, err
	}
	return replacementMade{Key: fb.Key, Check: d}, nil
}

// startReplacement makes and checks the deterministic replacement in a
// coroutine, beside what the workflow does next; the future gets a
// replacementMade.
//
// The replacement is a regular activity here, not a local one: a
// workflow task that runs local activities sends its commands only once
// they are done, so as a local activity it would run before the repair's
// summarizer call is even scheduled. As a regular activity it is
// scheduled with the call, and its check runs in the workflow task its
// result starts, while the call is out.
func (g gate) startReplacement(ctx workflow.Context, deterministic activities.FallbackInput) workflow.Future {
	var a *activities.Activities
	made := g.r.recording(workflow.ExecuteActivity(ctx, a.Fallback, deterministic))
	future, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		r, err := g.checkReplacement(ctx, made)
		settable.Set(r, err)
	})
	return future
}

// check runs the drift check of pass on the summary at key. For a history
// summary (the only drift gate with an archive) with the LLM judge on, the
// judge's verdict comes first; if its call fails the deterministic checks
// decide. A deterministic summary (offline) only copies from its source:
// the deterministic checks decide it alone.
func (g gate) check(ctx workflow.Context, pass int, key string, offline bool) (activities.DriftResult, error) {
	var a *activities.Activities
	var d activities.DriftResult
	verdictKey := ""
	if g.r.in.Judge && g.archiveKey != "" && !(g.judgeOnce && offline) {
		verdictKey = g.judge(ctx, pass, key)
	}
	err := g.r.step(ctx, a.CheckDrift, activities.DriftInput{Run: g.r.run, Step: fmt.Sprintf("%s/drift/%d", g.step, pass), Pass: pass,
		SourceKey: g.sourceKey, SummaryKey: key, JudgeKey: verdictKey, Offline: offline}).Get(ctx, &d)
	if err != nil {
		return d, fmt.Errorf("drift check: %w", err)
	}
	return d, nil
}

// judge is the LLM judge's verdict key on the summary at key ("" when
// its call failed: the deterministic checks decide), asked once per
// (source, summary) pair in a run.
func (g gate) judge(ctx workflow.Context, pass int, key string) string {
	pair := g.sourceKey + "\x00" + key
	if v, ok := g.r.judged[pair]; ok && g.judgeOnce {
		return v
	}
	v, err := g.r.summarizeOrFallback(ctx, activities.SummarizeInput{
		Run: g.r.run, Step: fmt.Sprintf("%s/judge/%d", g.step, pass), Prompt: "judge", SourceKey: g.sourceKey,
		ContextKey: key, TargetTokens: judgeTokens,
	}, g.preset.History.Attempts, "")
	if err != nil {
		g.r.degrade("the LLM judge was unreachable: the deterministic checks decided")
		return ""
	}
	g.r.judged[pair] = v.Key
	return v.Key
}

// lastResort ends the gate of a summary that failed its repairs: the
// deterministic replacement when there is one (replacement, when it was started
// beside the repairs), checked again, and then what is still missing
// appended.
func (g gate) lastResort(ctx workflow.Context, summaryKey string, d activities.DriftResult,
	deterministic *activities.FallbackInput, replacement workflow.Future) (string, string, error) {
	verdict := "patched"
	if deterministic != nil {
		g.r.degrade("a summary failed its drift checks after repair: the deterministic summary replaced it")
		var made replacementMade
		var err error
		if replacement != nil {
			err = replacement.Get(ctx, &made)
		} else {
			made, err = g.makeReplacement(ctx, *deterministic)
		}
		if err != nil {
			return "", "", err
		}
		if made.Check.Passed {
			return made.Key, "replaced", nil
		}
		summaryKey, d, verdict = made.Key, made.Check, "replaced+patched"
	}
	return g.patch(ctx, summaryKey, d, verdict)
}

// patch appends what the check d of the summary at summaryKey still
// misses to it (the Patch step).
func (g gate) patch(ctx workflow.Context, summaryKey string, d activities.DriftResult, verdict string) (string, string, error) {
	var a *activities.Activities
	var patched activities.SummarizeResult
	if err := g.r.step(ctx, a.Patch, activities.PatchInput{Run: g.r.run, Step: g.step + "/patch", SummaryKey: summaryKey, MissingKey: d.MissingKey}).Get(ctx, &patched); err != nil {
		return "", "", fmt.Errorf("patch summary: %w", err)
	}
	return patched.Key, verdict, nil
}
