package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// FailRun marks a run failed; a run already final stays as it is.
func (a *Activities) FailRun(ctx context.Context, in FailInput) error {
	failed, err := a.Store.FailRun(ctx, in.RunID, store.Failure{Class: in.Class, Message: in.Message}, in.Steps...)
	if err != nil {
		return storeErr(fmt.Errorf("fail run: %w", err))
	}
	if failed {
		preset := ""
		if r, err := a.Store.GetRun(ctx, in.RunID); err == nil {
			preset = r.Preset
		}
		a.Metrics.Run(string(store.RunFailed), preset, "", "", 0, 0)
	}
	return nil
}
