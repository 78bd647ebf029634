package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
)

// ReleaseInput names the run whose intermediates go.
type ReleaseInput struct {
	Run contract.Run `json:"run"`
}

// ReleaseResult says how many intermediate objects were deleted.
type ReleaseResult struct {
	Deleted int `json:"deleted"`
}

// ReleaseIntermediates deletes a final run's intermediate objects (working
// copies, chunks, texts, transcripts, summaries, drift files), which all
// live under the run's own prefix (blob.RunPrefix): what stays is the
// archived original, the output, the handoff and the live offloads. A
// worker with KeepIntermediates set keeps them, for debugging. Safe to
// repeat.
func (a *Activities) ReleaseIntermediates(ctx context.Context, in ReleaseInput) (ReleaseResult, error) {
	if a.KeepIntermediates {
		return ReleaseResult{}, nil
	}
	prefix, err := blob.RunPrefix(in.Run.Tenant, in.Run.ID)
	if err != nil {
		return ReleaseResult{}, badInput(fmt.Errorf("release intermediates: %w", err))
	}
	n, err := a.Blob.DeletePrefix(ctx, prefix)
	if err != nil {
		return ReleaseResult{}, blobErr(fmt.Errorf("release intermediates of run %s: %w", in.Run.ID, err))
	}
	return ReleaseResult{Deleted: n}, nil
}
