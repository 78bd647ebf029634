package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	planpkg "github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// passesAndBudget runs the preset's passes, then what the budget asks:
// the budget ladder while the output is over the ladder's goal, then the
// relief of a run that fits but would end RED or above.
func (r *compactionRun) passesAndBudget(ctx workflow.Context) error {
	if err := r.runPasses(ctx); err != nil {
		return err
	}
	// res.TokensAfter holds the last size the passes measured; the
	// ladder runs only above its goal.
	budget := planpkg.Budget{Limit: r.plan.ContextLimit}
	goal := planpkg.LadderGoal(r.preset, budget)
	if r.preset.Budget.Enabled && r.res.TokensAfter > goal {
		if err := r.budgetLadder(ctx); err != nil {
			return err
		}
	}
	// A run that fits but would end RED or above offloads what it still
	// can without touching the recent turns' structure.
	if planpkg.NeedsRelief(r.preset, budget, r.res.TokensAfter) {
		if _, err := r.budgetStep(ctx, activities.FitRelieve, true); err != nil {
			return err
		}
	}
	return nil
}

// budgetStep runs one stage of the budget (FitBudget) on the working
// conversation and records it as a pass: always with record, else only
// when it applied or found the run hopeless.
func (r *compactionRun) budgetStep(ctx workflow.Context, stage string, record bool) (activities.FitResult, error) {
	var a *activities.Activities
	var fit activities.FitResult
	err := r.step(ctx, a.FitBudget, activities.FitInput{Run: r.run, WorkKey: r.commit.WorkKey, Stage: stage, ArchiveKey: r.archive.Key}).Get(ctx, &fit)
	if err != nil {
		return fit, fmt.Errorf("budget %s: %w", stage, err)
	}
	r.commit.WorkKey, r.res.TokensAfter = fit.WorkKey, fit.Tokens
	if record || fit.Pass.Applied || fit.Hopeless {
		r.commit.Passes = append(r.commit.Passes, fit.Pass)
	}
	return fit, nil
}

// budgetLadder closes a run whose output is still over the ladder's goal
// (a share of the model's limit) after the preset's own passes. It climbs
// one ladder, each step only while still over the goal, each recorded as
// a pass: offload the remaining large results wherever they are → a
// history summary that keeps the largest tail that fits (not for a ReAct
// trajectory, which never drops a turn) → cut the largest results to head
// and tail, naming the archive → offload the small results left. Whatever
// is still over the limit after that, commit says so: the run ends
// over_limit with the reason.
func (r *compactionRun) budgetLadder(ctx workflow.Context) error {
	r.commit.Ladder = true
	fit, err := r.budgetStep(ctx, activities.FitOffload, false)
	if err != nil || !fit.AboveGoal || fit.Hopeless {
		return err
	}
	// A preset whose summary just failed and that asks for the history
	// unchanged on failure (offload-compact's success false) keeps it so: the
	// ladder does not summarize behind its back.
	keepHistory := r.commit.HistoryFailed && r.preset.History.OnFailure == "unchanged"
	if fit.HistoryAllowed && !keepHistory {
		ladder := planpkg.LadderHistoryPreset(r.preset, planpkg.Budget{Limit: r.plan.ContextLimit})
		if err := r.historyPass(ctx, ladder, 0, true); err != nil {
			return err
		}
	}
	if fit, err = r.budgetStep(ctx, activities.FitTruncate, false); err != nil || !fit.AboveGoal || fit.Hopeless {
		return err
	}
	// Still over: the small results left (a ReAct trajectory never drops
	// a turn), each for a reference.
	_, err = r.budgetStep(ctx, activities.FitOffloadSmall, false)
	return err
}

// historyPass compacts everything but the last messages into a structured
// summary, drift-checked.
//
// With ladder set it is the budget ladder's history step: forced, with the
// ladder's preset (plan.LadderHistoryPreset), its steps named "budget/…".
// Without it, its steps keep the names recorded histories hold.
func (r *compactionRun) historyPass(ctx workflow.Context, preset policy.Preset, freed int, ladder bool) error {
	var a *activities.Activities
	name, prepareStep := "history", ""
	if ladder {
		name, prepareStep = planpkg.LadderHistory, planpkg.LadderHistory+"/prepare"
	}
	var hp activities.HistoryPlan
	hin := activities.HistoryInput{Run: r.run, WorkKey: r.commit.WorkKey, TokensFreed: freed, Ladder: ladder, Step: prepareStep, Pending: activities.LogDigests(r.commit.Log)}
	if err := r.step(ctx, a.PrepareHistory, hin).Get(ctx, &hp); err != nil {
		return fmt.Errorf("prepare history: %w", err)
	}
	// The commit reads the same recorded blocks: handed on, not read
	// again.
	if hp.LogRead {
		r.commit.LogRecorded, r.commit.LogRead = hp.LogRecorded, true
	}
	if hp.Skip {
		r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: name, Note: hp.Reason})
		return nil
	}
	if hp.TargetTokens > 0 {
		// A session log's block aims at its own, smaller target.
		preset.History.TargetTokens = hp.TargetTokens
	}
	key, ok, err := r.historySummary(ctx, preset, name, hp)
	if err != nil || !ok {
		return err
	}
	var w activities.WorkResult
	if err := r.step(ctx, a.ApplyHistory, activities.ApplyHistoryInput{Run: r.run, Step: name + "/apply", WorkKey: r.commit.WorkKey, Split: hp.Split,
		SummaryKey: key, ArchiveKey: r.archive.Key, Ladder: ladder, Log: hp.Log, ReflectionKey: hp.ReflectKey}).Get(ctx, &w); err != nil {
		return fmt.Errorf("apply history summary: %w", err)
	}
	r.historyApplied(preset, name, hp, w, key)
	return nil
}

// historySummary makes the history's summary of hp's transcript and
// drift-checks it: its key, or ok false when the summarizer failed and
// the history stays unchanged (recorded as such).
func (r *compactionRun) historySummary(ctx workflow.Context, preset policy.Preset, name string, hp activities.HistoryPlan) (key string, ok bool, err error) {
	fallback := ""
	if preset.History.OnFailure == "extractive" {
		fallback = "extractive"
	}
	sum, err := r.summarizeOrFallback(ctx, activities.SummarizeInput{
		Run: r.run, Step: name + "/summarize", Prompt: preset.History.Prompt, SourceKey: hp.TranscriptKey,
		ArchiveKey: r.archive.Key, TargetTokens: preset.History.TargetTokens,
	}, preset.History.Attempts, fallback)
	if err != nil {
		workflow.GetLogger(ctx).Warn("history summary failed; history unchanged", "run", r.run.ID, "error", err)
		r.degrade(summarizerFailed(err) + ": the history was left unchanged")
		r.commit.HistoryFailed = true
		r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: name, Note: "summary failed: history unchanged"})
		return "", false, nil
	}
	r.commit.Model, r.commit.PromptVersion = sum.Model, sum.PromptVersion
	key = sum.Key
	if preset.Drift.Enabled {
		// An LLM summary that still fails its checks after repair never
		// reaches the agent: the deterministic summary replaces it.
		deterministic := r.replacement(name, sum, hp.TranscriptKey, preset.History.TargetTokens*4, preset.History.Prompt)
		key, r.res.Drift, err = r.driftGate(ctx, preset, name, hp.TranscriptKey, key, r.archive.Key, deterministic)
		if err != nil {
			return "", false, err
		}
	}
	return key, true, nil
}

// historyApplied records a history summary applied (w): the working
// conversation, the log's new block, the reflection when the log was
// condensed, the pass, and the offloads the summary restored.
func (r *compactionRun) historyApplied(preset policy.Preset, name string, hp activities.HistoryPlan, w activities.WorkResult, key string) {
	r.commit.WorkKey, r.res.TokensAfter, r.commit.Preserved = w.WorkKey, w.Tokens, hp.Kept
	r.commit.Log = append(r.commit.Log, w.Log...)
	if hp.ReflectKey != "" {
		// The log outgrew its budget: its blocks were condensed into one
		// (plan.Reflection), which changes the prefix the agent cached.
		r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: name + "/reflect", Applied: true, Count: len(hp.Log),
			Note: fmt.Sprintf("Reflected %d session log blocks (~%d tokens) into 1", len(hp.Log), hp.LogTokens)})
	}
	// The last history summary is also what a handoff of this run
	// summarizes (commit uses it only when it makes one).
	r.commit.HandoffSummaryKey = key
	note := fmt.Sprintf("Summarized %d messages → 1 summary (saved ~%d tokens)", hp.Summarized, hp.Tokens-w.Tokens)
	if hp.Note != "" {
		note += "; " + hp.Note
	}
	r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: name, Applied: true, Count: hp.Summarized,
		TokensSaved: hp.Tokens - w.Tokens, Note: note})
	if preset.History.DeleteOffloads {
		r.commit.DeleteOffloads = append(r.commit.DeleteOffloads, hp.Restored...)
	}
}
