package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
)

// runPasses runs the deterministic and LLM passes, updating commit with
// the final working key and what was done.
func (r *compactionRun) runPasses(ctx workflow.Context) error {
	var a *activities.Activities
	var det activities.DeterministicResult
	if err := r.step(ctx, a.Deterministic, activities.DeterministicInput{Run: r.run, WorkKey: r.commit.WorkKey}).Get(ctx, &det); err != nil {
		return fmt.Errorf("deterministic passes: %w", err)
	}
	r.commit.WorkKey, r.commit.Watermark = det.WorkKey, det.Watermark
	r.commit.Passes = append(r.commit.Passes, det.Passes...)
	r.res.TokensAfter = det.Tokens
	freed := r.plan.TokensBefore - det.Tokens
	if det.Done {
		// A manual compaction compacts (offload-compact's /compact): its
		// history pass runs even when the deterministic passes reached
		// the target. Runs recorded before this rule keep returning here.
		if r.run.Trigger == "manual" && r.preset.History.Enabled &&
			r.changed(ctx, "manual-compacts") {
			return r.historyPass(ctx, r.preset, freed, false)
		}
		return nil
	}
	layer1, err := r.largeResults(ctx, det.LargeResults)
	if err != nil {
		return err
	}
	// Layer 2 of the ReAct two-layer design: every remaining large result,
	// with its turn as context.
	if r.preset.GlobalResults.Enabled {
		if err := r.globalPass(ctx, layer1); err != nil {
			return err
		}
	}
	if r.preset.History.Enabled {
		return r.historyPass(ctx, r.preset, freed, false)
	}
	return nil
}

// largeResults is layer 1 of the ReAct two-layer design: a map-reduce
// of each huge tool result, applied to the working conversation. It
// returns the replacements it applied.
func (r *compactionRun) largeResults(ctx workflow.Context, targets []activities.Target) ([]activities.Replacement, error) {
	var a *activities.Activities
	var layer1 []activities.Replacement
	for i, t := range targets {
		rep, verdict, err := r.mapReduce(ctx, fmt.Sprintf("large/%d", i), t)
		if err != nil {
			return nil, fmt.Errorf("map-reduce result %d/%d: %w", t.Msg, t.Block, err)
		}
		layer1 = append(layer1, rep)
		r.res.Drift = verdict
	}
	if len(layer1) == 0 {
		return nil, nil
	}
	var w activities.WorkResult
	if err := r.step(ctx, a.ApplyResults, activities.ApplyResultsInput{Run: r.run, Step: "apply/large", WorkKey: r.commit.WorkKey, Replacements: layer1}).Get(ctx, &w); err != nil {
		return nil, fmt.Errorf("apply large results: %w", err)
	}
	r.commit.WorkKey = w.WorkKey
	r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: "map-reduce", Applied: true, Count: len(layer1),
		TokensSaved: r.res.TokensAfter - w.Tokens})
	r.res.TokensAfter = w.Tokens
	return layer1, nil
}

// mapReduce summarizes one huge result: chunks in parallel (bounded), merge,
// a second pass when the merge is still too big, a fallback when the LLM
// keeps failing, and a drift check of the final text against the source.
func (r *compactionRun) mapReduce(ctx workflow.Context, step string, t activities.Target) (activities.Replacement, string, error) {
	var a *activities.Activities
	lr := r.preset.LargeResult
	var chunks activities.ChunkResult
	if err := r.step(ctx, a.Chunk, activities.ChunkInput{Run: r.run, Step: step + "/chunk", TextKey: t.TextKey}).Get(ctx, &chunks); err != nil {
		return activities.Replacement{}, "", fmt.Errorf("chunk: %w", err)
	}
	summaries := make([]string, len(chunks.Keys))
	errs := make([]error, len(chunks.Keys))
	parallel(ctx, len(chunks.Keys), lr.Parallelism, func(gctx workflow.Context, i int) {
		target := int(float64(chunks.Chars[i]) * lr.Ratio)
		out, err := r.summarizeOrFallback(gctx, activities.SummarizeInput{
			Run: r.run, Step: fmt.Sprintf("%s/summarize/%d", step, i), Prompt: "chunk",
			SourceKey: chunks.Keys[i], ContextKey: t.ContextKey, TargetChars: target,
		}, r.preset.History.Attempts, lr.Fallback)
		summaries[i], errs[i] = out.Key, err
	})
	for i, err := range errs {
		if err != nil {
			return activities.Replacement{}, "", fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	var merged activities.MergeResult
	if err := r.step(ctx, a.Merge, activities.MergeInput{Run: r.run, Step: step + "/merge", Keys: summaries}).Get(ctx, &merged); err != nil {
		return activities.Replacement{}, "", fmt.Errorf("merge: %w", err)
	}
	final := merged.Key
	if merged.Chars > lr.SecondPassAboveChars {
		out, err := r.summarizeOrFallback(ctx, activities.SummarizeInput{
			Run: r.run, Step: step + "/second-pass", Prompt: "merge", SourceKey: merged.Key,
			TargetChars: int(float64(merged.Chars) * lr.Ratio),
		}, r.preset.History.Attempts, lr.Fallback)
		if err != nil {
			return activities.Replacement{}, "", fmt.Errorf("second pass: %w", err)
		}
		final = out.Key
	}
	verdict := ""
	if r.preset.Drift.Enabled {
		key, v, err := r.driftGate(ctx, r.preset, step, t.TextKey, final, "", nil)
		if err != nil {
			return activities.Replacement{}, "", err
		}
		final, verdict = key, v
	}
	return activities.Replacement{Msg: t.Msg, Block: t.Block, TextKey: final}, verdict, nil
}

// globalPass is layer 2 of the ReAct two-layer design: once usage passes
// the trigger, every result above the minimum size is compressed with its
// thought and action as context; a failed turn keeps its original result.
func (r *compactionRun) globalPass(ctx workflow.Context, exclude []activities.Replacement) error {
	var a *activities.Activities
	var g activities.GlobalResult
	if err := r.step(ctx, a.PlanGlobal, activities.GlobalInput{Run: r.run, WorkKey: r.commit.WorkKey, Exclude: exclude}).Get(ctx, &g); err != nil {
		return fmt.Errorf("plan global compression: %w", err)
	}
	if len(g.Targets) == 0 {
		return nil
	}
	reps := make([]*activities.Replacement, len(g.Targets))
	parallel(ctx, len(g.Targets), r.preset.GlobalResults.Parallelism, func(gctx workflow.Context, i int) {
		t := g.Targets[i]
		out, err := r.summarizeOrFallback(gctx, activities.SummarizeInput{
			Run: r.run, Step: fmt.Sprintf("global/%d", i), Prompt: "result", SourceKey: t.TextKey,
			ContextKey: t.ContextKey, TargetChars: int(float64(t.Chars) * r.preset.GlobalResults.Ratio),
		}, r.preset.History.Attempts, "")
		if err != nil {
			workflow.GetLogger(gctx).Warn("layer 2: keeping original result", "run", r.run.ID, "msg", t.Msg, "error", err)
			r.degrade(summarizerFailed(err) + ": some results kept their original text")
			return
		}
		reps[i] = &activities.Replacement{Msg: t.Msg, Block: t.Block, TextKey: out.Key}
	})
	var done []activities.Replacement
	for _, rep := range reps {
		if rep != nil {
			done = append(done, *rep)
		}
	}
	stat := activities.PassStat{Name: "global-results", Applied: len(done) > 0, Count: len(done),
		Note: fmt.Sprintf("%d of %d results compressed", len(done), len(g.Targets))}
	if len(done) == 0 {
		r.commit.Passes = append(r.commit.Passes, stat)
		return nil
	}
	var w activities.WorkResult
	if err := r.step(ctx, a.ApplyResults, activities.ApplyResultsInput{Run: r.run, Step: "apply/global", WorkKey: r.commit.WorkKey, Replacements: done}).Get(ctx, &w); err != nil {
		return fmt.Errorf("apply global compression: %w", err)
	}
	stat.TokensSaved = r.res.TokensAfter - w.Tokens
	r.commit.Passes = append(r.commit.Passes, stat)
	r.commit.WorkKey, r.res.TokensAfter = w.WorkKey, w.Tokens
	return nil
}
