package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// Commit writes the compacted conversation in the caller's format, marks
// the run succeeded (at most once), persists the watermark, and only then
// deletes the offloads the summary restored.
func (a *Activities) Commit(ctx context.Context, in CommitInput) (res CommitResult, err error) {
	rec := a.begin(ctx, in.Run, "commit", "commit")
	defer rec.end(&err, nil)

	run := in.Run
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	tokensBefore := int64(in.TokensBefore)
	out, err := a.finalOutput(ctx, in, p, b, tokensBefore)
	if err != nil {
		return res, err
	}
	in, conv, data, o := out.in, out.conv, out.data, out.o
	ref, err := a.Blob.PutContent(ctx, run.Tenant, blob.KindOutput, data)
	if err != nil {
		return res, blobErr(fmt.Errorf("write output: %w", err))
	}
	if err := a.commitHandoff(ctx, in, conv, p, b, &o); err != nil {
		return res, err
	}
	c, err := a.commitRun(ctx, rec, in, p, b, conv, o, ref, data)
	if err != nil {
		return res, err
	}
	if err := a.commitSession(ctx, run, in); err != nil {
		return res, err
	}
	rec.outputSize = int64(len(data))
	// The commit read the tenant's endpoints in its own round trip.
	res.Committed, res.Notify = c.Committed, c.Webhooks && a.Hooks != nil
	if !res.Committed {
		// A retry of a commit that landed: the run's answer is its row's.
		res.Outcome, err = a.recordedOutcome(ctx, run.ID)
		return res, err
	}
	status := store.RunSucceeded
	if o.over {
		status = store.RunOverLimit
	}
	res.Outcome = store.OutcomeOf(store.Run{ID: run.ID, Status: status, Error: o.reason,
		TokensBefore: tokensBefore, TokensAfter: int64(o.after), Ratio: o.ratio, Level: string(o.level),
		ArchiveKey: in.ArchiveKey, OutputKey: ref.Key, OutputSHA256: ref.SHA256}, o.stats)
	return res, nil
}

// final is what a commit writes: the commit input as the output applies
// it, the output, its bytes and its outcome.
type final struct {
	in   CommitInput
	conv conversation.Conversation
	data []byte
	o    outcome
}

// commitSession moves the session's state on once the run is recorded:
// the watermark the run reached, and the offloads it released. Both are
// idempotent, so a retried commit repeats them harmlessly. A replay is a
// what-if and moves nothing: the session's agent may still read those
// offloads, and its watermark moves only if the replay is promoted
// (store.Promote, from the watermark its stats record).
func (a *Activities) commitSession(ctx context.Context, run contract.Run, in CommitInput) error {
	if run.ReplayOf != "" {
		return nil
	}
	if in.Watermark != "" {
		if err := a.Store.SetWatermark(ctx, run.Tenant, run.Session, in.Watermark, run.ID); err != nil {
			return storeErr(fmt.Errorf("persist watermark: %w", err))
		}
	}
	deleted, err := a.releaseOffloads(ctx, run, in.DeleteOffloads)
	if err != nil {
		return err
	}
	if deleted != len(in.DeleteOffloads) {
		logger(ctx).Info("offloads already released", "run", run.ID, "asked", len(in.DeleteOffloads), "deleted", deleted)
	}
	return nil
}

// recordedOutcome is the outcome the run's row holds.
func (a *Activities) recordedOutcome(ctx context.Context, runID string) (contract.Outcome, error) {
	row, err := a.Store.GetRun(ctx, runID)
	if err != nil {
		return contract.Outcome{}, storeErr(fmt.Errorf("read run: %w", err))
	}
	o, err := row.Outcome()
	if err != nil {
		return contract.Outcome{}, storeErr(err)
	}
	return o, nil
}

// outcome is what a commit decided about its run: the figures of its
// result and the stats recorded on it.
type outcome struct {
	after        int
	usage        float64
	level        strategy.Level
	ratio        float64
	over         bool
	reason       string
	tokensBefore int64
	stats        store.RunStats
	// log are the blocks the run appended that its output holds.
	log []store.LogBlock
}

// commitOutcome works out the run's outcome from its compacted size.
func commitOutcome(ctx context.Context, in CommitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget,
	after int, tokensBefore int64, reactStats *conversation.ReActStats) outcome {
	usage := b.Usage(after)
	o := outcome{after: after, usage: usage, level: strategy.LevelFor(usage), over: b.Over(after), tokensBefore: tokensBefore}
	if tokensBefore > 0 {
		o.ratio = float64(after) / float64(tokensBefore)
	}
	if o.over {
		o.reason = plan.OverLimitReason(conv, p, b, in.Ladder, in.HistoryFailed)
		logger(ctx).Warn("run ends over its limit", "run", in.Run.ID, "size", after, "limit", b.Limit)
	}
	o.stats = store.RunStats{
		Stats: contract.Stats{
			Passes: in.Passes, ContextLimit: b.Limit, Unit: unitOf(b), HistoryFailed: in.HistoryFailed,
			Recommendation: strategy.Recommendation(o.level), ArchiveKey: in.ArchiveKey,
			OverLimit: o.over, OverLimitReason: o.reason, PreservedCount: in.Preserved, DeletedOffloads: len(in.DeleteOffloads),
			LevelBefore: in.LevelBefore, Drift: in.Drift, Format: string(conv.Format), LevelReason: plan.LevelReason(conv, p, b),
			DegradedReasons: in.Degraded,
		},
		UsageAfter: usage, AgentModel: in.Run.Model, Encoding: b.Counter.Name(),
	}
	if reactStats != nil {
		o.stats.ContextCompression = mustJSON(map[string]any{"enabled": true, "stats": reactStats})
	}
	return o
}

// commitHandoff makes the fresh session of a run that needs one and
// names it on the outcome's stats. A session that reached
// CRITICAL gets its fresh start even when this run brought it lower: it
// will be back there soon.
func (a *Activities) commitHandoff(ctx context.Context, in CommitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget, o *outcome) error {
	startedCritical := in.LevelBefore == string(strategy.LevelCritical)
	if o.level != strategy.LevelCritical && !startedCritical && !o.over && in.Run.Trigger != "checkpoint" {
		return nil
	}
	// The three-tier design's "Checkpoint + fresh session", made: the fresh
	// session's conversation, stored and named on the run.
	ref, err := a.handoff(ctx, in.Run, conv, p, b, plan.HandoffRefs{Level: string(o.level), Usage: o.usage, ArchiveID: archiveID(in.ArchiveKey)}, in.HandoffSummaryKey)
	var app *temporal.ApplicationError
	switch {
	case err != nil && errors.As(err, &app) && !app.NonRetryable():
		return err // S3 or Postgres is down: the commit retries
	case err != nil:
		// The handoff is an extra: a conversation it cannot be made
		// from does not fail the run.
		logger(ctx).Warn("no handoff", "run", in.Run.ID, "error", err)
	case ref.Key != "":
		o.stats.HandoffKey, o.stats.HandoffSHA256 = ref.Key, ref.SHA256
	}
	return nil
}

// commitRun marks the run final with its outcome and the records of its
// steps, this one's included (rec.end then writes only a failure), and
// reports whether this call did (a retried commit finds the run already
// final, and nothing changes) and whether the tenant has webhooks.
func (a *Activities) commitRun(ctx context.Context, rec *attempt, in CommitInput, p policy.Preset, b plan.Budget,
	conv conversation.Conversation, o outcome, ref blob.Ref, data []byte) (store.Commit, error) {
	run := in.Run
	model := in.Model
	if model == "" {
		model = a.modelFor(p.SummarizerModel)
	}
	rec.outputSize = int64(len(data))
	steps := append(in.Steps, rec.row(nil))
	after := o.after
	c, err := a.Store.CommitRun(ctx, run.ID, store.RunResult{
		TokensAfter: int64(after), CharsAfter: int64(runeCount(data)), Ratio: o.ratio,
		OutputKey: ref.Key, OutputSHA256: ref.SHA256, Model: model, PromptVersion: in.PromptVersion,
		Level: string(o.level), Stats: mustJSON(o.stats), OverLimit: o.over, OverLimitReason: o.reason, Steps: steps,
		Log: o.log,
	})
	if err != nil {
		return c, storeErr(fmt.Errorf("commit run: %w", err))
	}
	rec.written = true
	if c.Committed {
		status := string(store.RunSucceeded)
		if o.over {
			status = string(store.RunOverLimit)
		}
		a.Metrics.Run(status, p.Name, string(conv.Format), unitOf(b), int(o.tokensBefore), after)
		a.Metrics.RunEffects(p.Name, o.stats.Cache, o.stats.Cost, o.stats.SessionLog)
		return c, nil
	}
	current, err := a.Store.GetRun(ctx, run.ID)
	if err != nil {
		return c, storeErr(fmt.Errorf("read run: %w", err))
	}
	if current.Status != store.RunSucceeded && current.Status != store.RunOverLimit {
		return c, badInput(fmt.Errorf("run %s is already %s", run.ID, current.Status))
	}
	return c, nil
}
