package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recap"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Plan reads and validates the input, measures it and, when the input asks
// for it, archives it (one read of the input for both), then marks the run
// running with its figures and archive in one statement. A conversation
// that does not parse fails the run at once, with the parser's error
// naming the message and field.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (res PlanResult, err error) {
	rec := a.begin(ctx, in.Run, "plan", "plan")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	data, err := a.getVerified(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256)
	if err != nil {
		return res, fmt.Errorf("read input: %w", err)
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
		UsageBefore: usage, LevelBefore: string(compress.LevelFor(usage)),
	}
	switch {
	case p.Debug:
		res.Skip, res.Reason = true, "debug verbosity: compression disabled"
	case len(conv.Messages) == 0:
		res.Skip, res.Reason = true, "empty conversation"
	}
	start := store.RunStart{RunPlan: store.RunPlan{
		Preset: p.Name, Model: a.modelFor(p.SummarizerModel), Level: res.LevelBefore, InputKey: in.InputKey,
		TokensBefore: int64(size), CharsBefore: int64(res.CharsBefore),
	}}
	// The original is archived here, one read of the input for both.
	archive, err := a.archiveInput(ctx, run.Tenant, in.InputKey, in.InputSHA256, data)
	if err != nil {
		return res, err
	}
	res.Archive = &archive
	start.ArchiveKey, start.ArchiveSHA256 = archive.Key, archive.SHA256
	rec.outputSize = archive.Size
	if err := a.Store.StartRun(ctx, storeRun(run, in.InputKey), start); err != nil {
		return res, storeErr(fmt.Errorf("start run: %w", err))
	}
	return res, nil
}

// storeRun is the row of a run the gateway did not record (submitted
// before it did): the identity and trigger, so StartRun can create it.
func storeRun(run contract.Run, inputKey string) store.Run {
	return store.Run{ID: run.ID, Tenant: run.Tenant, Session: run.Session, EventID: run.EventID,
		Trigger: run.Trigger, Preset: run.Preset, InputKey: inputKey, ReplayOf: run.ReplayOf}
}

// archive copies the original to its content-addressed archive key and
// proves that S3 holds it intact, past the in-process cache: by the S3
// server's own SHA-256 check of the upload, or by reading it back (see
// blob.Store.PutContentVerified).
func (a *Activities) archive(ctx context.Context, tenant string, data []byte) (ArchiveResult, error) {
	ref, err := a.Blob.PutContentVerified(ctx, tenant, blob.KindArchive, data)
	if err != nil {
		return ArchiveResult{}, blobErr(fmt.Errorf("write and verify archive: %w", err))
	}
	return ArchiveResult{Key: ref.Key, SHA256: ref.SHA256, Size: ref.Size}, nil
}

// archiveInput is the run's archive. An input the gateway stored as an
// archive (gateway.Gateway.Submit does, since the input and its archive
// are the same bytes) is the archive itself: S3 checked its SHA-256 when
// it was written, and data, just read and checked against sha, is its
// content. Any other input (a run submitted before the gateway did so) is
// copied with archive.
func (a *Activities) archiveInput(ctx context.Context, tenant, key, sha string, data []byte) (ArchiveResult, error) {
	if _, kind, keySHA, err := blob.ParseContentKey(key); err == nil && kind == blob.KindArchive && keySHA == sha {
		return ArchiveResult{Key: key, SHA256: sha, Size: int64(len(data))}, nil
	}
	return a.archive(ctx, tenant, data)
}

// modelFor is the summarizer model a run will use, as recorded on it.
func (a *Activities) modelFor(presetModel string) string {
	if _, offline := a.Summarizer.(recap.Extractive); offline {
		return "extractive"
	}
	if presetModel != "" {
		return presetModel
	}
	return a.SummarizerModel
}

// Archive copies the original to its archive key and proves it stored
// intact (see archive), before any step replaces anything.
func (a *Activities) Archive(ctx context.Context, in ArchiveInput) (res ArchiveResult, err error) {
	rec := a.begin(ctx, in.Run, "archive", "archive")
	defer rec.end(&err, &res.Recorded)

	data, err := a.getVerified(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256)
	if err != nil {
		return res, fmt.Errorf("read input: %w", err)
	}
	res, err = a.archiveInput(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256, data)
	if err != nil {
		return res, err
	}
	if err := a.Store.RecordArchive(ctx, in.Run.ID, res.Key, res.SHA256); err != nil {
		return res, storeErr(fmt.Errorf("record archive: %w", err))
	}
	rec.inputSize, rec.outputSize = res.Size, res.Size
	return res, nil
}
