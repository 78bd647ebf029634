// Package workflows holds the deterministic Temporal workflow code: the
// per-run Compaction workflow and the per-session Session workflow that
// serializes runs. No I/O, clocks, goroutines or map ranging here; every
// effect is an activity in package activities.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/compress"
	planpkg "github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// llmQueueKey keeps the run's LLM task queue in the workflow context, for
// the summarizer calls deep in the passes.
type llmQueueKey struct{}

// judgeKey keeps CompactionInput.Judge in the workflow context.
type judgeKey struct{}

// judgedKey keeps the run's judged verdicts (see judged).
type judgedKey struct{}

// degradedKey keeps the run's degradations (see degradations).
type degradedKey struct{}

// degradations are the fallbacks a run went through, in the order its
// coroutines met them (deterministic: replay meets them in the same
// order). They are plain words: an error's text may name the operator's
// hosts, and a tenant reads these.
type degradations struct{ reasons []string }

// degrade records that the run at ctx fell back, once per reason.
func degrade(ctx workflow.Context, reason string) {
	d, _ := ctx.Value(degradedKey{}).(*degradations)
	if d == nil {
		return
	}
	for _, r := range d.reasons {
		if r == reason {
			return
		}
	}
	d.reasons = append(d.reasons, reason)
}

// summarizerFailed opens a degraded reason of the summarizer's: "the
// summarizer failed", with why its call failed when its error says
// ("the summarizer failed (refused)"), a word, never the error's text.
func summarizerFailed(err error) string {
	if cause := activities.Cause(err); cause != "" {
		return "the summarizer failed (" + cause + ")"
	}
	return "the summarizer failed"
}

// judged remembers the verdict key of each (source, summary) pair the
// LLM judge read in this run: keys are content-addressed, so the same
// pair is the same prompt, and it is never sent twice (a repair that
// gives back the summary it repaired, a check run again after a last
// resort). Only looked up by key, never ranged: replay sees the same.
type judged map[string]string

// judgeTokens bounds a judge's answer.
const judgeTokens = 800

// llmOptions are for summarizer calls: a heartbeat catches a stuck call
// early, and the attempts are bounded so that a dead LLM ends in the
// fallback instead of waiting forever. The offload-compact design asks for
// 3 attempts with a growing delay; a 429's Retry-After overrides the delay
// (NextRetryDelay).
func llmOptions(attempts int) workflow.ActivityOptions {
	if attempts < 1 {
		attempts = 3
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        int32(attempts),
			NonRetryableErrorTypes: []string{activities.TypeBadInput, activities.TypeConfig, activities.TypeLLMRejected},
		},
	}
}

// Compaction runs one compaction: plan → archive → deterministic passes →
// LLM passes → drift check → commit. A failure marks the run failed.
func Compaction(ctx workflow.Context, in contract.CompactionInput) (contract.Outcome, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	ctx = workflow.WithValue(ctx, llmQueueKey{}, in.LLMTaskQueue)
	ctx = workflow.WithValue(ctx, judgeKey{}, in.Judge)
	ctx = workflow.WithValue(ctx, judgedKey{}, judged{})
	degraded := &degradations{}
	ctx = workflow.WithValue(ctx, degradedKey{}, degraded)
	ctx, steps := withStepLog(ctx)
	c := &runStages{in: in, run: in.Run, res: contract.Outcome{RunID: in.Run.ID}, degraded: degraded}
	ans := &answer{}
	if err := workflow.SetUpdateHandler(ctx, contract.OutcomeUpdate, ans.wait); err != nil {
		return c.res, fmt.Errorf("set the outcome update handler: %w", err)
	}
	// A waiter's update completes once the answer is set; the workflow
	// does not close under it.
	defer func() { _ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }) }()
	res, err := c.execute(ctx)
	if err != nil {
		var a *activities.Activities
		// A disconnected context still records the failure when the run
		// was cancelled.
		fctx, _ := workflow.NewDisconnectedContext(ctx)
		// The run row gets the public description; the whole error is
		// in this log line (and Temporal's history).
		class, msg := activities.Describe(err)
		workflow.GetLogger(ctx).Warn("run failed", "run", in.Run.ID, "class", string(class), "error", err)
		fail := activities.FailInput{RunID: in.Run.ID, Class: class, Message: msg, Cause: activities.Cause(err), Steps: steps.all()}
		var failed activities.FailResult
		ferr := runStep(fctx, a.FailRun, fail).Get(fctx, &failed)
		if ferr != nil {
			workflow.GetLogger(ctx).Error("record run failure", "run", in.Run.ID, "error", ferr)
		}
		recordOutcome(fctx, in, "failed", res)
		ans.set(contract.Outcome{RunID: in.Run.ID}, err)
		handOnSlot(fctx, in.Run)
		releaseIntermediates(fctx, in.Run)
		if failed.Notify {
			startDelivery(fctx, in)
		}
		return contract.Outcome{RunID: in.Run.ID}, err
	}
	outcome := "succeeded"
	if res.OverLimit {
		outcome = "over_limit"
	}
	recordOutcome(ctx, in, outcome, res)
	ans.set(res, nil)
	handOnSlot(ctx, in.Run)
	releaseIntermediates(ctx, in.Run)
	if c.notify {
		startDelivery(ctx, in)
	}
	return res, nil
}

// answer is a run's outcome for the waiters of contract.OutcomeUpdate,
// set once the run's final state is recorded.
type answer struct {
	done bool
	res  contract.Outcome
	err  error
}

func (a *answer) set(res contract.Outcome, err error) {
	a.done, a.res, a.err = true, res, err
}

// wait is the update's handler: it returns the outcome once set. A
// waiter that arrives after it is set is answered at once.
func (a *answer) wait(ctx workflow.Context) (contract.Outcome, error) {
	if err := workflow.Await(ctx, func() bool { return a.done }); err != nil {
		return contract.Outcome{}, err
	}
	return a.res, a.err
}

// runStages is the stages of one Compaction run and the state they
// share: the run's input, the preset snapshot it works with, what the
// plan step found, and the commit its steps build. Each method is a stage
// (execute runs them in order); each reads and moves on this state (the
// working key, the passes, the figures), so none passes it along.
type runStages struct {
	in      contract.CompactionInput
	run     contract.Run
	preset  policy.Preset
	plan    activities.PlanResult
	archive activities.ArchiveResult
	// commit is what the commit step will record; its WorkKey is the
	// working conversation as the stages leave it.
	commit activities.CommitInput
	// res is the outcome so far: the input's figures and the last size
	// a stage measured.
	res contract.Outcome
	// notify is set when the run's tenant wants its final state told
	// (webhooks), as the commit step answered.
	notify bool
	// degraded gathers the fallbacks the run went through.
	degraded *degradations
}

// execute runs the stages: plan, the passes and the ladder, the handoff,
// commit. It sets notify from the commit.
func (c *runStages) execute(ctx workflow.Context) (contract.Outcome, error) {
	var a *activities.Activities
	logger := workflow.GetLogger(ctx)

	// The gateway resolved the preset once, at submit: every step works
	// with that snapshot and none resolves it again.
	if c.run.Resolved == nil {
		return c.res, temporal.NewNonRetryableApplicationError("the run carries no resolved preset", activities.TypeConfig, nil)
	}
	c.preset = *c.run.Resolved
	planIn := activities.PlanInput{Run: c.run, InputKey: c.in.InputKey, InputSHA256: c.in.InputSHA256}
	if err := runStep(ctx, a.Plan, planIn).Get(ctx, &c.plan); err != nil {
		return c.res, fmt.Errorf("plan: %w", err)
	}
	c.res.Format, c.res.TokensBefore, c.res.LevelBefore = c.plan.Format, c.plan.TokensBefore, c.plan.LevelBefore
	if c.plan.Final != nil && workflow.GetVersion(ctx, "plan-final", workflow.DefaultVersion, 1) == 1 {
		// Committed by an execution of these steps whose
		// workflow task was lost: the run ends as recorded, its webhook
		// told (the lost task's delivery never started).
		logger.Warn("run already final when planned; ending with its recorded outcome", "run", c.run.ID, "status", c.plan.Final.Status)
		c.notify = true
		return *c.plan.Final, nil
	}

	// The plan step archived the original, and verified its checksum,
	// before anything is replaced.
	if c.plan.Archive == nil {
		return c.res, temporal.NewNonRetryableApplicationError("plan: no archive of the original", activities.TypeConfig, nil)
	}
	c.archive = *c.plan.Archive
	c.res.ArchiveKey = c.archive.Key

	c.commit = activities.CommitInput{Run: c.run, WorkKey: c.in.InputKey, ArchiveKey: c.archive.Key}
	// A run that starts CRITICAL hands off whatever its passes reach.
	// Without a history summary of its own to reuse, its handoff's
	// summary (of the input) is made beside the passes, not after them.
	var early workflow.Future
	if c.plan.LevelBefore == string(compress.LevelCritical) && !c.preset.History.Enabled && handsOff(c.plan) {
		early = startHandoffSummary(ctx, c.run, c.preset, c.archive, c.in.InputKey)
	}
	if !c.plan.Skip {
		if err := c.passesAndBudget(ctx); err != nil {
			return c.res, err
		}
	} else {
		logger.Info("nothing to do", "run", c.run.ID, "reason", c.plan.Reason)
	}
	if err := c.handoffSummary(ctx, early); err != nil {
		return c.res, err
	}

	var out activities.CommitResult
	c.commit.TokensBefore, c.commit.LevelBefore, c.commit.Drift = c.plan.TokensBefore, c.plan.LevelBefore, c.res.Drift
	c.commit.Steps = stepLogOf(ctx).all()
	c.commit.Degraded = append([]string(nil), c.degraded.reasons...)
	if err := runStep(ctx, a.Commit, c.commit).Get(ctx, &out); err != nil {
		return c.res, fmt.Errorf("commit: %w", err)
	}
	// The commit step's outcome is the run's row as it now reads: the
	// workflow's result and every later answer are the same.
	c.notify = out.Notify
	return out.Outcome, nil
}

// passesAndBudget runs the preset's passes, then what the budget asks:
// the budget ladder while the output is over the ladder's goal, then the
// relief of a run that fits but would end RED or above.
func (c *runStages) passesAndBudget(ctx workflow.Context) error {
	var a *activities.Activities
	if err := c.runPasses(ctx); err != nil {
		return err
	}
	// res.TokensAfter holds the last size the passes measured; the
	// ladder runs only above its goal.
	budget := planpkg.Budget{Limit: c.plan.ContextLimit}
	goal := planpkg.LadderGoal(c.preset, budget)
	if c.preset.Budget.Enabled && c.res.TokensAfter > goal {
		if err := c.budgetLadder(ctx); err != nil {
			return err
		}
	}
	// A run that fits but would end RED or above offloads what it still
	// can without touching the recent turns' structure.
	if planpkg.NeedsRelief(c.preset, budget, c.res.TokensAfter) {
		var fit activities.FitResult
		err := runStep(ctx, a.FitBudget, activities.FitInput{Run: c.run, WorkKey: c.commit.WorkKey, Stage: activities.FitRelieve, ArchiveKey: c.archive.Key}).Get(ctx, &fit)
		if err != nil {
			return fmt.Errorf("budget %s: %w", activities.FitRelieve, err)
		}
		c.commit.WorkKey, c.res.TokensAfter = fit.WorkKey, fit.Tokens
		c.commit.Passes = append(c.commit.Passes, fit.Pass)
	}
	return nil
}

// budgetLadder closes a run whose output is still over the ladder's goal
// (a share of the model's limit) after the preset's own passes. It climbs
// one ladder, each step only while still over the goal, each recorded as
// a pass: offload the remaining large results wherever they are → a
// history summary that keeps the largest tail that fits (not for a ReAct
// trajectory, which never drops a turn) → cut the largest results to head
// and tail, naming the archive → offload the small results left. Whatever is still over the limit after that, commit says
// so: the run ends over_limit with the reason.
func (c *runStages) budgetLadder(ctx workflow.Context) error {
	var a *activities.Activities
	c.commit.Ladder = true
	step := func(stage string) (activities.FitResult, error) {
		var fit activities.FitResult
		err := runStep(ctx, a.FitBudget, activities.FitInput{Run: c.run, WorkKey: c.commit.WorkKey, Stage: stage, ArchiveKey: c.archive.Key}).Get(ctx, &fit)
		if err != nil {
			return fit, fmt.Errorf("budget %s: %w", stage, err)
		}
		c.commit.WorkKey, c.res.TokensAfter = fit.WorkKey, fit.Tokens
		if fit.Pass.Applied || fit.Hopeless {
			c.commit.Passes = append(c.commit.Passes, fit.Pass)
		}
		return fit, nil
	}
	fit, err := step(activities.FitOffload)
	if err != nil || !fit.AboveGoal || fit.Hopeless {
		return err
	}
	// A preset whose summary just failed and that asks for the history
	// unchanged on failure (offload-compact's success false) keeps it so: the
	// ladder does not summarize behind its back.
	keepHistory := c.commit.HistoryFailed && c.preset.History.OnFailure == "unchanged"
	if fit.HistoryAllowed && !keepHistory {
		ladder := planpkg.LadderHistoryPreset(c.preset, planpkg.Budget{Limit: c.plan.ContextLimit})
		if err := c.historyPass(ctx, ladder, 0, true); err != nil {
			return err
		}
	}
	if fit, err = step(activities.FitTruncate); err != nil || !fit.AboveGoal || fit.Hopeless {
		return err
	}
	// Still over: the small results left (a ReAct trajectory never drops
	// a turn), each for a reference.
	_, err = step(activities.FitOffloadSmall)
	return err
}

// handsOff reports whether a run's conversation can have a handoff made
// by the summarizer: not a ReAct trajectory (no handoff).
func handsOff(pr activities.PlanResult) bool {
	return pr.Format != "react" && pr.ContextLimit > 0
}

// handoffMade is a handoff's summary and the pass that records it.
type handoffMade struct {
	Key  string
	Pass activities.PassStat
}

// handoffSummary gives commit the summary of the three-tier
// fresh-session handoff when the run makes one: it started or ends CRITICAL, ends over
// its limit, or is a checkpoint. A run that started CRITICAL had it made
// beside its passes (early); any other makes it now. Commit builds the
// handoff around it; when the summarizer fails, commit makes the
// structured offline summary itself.
func (c *runStages) handoffSummary(ctx workflow.Context, early workflow.Future) error {
	if early == nil {
		after := compress.LevelFor(float64(c.res.TokensAfter) / float64(max(c.plan.ContextLimit, 1)))
		made := c.plan.LevelBefore == string(compress.LevelCritical) || after == compress.LevelCritical ||
			c.res.TokensAfter > c.plan.ContextLimit || c.run.Trigger == "checkpoint"
		if !made {
			return nil
		}
		if c.commit.HandoffSummaryKey != "" {
			// The run's own history summary, drift-checked, already
			// stands for what the handoff summarizes: no second one.
			c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: "handoff/summary", Applied: true, Count: 1,
				Note: "the run's history summary"})
			return nil
		}
		if !handsOff(c.plan) {
			return nil
		}
		early = startHandoffSummary(ctx, c.run, c.preset, c.archive, c.commit.WorkKey)
	}
	var h handoffMade
	if err := early.Get(ctx, &h); err != nil {
		return err
	}
	if h.Key != "" {
		c.commit.HandoffSummaryKey = h.Key
		c.commit.Passes = append(c.commit.Passes, h.Pass)
	}
	return nil
}

// startHandoffSummary makes the summary of the handoff of the
// conversation at workKey in a coroutine: its transcript (everything
// between the protected head and the last turn), summarized with the
// session prompt and drift-checked like a history summary (an LLM summary
// that fails is replaced by the deterministic one). The future gets a
// handoffMade, empty when there is nothing to hand off or the summarizer
// failed.
func startHandoffSummary(ctx workflow.Context, run contract.Run, preset policy.Preset, archive activities.ArchiveResult, workKey string) workflow.Future {
	future, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		h, err := makeHandoffSummary(ctx, run, preset, archive, workKey)
		settable.Set(h, err)
	})
	return future
}

func makeHandoffSummary(ctx workflow.Context, run contract.Run, preset policy.Preset, archive activities.ArchiveResult, workKey string) (handoffMade, error) {
	var a *activities.Activities
	var hp activities.HandoffPrep
	if err := runStep(ctx, a.PrepareHandoff, activities.HandoffInput{Run: run, WorkKey: workKey}).Get(ctx, &hp); err != nil {
		return handoffMade{}, fmt.Errorf("prepare handoff: %w", err)
	}
	if hp.Skip {
		return handoffMade{}, nil
	}
	const step = "handoff"
	sum, err := summarizeOrFallback(ctx, activities.SummarizeInput{
		Run: run, Step: step + "/summarize", Prompt: "session", SourceKey: hp.TranscriptKey,
		ArchiveKey: archive.Key, TargetChars: planpkg.HandoffSummaryChars,
	}, preset.History.Attempts, "extractive")
	if err != nil {
		workflow.GetLogger(ctx).Warn("handoff summary failed; commit makes the offline one", "run", run.ID, "error", err)
		degrade(ctx, summarizerFailed(err)+": the handoff's summary is the offline one")
		return handoffMade{}, nil
	}
	key, verdict := sum.Key, ""
	if preset.Drift.Enabled {
		deterministic := replacement(run, step, sum, hp.TranscriptKey, planpkg.HandoffSummaryChars, "session", archive.Key)
		// Repairs aim at the handoff's own length, not the history's.
		gate := preset
		gate.History.TargetTokens = planpkg.HandoffSummaryChars / 4
		if key, verdict, err = driftGate(ctx, run, gate, step, hp.TranscriptKey, key, archive.Key, deterministic); err != nil {
			return handoffMade{}, err
		}
	}
	note := "summary by " + sum.Model
	if verdict != "" {
		note += ", drift " + verdict
	}
	return handoffMade{Key: key, Pass: activities.PassStat{Name: step + "/summary", Applied: true, Count: 1, Note: note}}, nil
}

// runPasses runs the deterministic and LLM passes, updating commit with
// the final working key and what was done.
func (c *runStages) runPasses(ctx workflow.Context) error {
	var a *activities.Activities

	var det activities.DeterministicResult
	if err := runStep(ctx, a.Deterministic, activities.DeterministicInput{Run: c.run, WorkKey: c.commit.WorkKey}).Get(ctx, &det); err != nil {
		return fmt.Errorf("deterministic passes: %w", err)
	}
	c.commit.WorkKey, c.commit.Watermark = det.WorkKey, det.Watermark
	c.commit.Passes = append(c.commit.Passes, det.Passes...)
	c.res.TokensAfter = det.Tokens
	freed := c.plan.TokensBefore - det.Tokens
	if det.Done {
		// A manual compaction compacts (offload-compact's /compact): its
		// history pass runs even when the deterministic passes reached
		// the target. Runs recorded before this rule keep returning here.
		if c.run.Trigger == "manual" && c.preset.History.Enabled &&
			workflow.GetVersion(ctx, "manual-compacts", workflow.DefaultVersion, 1) >= 1 {
			return c.historyPass(ctx, c.preset, freed, false)
		}
		return nil
	}

	// Layer 1 of the ReAct two-layer design: map-reduce of each huge tool result.
	var layer1 []activities.Replacement
	for i, t := range det.LargeResults {
		rep, verdict, err := c.mapReduce(ctx, fmt.Sprintf("large/%d", i), t)
		if err != nil {
			return fmt.Errorf("map-reduce result %d/%d: %w", t.Msg, t.Block, err)
		}
		layer1 = append(layer1, rep)
		c.res.Drift = verdict
	}
	if len(layer1) > 0 {
		var w activities.WorkResult
		if err := runStep(ctx, a.ApplyResults, activities.ApplyResultsInput{Run: c.run, Step: "apply/large", WorkKey: c.commit.WorkKey, Replacements: layer1}).Get(ctx, &w); err != nil {
			return fmt.Errorf("apply large results: %w", err)
		}
		c.commit.WorkKey = w.WorkKey
		c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: "map-reduce", Applied: true, Count: len(layer1),
			TokensSaved: c.res.TokensAfter - w.Tokens})
		c.res.TokensAfter = w.Tokens
	}

	// Layer 2 of the ReAct two-layer design: every remaining large result,
	// with its turn as context.
	if c.preset.GlobalResults.Enabled {
		if err := c.globalPass(ctx, layer1); err != nil {
			return err
		}
	}

	if c.preset.History.Enabled {
		return c.historyPass(ctx, c.preset, freed, false)
	}
	return nil
}

// mapReduce summarizes one huge result: chunks in parallel (bounded), merge,
// a second pass when the merge is still too big, a fallback when the LLM
// keeps failing, and a drift check of the final text against the source.
func (c *runStages) mapReduce(ctx workflow.Context, step string, t activities.Target) (activities.Replacement, string, error) {
	var a *activities.Activities
	lr := c.preset.LargeResult
	var chunks activities.ChunkResult
	if err := runStep(ctx, a.Chunk, activities.ChunkInput{Run: c.run, Step: step + "/chunk", TextKey: t.TextKey}).Get(ctx, &chunks); err != nil {
		return activities.Replacement{}, "", fmt.Errorf("chunk: %w", err)
	}
	summaries := make([]string, len(chunks.Keys))
	errs := make([]error, len(chunks.Keys))
	parallel(ctx, len(chunks.Keys), lr.Parallelism, func(gctx workflow.Context, i int) {
		target := int(float64(chunks.Chars[i]) * lr.Ratio)
		out, err := summarizeOrFallback(gctx, activities.SummarizeInput{
			Run: c.run, Step: fmt.Sprintf("%s/summarize/%d", step, i), Prompt: "chunk",
			SourceKey: chunks.Keys[i], ContextKey: t.ContextKey, TargetChars: target,
		}, c.preset.History.Attempts, lr.Fallback)
		summaries[i], errs[i] = out.Key, err
	})
	for i, err := range errs {
		if err != nil {
			return activities.Replacement{}, "", fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	var merged activities.MergeResult
	if err := runStep(ctx, a.Merge, activities.MergeInput{Run: c.run, Step: step + "/merge", Keys: summaries}).Get(ctx, &merged); err != nil {
		return activities.Replacement{}, "", fmt.Errorf("merge: %w", err)
	}
	final := merged.Key
	if merged.Chars > lr.SecondPassAboveChars {
		out, err := summarizeOrFallback(ctx, activities.SummarizeInput{
			Run: c.run, Step: step + "/second-pass", Prompt: "merge", SourceKey: merged.Key,
			TargetChars: int(float64(merged.Chars) * lr.Ratio),
		}, c.preset.History.Attempts, lr.Fallback)
		if err != nil {
			return activities.Replacement{}, "", fmt.Errorf("second pass: %w", err)
		}
		final = out.Key
	}
	verdict := ""
	if c.preset.Drift.Enabled {
		key, v, err := driftGate(ctx, c.run, c.preset, step, t.TextKey, final, "", nil)
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
func (c *runStages) globalPass(ctx workflow.Context, exclude []activities.Replacement) error {
	var a *activities.Activities
	var g activities.GlobalResult
	if err := runStep(ctx, a.PlanGlobal, activities.GlobalInput{Run: c.run, WorkKey: c.commit.WorkKey, Exclude: exclude}).Get(ctx, &g); err != nil {
		return fmt.Errorf("plan global compression: %w", err)
	}
	if len(g.Targets) == 0 {
		return nil
	}
	reps := make([]*activities.Replacement, len(g.Targets))
	parallel(ctx, len(g.Targets), c.preset.GlobalResults.Parallelism, func(gctx workflow.Context, i int) {
		t := g.Targets[i]
		out, err := summarizeOrFallback(gctx, activities.SummarizeInput{
			Run: c.run, Step: fmt.Sprintf("global/%d", i), Prompt: "result", SourceKey: t.TextKey,
			ContextKey: t.ContextKey, TargetChars: int(float64(t.Chars) * c.preset.GlobalResults.Ratio),
		}, c.preset.History.Attempts, "")
		if err != nil {
			workflow.GetLogger(gctx).Warn("layer 2: keeping original result", "run", c.run.ID, "msg", t.Msg, "error", err)
			degrade(gctx, summarizerFailed(err)+": some results kept their original text")
			return
		}
		reps[i] = &activities.Replacement{Msg: t.Msg, Block: t.Block, TextKey: out.Key}
	})
	var done []activities.Replacement
	for _, r := range reps {
		if r != nil {
			done = append(done, *r)
		}
	}
	stat := activities.PassStat{Name: "global-results", Applied: len(done) > 0, Count: len(done),
		Note: fmt.Sprintf("%d of %d results compressed", len(done), len(g.Targets))}
	if len(done) == 0 {
		c.commit.Passes = append(c.commit.Passes, stat)
		return nil
	}
	var w activities.WorkResult
	if err := runStep(ctx, a.ApplyResults, activities.ApplyResultsInput{Run: c.run, Step: "apply/global", WorkKey: c.commit.WorkKey, Replacements: done}).Get(ctx, &w); err != nil {
		return fmt.Errorf("apply global compression: %w", err)
	}
	stat.TokensSaved = c.res.TokensAfter - w.Tokens
	c.commit.Passes = append(c.commit.Passes, stat)
	c.commit.WorkKey, c.res.TokensAfter = w.WorkKey, w.Tokens
	return nil
}

// historyPass compacts everything but the last messages into a structured
// summary, drift-checked.
//
// With ladder set it is the budget ladder's history step: forced, with the
// ladder's preset (plan.LadderHistoryPreset), its steps named "budget/…".
// Without it, its steps keep the names recorded histories hold.
func (c *runStages) historyPass(ctx workflow.Context, preset policy.Preset, freed int, ladder bool) error {
	var a *activities.Activities
	name, prepareStep := "history", ""
	if ladder {
		name, prepareStep = planpkg.LadderHistory, planpkg.LadderHistory+"/prepare"
	}
	var hp activities.HistoryPlan
	hin := activities.HistoryInput{Run: c.run, WorkKey: c.commit.WorkKey, TokensFreed: freed, Ladder: ladder, Step: prepareStep, Pending: activities.LogDigests(c.commit.Log)}
	if err := runStep(ctx, a.PrepareHistory, hin).Get(ctx, &hp); err != nil {
		return fmt.Errorf("prepare history: %w", err)
	}
	if hp.Skip {
		c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: name, Note: hp.Reason})
		return nil
	}
	if hp.TargetTokens > 0 {
		// A session log's block aims at its own, smaller target.
		preset.History.TargetTokens = hp.TargetTokens
	}
	fallback := ""
	if preset.History.OnFailure == "extractive" {
		fallback = "extractive"
	}
	sum, err := summarizeOrFallback(ctx, activities.SummarizeInput{
		Run: c.run, Step: name + "/summarize", Prompt: preset.History.Prompt, SourceKey: hp.TranscriptKey,
		ArchiveKey: c.archive.Key, TargetTokens: preset.History.TargetTokens,
	}, preset.History.Attempts, fallback)
	if err != nil {
		workflow.GetLogger(ctx).Warn("history summary failed; history unchanged", "run", c.run.ID, "error", err)
		degrade(ctx, summarizerFailed(err)+": the history was left unchanged")
		c.commit.HistoryFailed = true
		c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: name, Note: "summary failed: history unchanged"})
		return nil
	}
	c.commit.Model, c.commit.PromptVersion = sum.Model, sum.PromptVersion
	key := sum.Key
	if preset.Drift.Enabled {
		// An LLM summary that still fails its checks after repair never
		// reaches the agent: the deterministic summary replaces it.
		deterministic := replacement(c.run, name, sum, hp.TranscriptKey, preset.History.TargetTokens*4, preset.History.Prompt, c.archive.Key)
		key, c.res.Drift, err = driftGate(ctx, c.run, preset, name, hp.TranscriptKey, key, c.archive.Key, deterministic)
		if err != nil {
			return err
		}
	}
	var w activities.WorkResult
	if err := runStep(ctx, a.ApplyHistory, activities.ApplyHistoryInput{Run: c.run, Step: name + "/apply", WorkKey: c.commit.WorkKey, Split: hp.Split,
		SummaryKey: key, ArchiveKey: c.archive.Key, Ladder: ladder, Log: hp.Log, ReflectionKey: hp.ReflectKey}).Get(ctx, &w); err != nil {
		return fmt.Errorf("apply history summary: %w", err)
	}
	c.commit.WorkKey, c.res.TokensAfter, c.commit.Preserved = w.WorkKey, w.Tokens, hp.Kept
	c.commit.Log = append(c.commit.Log, w.Log...)
	if hp.ReflectKey != "" {
		// The log outgrew its budget: its blocks were condensed into one
		// (plan.Reflection), which changes the prefix the agent cached.
		c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: name + "/reflect", Applied: true, Count: len(hp.Log),
			Note: fmt.Sprintf("Reflected %d session log blocks (~%d tokens) into 1", len(hp.Log), hp.LogTokens)})
	}
	// The last history summary is also what a handoff of this run
	// summarizes (commit uses it only when it makes one).
	c.commit.HandoffSummaryKey = key
	note := fmt.Sprintf("Summarized %d messages → 1 summary (saved ~%d tokens)", hp.Summarized, hp.Tokens-w.Tokens)
	if hp.Note != "" {
		note += "; " + hp.Note
	}
	c.commit.Passes = append(c.commit.Passes, activities.PassStat{Name: name, Applied: true, Count: hp.Summarized,
		TokensSaved: hp.Tokens - w.Tokens, Note: note})
	if preset.History.DeleteOffloads {
		c.commit.DeleteOffloads = append(c.commit.DeleteOffloads, hp.Restored...)
	}
	return nil
}

// replacement is the deterministic summary that replaces sum, an LLM
// summary of the transcript at sourceKey, when it fails its drift checks
// after repair (see driftGate); nil when sum is already deterministic.
func replacement(run contract.Run, step string, sum activities.SummarizeResult, sourceKey string, targetChars int, prompt, archiveKey string) *activities.FallbackInput {
	if sum.Offline() {
		return nil
	}
	return &activities.FallbackInput{Run: run, Step: step + "/summarize/deterministic", SourceKey: sourceKey,
		TargetChars: targetChars, Mode: "extractive", Prompt: prompt, ArchiveKey: archiveKey}
}

// driftGate checks a summary against its source; below the bar it runs the
// repair passes naming what is missing. A summary that still fails is
// replaced by the deterministic one when deterministic is given (an LLM
// summary: it may have invented what it says, and the extractive summary
// only copies), checked again; what is still missing then is appended
// (the least aggressive result that keeps it).
func driftGate(ctx workflow.Context, run contract.Run, preset policy.Preset, step, sourceKey, summaryKey, archiveKey string,
	deterministic *activities.FallbackInput) (string, string, error) {
	g := gate{run: run, preset: preset, step: step, sourceKey: sourceKey, archiveKey: archiveKey,
		judgeOnce: workflow.GetVersion(ctx, "judge-once", workflow.DefaultVersion, 1) == 1}
	// A summary without a deterministic replacement is itself
	// deterministic (see replacement): it only copies from its source.
	d, err := g.check(ctx, 0, summaryKey, deterministic == nil)
	if err != nil || d.Passed {
		return summaryKey, "passed", err
	}
	// The deterministic replacement does not depend on the repairs: it is
	// made and checked beside the first repair's summarizer call, so that
	// a summary that still fails after its repairs is replaced at once
	// rather than after two more steps. A repair that passes leaves it
	// unused (its object goes with the run's intermediates).
	var spare workflow.Future
	if deterministic != nil && preset.Drift.RepairPasses > 0 &&
		workflow.GetVersion(ctx, "replacement-beside-repair", workflow.DefaultVersion, 1) == 1 {
		spare = g.startReplacement(ctx, *deterministic)
		// Waited for on every way out, used or not: the run's
		// intermediates are released after its commit or its failure,
		// and the replacement must not write its object after that.
		defer func() {
			if err := spare.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("deterministic replacement beside the repair failed", "run", run.ID, "error", err)
			}
		}()
	}
	for pass := 1; pass <= preset.Drift.RepairPasses; pass++ {
		repaired, rerr := summarizeOrFallback(ctx, activities.SummarizeInput{
			Run: run, Step: fmt.Sprintf("%s/repair/%d", step, pass), Prompt: "repair", SourceKey: sourceKey,
			ContextKey: summaryKey, MissingKey: d.MissingKey, ArchiveKey: archiveKey, TargetTokens: preset.History.TargetTokens,
		}, preset.History.Attempts, "")
		if rerr != nil {
			workflow.GetLogger(ctx).Warn("repair pass failed", "run", run.ID, "error", rerr)
			break
		}
		nd, err := g.check(ctx, pass, repaired.Key, repaired.Offline())
		if err != nil {
			return "", "", err
		}
		if nd.Passed {
			return repaired.Key, "repaired", nil
		}
		if nd.Score >= d.Score {
			summaryKey, d = repaired.Key, nd
		}
	}
	return g.lastResort(ctx, summaryKey, d, deterministic, spare)
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
	return g.checkReplacement(ctx, runStep(ctx, a.Fallback, deterministic))
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
	made := recording(ctx, workflow.ExecuteActivity(ctx, a.Fallback, deterministic))
	future, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		r, err := g.checkReplacement(ctx, made)
		settable.Set(r, err)
	})
	return future
}

// gate is what each check of one summary's drift gate needs.
type gate struct {
	run                         contract.Run
	preset                      policy.Preset
	step, sourceKey, archiveKey string
	// judgeOnce: the judge reads a (source, summary) pair once per run,
	// and never a deterministic summary (runs since that version).
	judgeOnce bool
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
	if judge, _ := ctx.Value(judgeKey{}).(bool); judge && g.archiveKey != "" && !(g.judgeOnce && offline) {
		memo, _ := ctx.Value(judgedKey{}).(judged)
		pair := g.sourceKey + "\x00" + key
		if v, ok := memo[pair]; ok && g.judgeOnce {
			verdictKey = v
		} else {
			v, err := summarizeOrFallback(ctx, activities.SummarizeInput{
				Run: g.run, Step: fmt.Sprintf("%s/judge/%d", g.step, pass), Prompt: "judge", SourceKey: g.sourceKey,
				ContextKey: key, TargetTokens: judgeTokens,
			}, g.preset.History.Attempts, "")
			if err == nil {
				verdictKey = v.Key
				if memo != nil {
					memo[pair] = v.Key
				}
			} else {
				degrade(ctx, "the LLM judge was unreachable: the deterministic checks decided")
			}
		}
	}
	err := runStep(ctx, a.CheckDrift, activities.DriftInput{Run: g.run, Step: fmt.Sprintf("%s/drift/%d", g.step, pass), Pass: pass,
		SourceKey: g.sourceKey, SummaryKey: key, JudgeKey: verdictKey}).Get(ctx, &d)
	if err != nil {
		return d, fmt.Errorf("drift check: %w", err)
	}
	return d, nil
}

// lastResort ends the gate of a summary that failed its repairs: the
// deterministic replacement when there is one (spare, when it was started
// beside the repairs), checked again, and then what is still missing
// appended.
func (g gate) lastResort(ctx workflow.Context, summaryKey string, d activities.DriftResult,
	deterministic *activities.FallbackInput, spare workflow.Future) (string, string, error) {
	var a *activities.Activities
	verdict := "patched"
	if deterministic != nil {
		degrade(ctx, "a summary failed its drift checks after repair: the deterministic summary replaced it")
		var r replacementMade
		var err error
		if spare != nil {
			err = spare.Get(ctx, &r)
		} else {
			r, err = g.makeReplacement(ctx, *deterministic)
		}
		if err != nil {
			return "", "", err
		}
		if r.Check.Passed {
			return r.Key, "replaced", nil
		}
		summaryKey, d, verdict = r.Key, r.Check, "replaced+patched"
	}
	var patched activities.SummarizeResult
	if err := runStep(ctx, a.Patch, activities.PatchInput{Run: g.run, Step: g.step + "/patch", SummaryKey: summaryKey, MissingKey: d.MissingKey}).Get(ctx, &patched); err != nil {
		return "", "", fmt.Errorf("patch summary: %w", err)
	}
	return patched.Key, verdict, nil
}

// summarizeOrFallback calls the summarizer; when it keeps failing and a
// fallback mode is given, the no-LLM fallback produces the text instead.
func summarizeOrFallback(ctx workflow.Context, in activities.SummarizeInput, attempts int, fallback string) (activities.SummarizeResult, error) {
	var a *activities.Activities
	var out activities.SummarizeResult
	opts := llmOptions(attempts)
	opts.TaskQueue, _ = ctx.Value(llmQueueKey{}).(string)
	lctx := workflow.WithActivityOptions(ctx, opts)
	err := recording(ctx, workflow.ExecuteActivity(lctx, a.Summarize, llmInput(in))).Get(ctx, &out)
	if err == nil || fallback == "" {
		return out, err
	}
	workflow.GetLogger(ctx).Warn("summarizer failed, using fallback", "run", in.Run.ID, "step", in.Step, "fallback", fallback, "error", err)
	degrade(ctx, summarizerFailed(err)+": the "+fallback+" fallback wrote a summary instead")
	target := in.TargetChars
	if target == 0 {
		target = in.TargetTokens * 4
	}
	fin := activities.FallbackInput{Run: in.Run, Step: in.Step + "/fallback", SourceKey: in.SourceKey, TargetChars: target, Mode: fallback}
	if activities.StructuredPrompt(in.Prompt) {
		fin.Prompt, fin.ArchiveKey = in.Prompt, in.ArchiveKey
	}
	ferr := runStep(ctx, a.Fallback, fin).Get(ctx, &out)
	return out, ferr
}

// llmInput is a summarizer call's input: the resolved preset's summarizer
// model instead of the whole preset, since a regular activity's input is
// recorded in the history and the call needs nothing else of it.
func llmInput(in activities.SummarizeInput) activities.SummarizeInput {
	if in.Run.Resolved != nil {
		model := in.Run.Resolved.SummarizerModel
		in.SummarizerModel = &model
		in.Run.Resolved = nil
	}
	return in
}

// parallel runs fn for 0..n-1 in workflow coroutines, at most limit at a
// time, and waits for all of them. Coroutines are deterministic, unlike
// goroutines.
func parallel(ctx workflow.Context, n, limit int, fn func(ctx workflow.Context, i int)) {
	if limit < 1 {
		limit = 1
	}
	wg := workflow.NewWaitGroup(ctx)
	slots := workflow.NewBufferedChannel(ctx, limit)
	for i := 0; i < n; i++ {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			slots.Send(gctx, struct{}{})
			defer slots.Receive(gctx, nil)
			fn(gctx, i)
		})
	}
	wg.Wait(ctx)
}

// releaseIntermediates deletes the final run's intermediate objects
// (ReleaseIntermediates). The run's outcome is already recorded: a
// failure here is logged, never the run's.
func releaseIntermediates(ctx workflow.Context, run contract.Run) {
	if workflow.GetVersion(ctx, "intermediates", workflow.DefaultVersion, 1) != 1 {
		return
	}
	var a *activities.Activities
	var res activities.ReleaseResult
	var fut workflow.Future
	// As a regular activity, scheduled only once the workflow task that
	// ran the commit has completed: the markers of every step up to the
	// commit are then in the history, so a timed-out workflow task never
	// runs those steps again after their intermediates are gone (which
	// failed a committed run's workflow under a slow link to Temporal).
	// Runs recorded before this keep the local activity.
	if workflow.GetVersion(ctx, "release-after-commit", workflow.DefaultVersion, 1) >= 1 {
		fut = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, stepOptions()), a.ReleaseIntermediates, activities.ReleaseInput{Run: run})
	} else {
		fut = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localStepOptions()), a.ReleaseIntermediates, activities.ReleaseInput{Run: run})
	}
	if err := fut.Get(ctx, &res); err != nil {
		workflow.GetLogger(ctx).Warn("release intermediates", "run", run.ID, "error", err)
	}
}
