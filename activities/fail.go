package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// FailRun marks a run failed; a run already final stays as it is.
func (a *Activities) FailRun(ctx context.Context, in FailInput) (FailResult, error) {
	failed, err := a.Store.FailRun(ctx, in.RunID, store.Failure{Class: in.Class, Message: in.Message, Cause: in.Cause}, in.Steps...)
	if err != nil {
		return FailResult{}, storeErr(fmt.Errorf("fail run: %w", err))
	}
	r, err := a.Store.GetRun(ctx, in.RunID)
	if err != nil {
		return FailResult{}, storeErr(fmt.Errorf("read run: %w", err))
	}
	if failed {
		a.Metrics.Run(string(store.RunFailed), r.Preset, "", "", 0, 0)
	}
	notify, err := a.notify(ctx, r.Tenant)
	return FailResult{Notify: notify}, err
}
