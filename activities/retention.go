package activities

import (
	"context"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// RetentionStore is what the retention sweep asks of Postgres (a
// *store.Store in a worker).
type RetentionStore interface {
	ExpiredRuns(ctx context.Context, limit int) ([]store.ExpiredRun, error)
	RunObjects(ctx context.Context, tenant string, runIDs []string) ([]string, error)
	EraseExpiredRuns(ctx context.Context, tenant string, runIDs []string) ([]string, error)
	RecordSweepObjects(ctx context.Context, tenant string, deleted, kept int) error
}

var _ RetentionStore = (*store.Store)(nil)

// ExpiredBatch is one tenant's runs past retention.
type ExpiredBatch struct {
	Tenant string   `json:"tenant"`
	Runs   []string `json:"runs"`
}

// ExpiredRunsInput bounds one listing.
type ExpiredRunsInput struct {
	Limit int `json:"limit"`
}

// ListExpiredRuns lists up to Limit runs past their tenant's retention,
// grouped by tenant in the order found.
func (a *Activities) ListExpiredRuns(ctx context.Context, in ExpiredRunsInput) ([]ExpiredBatch, error) {
	runs, err := a.Retention.ExpiredRuns(ctx, in.Limit)
	if err != nil {
		return nil, storeErr(err)
	}
	var out []ExpiredBatch
	index := map[string]int{}
	for _, r := range runs {
		i, ok := index[r.Tenant]
		if !ok {
			i = len(out)
			index[r.Tenant] = i
			out = append(out, ExpiredBatch{Tenant: r.Tenant})
		}
		out[i].Runs = append(out[i].Runs, r.RunID)
	}
	return out, nil
}

// CollectRunObjects lists the objects of a batch before its rows go.
func (a *Activities) CollectRunObjects(ctx context.Context, in ExpiredBatch) (SessionObjects, error) {
	keys, err := a.Retention.RunObjects(ctx, in.Tenant, in.Runs)
	if err != nil {
		return SessionObjects{}, storeErr(err)
	}
	return SessionObjects{Keys: keys, Runs: in.Runs}, nil
}

// EraseExpiredRuns deletes the batch's rows (those still past retention)
// and returns the runs deleted.
func (a *Activities) EraseExpiredRuns(ctx context.Context, in ExpiredBatch) ([]string, error) {
	gone, err := a.Retention.EraseExpiredRuns(ctx, in.Tenant, in.Runs)
	return gone, storeErr(err)
}

// RecordSweepObjects adds what a batch deleted from S3 to its sweep.
func (a *Activities) RecordSweepObjects(ctx context.Context, in FinishErasureInput) error {
	return storeErr(a.Retention.RecordSweepObjects(ctx, in.Erase.Tenant, in.Objects.Deleted, in.Objects.Kept))
}
