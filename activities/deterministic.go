package activities

import (
	"context"
	"fmt"
	"reflect"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// Deterministic runs every pass that needs no LLM (plan.Deterministic),
// stores the offloaded results before the conversation that refers to
// them, and lists the results that need map-reduce.
func (a *Activities) Deterministic(ctx context.Context, in DeterministicInput) (res DeterministicResult, err error) {
	rec := a.begin(ctx, in.Run, "deterministic", "deterministic")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	conv, p, b, err := a.loadWork(ctx, rec, run, in.WorkKey)
	if err != nil {
		return res, err
	}
	din, err := a.deterministicInput(ctx, in, conv, p, b)
	if err != nil {
		return res, err
	}
	out, err := plan.Deterministic(din)
	if err != nil {
		return res, badInput(err)
	}
	if err := a.storeOffloads(ctx, run, out.Offloads); err != nil {
		return res, err
	}
	// Passes that changed nothing hand on the key they read (the input's,
	// as a rule): one S3 write fewer. The passes never change their input,
	// so equal values mean the same conversation.
	key := in.WorkKey
	if !reflect.DeepEqual(conv, out.Conv) {
		if key, err = a.save(ctx, run, out.Conv); err != nil {
			return res, err
		}
	}
	res = DeterministicResult{WorkKey: key, Tokens: out.SizeAfter, Usage: b.Usage(out.SizeAfter),
		Watermark: out.Watermark, Done: out.Done}
	for _, ps := range out.Passes {
		res.Passes = append(res.Passes, PassStat(ps))
		logger(ctx).Info("pass", "run", run.ID, "pass", ps.Name, "applied", ps.Applied, "count", ps.Count, "saved", ps.TokensSaved)
	}
	for _, r := range out.LargeResults {
		t, err := a.target(ctx, run, out.Conv, r)
		if err != nil {
			return res, err
		}
		res.LargeResults = append(res.LargeResults, t)
	}
	rec.outputSize = int64(out.SizeAfter)
	return res, nil
}

// deterministicInput is what plan.Deterministic works on: the working
// conversation with the session's watermark and, for the passes that name
// ids of the original, the run's archived original.
func (a *Activities) deterministicInput(ctx context.Context, in DeterministicInput, conv conversation.Conversation, p policy.Preset, b plan.Budget) (plan.Input, error) {
	din := plan.Input{
		Conv: conv, Preset: p, Budget: b, OffloadKey: offloadKey(in.Run.Tenant),
		Checkpoint: in.Run.Trigger == "checkpoint",
	}
	// Only a run that prunes at the watermark reads it: its preset's
	// (the watermark design), or a checkpoint's. Any other leaves the
	// session's watermark as it is.
	if p.Watermark.Enabled || din.Checkpoint {
		var err error
		if din.Watermark, err = a.watermark(ctx, in.Run); err != nil {
			return plan.Input{}, storeErr(fmt.Errorf("read watermark: %w", err))
		}
	}
	if !p.Debug && (p.PostProcess.Enabled || p.Truncate.Enabled) {
		// Reduced results and truncated inputs name the id of their
		// original. The work is the run's input: an input stored as an
		// archive is the archive itself.
		archiveKey := ""
		if _, kind, _, err := blob.ParseContentKey(in.WorkKey); err == nil && kind == blob.KindArchive {
			archiveKey = in.WorkKey
		}
		orig, sha, ok, err := a.original(ctx, in.Run, archiveKey)
		if err != nil {
			return plan.Input{}, err
		}
		if ok {
			din.Original, din.Archive = &orig, sha
		}
	}
	return din, nil
}

// watermark is the one the run prunes against: the session's, or for a
// replay the one its original saw, so that a replay redoes that run
// rather than one the session has moved past.
func (a *Activities) watermark(ctx context.Context, run contract.Run) (string, error) {
	if run.ReplayOf != "" {
		return a.Store.WatermarkSeenBy(ctx, run.Tenant, run.Session, run.ReplayOf)
	}
	return a.Store.GetWatermark(ctx, run.Tenant, run.Session)
}
