package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	planpkg "github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// canHandOff reports whether a run's conversation can have a handoff made
// by the summarizer: not a ReAct trajectory (no handoff).
func canHandOff(pr activities.PlanResult) bool {
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
// beside its passes (started is that call); any other makes it now. Commit builds the
// handoff around it; when the summarizer fails, commit makes the
// structured offline summary itself.
func (r *compactionRun) handoffSummary(ctx workflow.Context, started workflow.Future) error {
	if started == nil {
		after := strategy.LevelFor(float64(r.res.TokensAfter) / float64(max(r.plan.ContextLimit, 1)))
		made := r.plan.LevelBefore == string(strategy.LevelCritical) || after == strategy.LevelCritical ||
			r.res.TokensAfter > r.plan.ContextLimit || r.run.Trigger == "checkpoint"
		if !made {
			return nil
		}
		if r.commit.HandoffSummaryKey != "" {
			// The run's own history summary, drift-checked, already
			// stands for what the handoff summarizes: no second one.
			r.commit.Passes = append(r.commit.Passes, activities.PassStat{Name: "handoff/summary", Applied: true, Count: 1,
				Note: "the run's history summary"})
			return nil
		}
		if !canHandOff(r.plan) {
			return nil
		}
		started = r.startHandoffSummary(ctx, r.commit.WorkKey)
	}
	var h handoffMade
	if err := started.Get(ctx, &h); err != nil {
		return err
	}
	if h.Key != "" {
		r.commit.HandoffSummaryKey = h.Key
		r.commit.Passes = append(r.commit.Passes, h.Pass)
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
func (r *compactionRun) startHandoffSummary(ctx workflow.Context, workKey string) workflow.Future {
	future, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		h, err := r.makeHandoffSummary(ctx, workKey)
		settable.Set(h, err)
	})
	return future
}

func (r *compactionRun) makeHandoffSummary(ctx workflow.Context, workKey string) (handoffMade, error) {
	var a *activities.Activities
	var hp activities.HandoffPrep
	if err := r.step(ctx, a.PrepareHandoff, activities.HandoffInput{Run: r.run, WorkKey: workKey}).Get(ctx, &hp); err != nil {
		return handoffMade{}, fmt.Errorf("prepare handoff: %w", err)
	}
	if hp.Skip {
		return handoffMade{}, nil
	}
	const step = "handoff"
	sum, err := r.summarizeOrFallback(ctx, activities.SummarizeInput{
		Run: r.run, Step: step + "/summarize", Prompt: "session", SourceKey: hp.TranscriptKey,
		ArchiveKey: r.archive.Key, TargetChars: planpkg.HandoffSummaryChars,
	}, r.preset.History.Attempts, "extractive")
	if err != nil {
		workflow.GetLogger(ctx).Warn("handoff summary failed; commit makes the offline one", "run", r.run.ID, "error", err)
		r.degrade(summarizerFailed(err) + ": the handoff's summary is the offline one")
		return handoffMade{}, nil
	}
	key, verdict := sum.Key, ""
	if r.preset.Drift.Enabled {
		deterministic := r.replacement(step, sum, hp.TranscriptKey, planpkg.HandoffSummaryChars, "session")
		// Repairs aim at the handoff's own length, not the history's.
		gate := r.preset
		gate.History.TargetTokens = planpkg.HandoffSummaryChars / 4
		if key, verdict, err = r.driftGate(ctx, gate, step, hp.TranscriptKey, key, r.archive.Key, deterministic); err != nil {
			return handoffMade{}, err
		}
	}
	note := "summary by " + sum.Model
	if verdict != "" {
		note += ", drift " + verdict
	}
	return handoffMade{Key: key, Pass: activities.PassStat{Name: step + "/summary", Applied: true, Count: 1, Note: note}}, nil
}
