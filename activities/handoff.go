package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// PrepareHandoff writes the transcript a CRITICAL handoff summarizes, so
// that the summarizer (with the drift check and its fallback) makes the
// handoff's summary as it makes a history summary.
func (a *Activities) PrepareHandoff(ctx context.Context, in HandoffInput) (res HandoffPrep, err error) {
	rec := a.begin(ctx, in.Run, "handoff/prepare", "prepare-handoff")
	defer rec.end(&err, &res.Recorded)

	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, err := a.preset(in.Run)
	if err != nil {
		return res, err
	}
	_, _, transcript, ok := plan.HandoffTranscript(conv, p)
	if !ok {
		return HandoffPrep{Skip: true}, nil
	}
	if res.TranscriptKey, err = a.putText(ctx, in.Run, "transcript", transcript); err != nil {
		return res, err
	}
	if p.Drift.Enabled {
		a.prefetchIdentifiers(res.TranscriptKey, transcript)
	}
	rec.outputSize = int64(len(transcript))
	return res, nil
}

// handoff builds and stores the fresh-session conversation of a run (see
// plan.Handoff); a zero Ref when there is nothing to hand off.
func (a *Activities) handoff(ctx context.Context, run contract.Run, conv conversation.Conversation, p policy.Preset, b plan.Budget, refs plan.HandoffRefs, summaryKey string) (blob.Ref, error) {
	offs, err := a.Store.ListOffloads(ctx, run.Tenant, run.Session, false)
	if err != nil {
		return blob.Ref{}, storeErr(fmt.Errorf("list offloads: %w", err))
	}
	for _, o := range offs {
		if _, _, sha, err := blob.ParseContentKey(o.Key); err == nil {
			refs.Offloads = append(refs.Offloads, [2]string{sha, o.ToolName})
		}
	}
	if summaryKey != "" {
		if refs.Made, err = a.text(ctx, run.Tenant, summaryKey); err != nil {
			return blob.Ref{}, err
		}
	}
	refs.Summarize = func(transcript string, target int) string {
		resp, err := offline.Summarizer{}.Summarize(ctx, llm.Request{Prompt: llm.PromptSession, Text: transcript,
			TargetChars: target, ArchiveRef: archiveRef(refs.ArchiveID)})
		if err != nil {
			return textcut.KeepLines(transcript, target)
		}
		return resp.Text
	}
	out, ok, err := plan.Handoff(conv, p, refs)
	if err != nil || !ok {
		return blob.Ref{}, err
	}
	// The handoff fits its own budget: what it cannot carry is offloaded
	// with a pointer; one that still cannot fit is not made.
	out, offloads, fits, err := plan.FitHandoff(out, p, b, offloadKey(run.Tenant))
	if err != nil {
		return blob.Ref{}, badInput(err)
	}
	if !fits {
		logger(ctx).Warn("no handoff: over the limit even after offloading", "run", run.ID, "size", b.Measure(out), "limit", b.Limit)
		return blob.Ref{}, nil
	}
	if err := a.storeOffloads(ctx, run, offloads); err != nil {
		return blob.Ref{}, err
	}
	data, err := conversation.Render(out)
	if err != nil {
		return blob.Ref{}, fmt.Errorf("render handoff: %w", err)
	}
	ref, err := a.Blob.PutContent(ctx, run.Tenant, "handoff", data)
	if err != nil {
		return blob.Ref{}, blobErr(fmt.Errorf("write handoff: %w", err))
	}
	return ref, nil
}
