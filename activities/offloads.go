package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// releaseOffloads releases the offloads a run's summary restored, and
// reports how many rows it marked. Only this session's recorded offloads
// are released, and an object is deleted only when no live offload of the
// tenant still refers to it (store.ReleaseOffloads decides it with the
// rows).
func (a *Activities) releaseOffloads(ctx context.Context, run contract.Run, release []string) (int, error) {
	if len(release) == 0 {
		return 0, nil
	}
	var keys []string
	for _, k := range release {
		if blob.CheckOwned(run.Tenant, k) == nil {
			keys = append(keys, k)
		}
	}
	n, _, err := a.Store.ReleaseOffloads(ctx, run.Tenant, run.Session, keys, func(ctx context.Context, key string) error {
		if err := a.Blob.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		return nil
	})
	switch {
	case err == nil:
	case store.IsRetryable(err):
		return 0, storeErr(fmt.Errorf("release offloads: %w", err))
	case blob.IsRetryable(err):
		return 0, blobErr(fmt.Errorf("release offloads: %w", err))
	default:
		// Offload-compact: a failed delete does not undo the compaction; the
		// offloads stay live and recorded.
		logger(ctx).Warn("release offloads", "run", run.ID, "count", len(keys), "error", err)
	}
	return n, nil
}

// storeOffloads stores offloaded results in S3 and records them in
// Postgres, before the conversation that refers to them is saved.
func (a *Activities) storeOffloads(ctx context.Context, run contract.Run, offloads []plan.Offload) error {
	for _, o := range offloads {
		// The row first, then the object: a release of the same object by
		// another session either sees this row, or has deleted the object
		// before it is written again here (see store.ReleaseOffloads).
		sha := blob.SHA256HexString(o.Text)
		if err := a.Store.AddOffload(ctx, store.Offload{Tenant: run.Tenant, Session: run.Session, RunID: run.ID,
			Key: o.Key, ToolID: o.ToolID, ToolName: o.ToolName, Tokens: o.Tokens, SHA256: sha}); err != nil {
			return storeErr(fmt.Errorf("record offload %s: %w", o.ToolID, err))
		}
		ref, err := a.Blob.PutContentString(ctx, run.Tenant, blob.KindOffload, o.Text)
		if err != nil {
			return blobErr(fmt.Errorf("offload %s: %w", o.ToolID, err))
		}
		if ref.Key != o.Key {
			return fmt.Errorf("offload %s: stored under %s, planned %s", o.ToolID, ref.Key, o.Key)
		}
		a.Metrics.Offload(len(o.Text))
	}
	return nil
}

// offloadKey is the content-addressed key of an offloaded text.
func offloadKey(tenant string) func(text string) string {
	return func(text string) string {
		return blob.ContentKey(tenant, blob.KindOffload, blob.SHA256HexString(text))
	}
}
