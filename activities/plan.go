package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// Plan reads and validates the input, measures it, and marks the run
// running with its figures and archive in one statement. The input is the
// run's archive: the gateway stored the caller's bytes once, as their
// content-addressed archive, before it recorded the run (see
// gateway.Gateway.Submit); the plan step checks that it is and records it.
// A conversation that does not parse fails the run at once, with the
// parser's error naming the message and field.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (res PlanResult, err error) {
	rec := a.begin(ctx, in.Run, "plan", "plan")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	data, err := a.getVerified(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256)
	if err != nil {
		return res, fmt.Errorf("read input: %w", err)
	}
	archive, err := inputArchive(in.InputKey, in.InputSHA256, data)
	if err != nil {
		return res, err
	}
	rec.inputSize = int64(len(data))
	conv, err := conversation.ParseAny(data)
	if err != nil {
		return res, badInput(fmt.Errorf("input conversation: %w", err))
	}
	a.convs.add(in.InputKey, conv, int64(len(data)))
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	size := b.Measure(conv)
	usage := b.Usage(size)
	res = PlanResult{
		Format: string(conv.Format), Messages: len(conv.Messages), Encoding: b.Counter.Name(),
		ContextLimit: b.Limit, TokensBefore: size, CharsBefore: runeCount(data),
		UsageBefore: usage, LevelBefore: string(strategy.LevelFor(usage)),
	}
	switch {
	case p.Debug:
		res.Skip, res.Reason = true, "debug verbosity: compression disabled"
	case len(conv.Messages) == 0:
		res.Skip, res.Reason = true, "empty conversation"
	}
	start := store.RunStart{RunPlan: store.RunPlan{
		Preset: p.Name, Model: a.modelFor(p.SummarizerModel), Level: res.LevelBefore,
		TokensBefore: int64(size), CharsBefore: int64(res.CharsBefore),
	}, ArchiveKey: archive.Key, ArchiveSHA256: archive.SHA256}
	res.Archive = &archive
	rec.outputSize = archive.Size
	if err := a.Store.StartRun(ctx, run.ID, run.Tenant, run.Session, start); err != nil {
		if errors.Is(err, store.ErrBaseSuperseded) {
			// Its output would fork the session: the caller continues
			// from the latest output instead.
			return res, badInput(err)
		}
		if !errors.Is(err, store.ErrRunFinal) {
			return res, storeErr(fmt.Errorf("start run: %w", err))
		}
		// Final already: an earlier execution of this run's steps ended
		// it, in a workflow task Temporal never recorded (its worker lost
		// Temporal after the commit). The run's answer is its row's.
		final, err := a.recordedOutcome(ctx, run.ID)
		if err != nil {
			return res, err
		}
		if final.Status == string(store.RunFailed) {
			// Failed meanwhile (the reconciler): it stays failed.
			return res, temporal.NewNonRetryableApplicationError("the run was already recorded failed: "+final.Error, TypeInternal, nil)
		}
		res.Final = &final
	}
	return res, nil
}

// inputArchive is the run's archive: its input, which the gateway stored
// as the content-addressed archive of the caller's bytes, its SHA-256
// checked by S3 when it was written; data, just read and checked against
// sha, is its content. Any other key is refused, never copied: only the
// gateway starts runs, so another key is a bug (an unclassified error,
// which fails the run at once), and a key that names an output or an
// offload must never be recorded as an original.
func inputArchive(key, sha string, data []byte) (ArchiveResult, error) {
	_, kind, keySHA, err := blob.ParseContentKey(key)
	if err != nil {
		return ArchiveResult{}, fmt.Errorf("input: %w", err)
	}
	if kind != blob.KindArchive || keySHA != sha {
		return ArchiveResult{}, fmt.Errorf("input %s is not the archive of sha256 %s that the gateway stores", key, sha)
	}
	return ArchiveResult{Key: key, SHA256: sha, Size: int64(len(data))}, nil
}

// modelFor is the summarizer model a run will use, as recorded on it.
func (a *Activities) modelFor(presetModel string) string {
	if _, ok := a.Summarizer.(offline.Summarizer); ok {
		return "extractive"
	}
	if presetModel != "" {
		return presetModel
	}
	return a.SummarizerModel
}
