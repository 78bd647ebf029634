package activities

import (
	"context"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// RetentionStore is what the retention sweep asks of Postgres (a
// *store.Store in a worker).
type RetentionStore interface {
	ExpiredRuns(ctx context.Context, limit int) ([]store.ExpiredRun, error)
	RunObjects(ctx context.Context, tenant string, runIDs []string) ([]string, error)
	EraseExpiredRuns(ctx context.Context, tenant string, runIDs []string) ([]string, error)
	RecordSweepObjects(ctx context.Context, tenant string, deleted, kept int) error
	ExpiredSnapshots(ctx context.Context, limit int) ([]store.ExpiredSnapshot, error)
	ReleaseExpiredSnapshot(ctx context.Context, tenant, key string, del func(ctx context.Context) error) (rows int, kept bool, err error)
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
func (e *Erasure) ListExpiredRuns(ctx context.Context, in ExpiredRunsInput) ([]ExpiredBatch, error) {
	runs, err := e.Retention.ExpiredRuns(ctx, in.Limit)
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
func (e *Erasure) CollectRunObjects(ctx context.Context, in ExpiredBatch) (SessionObjects, error) {
	keys, err := e.Retention.RunObjects(ctx, in.Tenant, in.Runs)
	if err != nil {
		return SessionObjects{}, storeErr(err)
	}
	return SessionObjects{Keys: keys, Runs: in.Runs}, nil
}

// EraseExpiredRuns deletes the batch's rows (those still past retention)
// and returns the runs deleted.
func (e *Erasure) EraseExpiredRuns(ctx context.Context, in ExpiredBatch) ([]string, error) {
	gone, err := e.Retention.EraseExpiredRuns(ctx, in.Tenant, in.Runs)
	return gone, storeErr(err)
}

// RecordSweepObjects adds what a batch deleted from S3 to its sweep.
func (e *Erasure) RecordSweepObjects(ctx context.Context, in FinishErasureInput) error {
	return storeErr(e.Retention.RecordSweepObjects(ctx, in.Erase.Tenant, in.Objects.Deleted, in.Objects.Kept))
}

// SnapshotSweep is what one SweepExpiredSnapshots deleted.
type SnapshotSweep struct {
	Listed  int `json:"listed"`
	Rows    int `json:"rows"`
	Deleted int `json:"deleted"`
	Kept    int `json:"kept"`
}

// SweepExpiredSnapshots deletes up to Limit objects of proxy snapshots
// past their tenant's retention: for each, its expired rows and, when
// nothing else names it, the object, in one transaction, so that a retry
// finds whatever is left.
func (e *Erasure) SweepExpiredSnapshots(ctx context.Context, in ExpiredRunsInput) (SnapshotSweep, error) {
	var res SnapshotSweep
	expired, err := e.Retention.ExpiredSnapshots(ctx, in.Limit)
	if err != nil {
		return res, storeErr(err)
	}
	res.Listed = len(expired)
	for _, x := range expired {
		if err := blob.CheckOwned(x.Tenant, x.Key); err != nil {
			return res, badInput(fmt.Errorf("sweep snapshot object %s: not the tenant's content key: %w", x.Key, err))
		}
		rows, kept, err := e.Retention.ReleaseExpiredSnapshot(ctx, x.Tenant, x.Key, func(ctx context.Context) error {
			return e.Blob.Delete(ctx, x.Key)
		})
		if err != nil {
			return res, storeErr(err)
		}
		res.Rows += rows
		if kept {
			res.Kept++
		} else {
			res.Deleted++
		}
	}
	return res, nil
}
