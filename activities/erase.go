package activities

import (
	"context"
	"fmt"
	"go.temporal.io/sdk/activity"
	"slices"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// ErasureStore is what the erasure steps ask of Postgres (a *store.Store
// in a worker).
type ErasureStore interface {
	LiveRuns(ctx context.Context, tenant, session string) (int, error)
	SessionObjects(ctx context.Context, tenant, session string) (keys, runs []string, err error)
	EraseSessionRows(ctx context.Context, erasureID, tenant, session string) (int, error)
	ReleaseErasedObject(ctx context.Context, tenant, key string, del func(ctx context.Context) error) (bool, error)
	FinishErasure(ctx context.Context, id string, deleted, kept int, sha256s []string) error
}

var _ ErasureStore = (*store.Store)(nil)

// ExecutionDeleter deletes Temporal workflow executions by id (their
// histories and visibility records); an id with no execution is no error.
// It returns how many it deleted.
type ExecutionDeleter interface {
	DeleteExecutions(ctx context.Context, namespace string, workflowIDs []string) (int, error)
}

// Erasure are the steps of a session's erasure and of the retention
// sweep: what deletes a session's or an expired run's rows, objects and
// Temporal executions.
type Erasure struct {
	// Erasures erases sessions and Retention sweeps expired runs (a
	// *store.Store in a worker).
	Erasures  ErasureStore
	Retention RetentionStore
	// Blob is S3 (a *blob.Store in a worker).
	Blob ObjectStore
	// Executions deletes an erased session's Temporal executions (nil:
	// they stay, holding the session's identifiers).
	Executions ExecutionDeleter
}

// EraseExecutionsInput names the session and the runs whose executions go.
type EraseExecutionsInput struct {
	Erase contract.EraseInput `json:"erase"`
	Runs  []string            `json:"runs"`
}

// EraseSessionExecutions deletes the session's Temporal executions: the
// session's workflow (its id names the tenant and the session), each
// run's compaction, webhook delivery and promotion. Their histories hold
// the caller's identifiers (session name, event ids), never text; after
// an erasure, Temporal keeps none of them. Safe to repeat.
func (e *Erasure) EraseSessionExecutions(ctx context.Context, in EraseExecutionsInput) (int, error) {
	if e.Executions == nil || !activity.IsActivity(ctx) {
		return 0, nil
	}
	// The executions are in the erasure's own namespace.
	namespace := activity.GetInfo(ctx).Namespace
	ids := []string{contract.SessionWorkflowID(in.Erase.Tenant, in.Erase.Session)}
	for _, run := range in.Runs {
		ids = append(ids, run, contract.DeliveryWorkflowID(run), contract.PromotionWorkflowID(run))
	}
	n, err := e.Executions.DeleteExecutions(ctx, namespace, ids)
	if err != nil {
		return n, fmt.Errorf("delete the session's workflow executions: %w", err)
	}
	return n, nil
}

// SessionObjects is what a session holds in S3: keys its rows name and
// its runs (whose prefixes hold any intermediates left). Keys only.
type SessionObjects struct {
	Keys []string `json:"keys"`
	Runs []string `json:"runs"`
}

// EraseObjectsInput deletes a session's objects, after its rows.
type EraseObjectsInput struct {
	Erase   contract.EraseInput `json:"erase"`
	Objects SessionObjects      `json:"objects"`
}

// EraseObjectsResult says what went: the digests of the objects deleted
// (their keys name them) and how many were kept because another session
// of the tenant holds the same bytes.
type EraseObjectsResult struct {
	Deleted int      `json:"deleted"`
	Kept    int      `json:"kept"`
	SHA256  []string `json:"sha256"`
}

// FinishErasureInput completes the tombstone.
type FinishErasureInput struct {
	Erase   contract.EraseInput `json:"erase"`
	Objects EraseObjectsResult  `json:"objects"`
}

// CountLiveRuns counts the session's runs that are not final: the
// erasure waits for them.
func (e *Erasure) CountLiveRuns(ctx context.Context, in contract.EraseInput) (int, error) {
	n, err := e.Erasures.LiveRuns(ctx, in.Tenant, in.Session)
	return n, storeErr(err)
}

// CollectSessionObjects lists the session's objects before its rows go.
func (e *Erasure) CollectSessionObjects(ctx context.Context, in contract.EraseInput) (SessionObjects, error) {
	keys, runs, err := e.Erasures.SessionObjects(ctx, in.Tenant, in.Session)
	if err != nil {
		return SessionObjects{}, storeErr(err)
	}
	return SessionObjects{Keys: keys, Runs: runs}, nil
}

// EraseSessionRows deletes the session's rows (store.EraseSessionRows).
func (e *Erasure) EraseSessionRows(ctx context.Context, in contract.EraseInput) (int, error) {
	n, err := e.Erasures.EraseSessionRows(ctx, in.ErasureID, in.Tenant, in.Session)
	return n, storeErr(err)
}

// EraseSessionObjects deletes the session's objects: every run's prefix,
// and each key no run or offload of the tenant names any more (another
// session may hold the same bytes, content-addressed). Every key is
// checked to be the tenant's first. Safe to repeat.
func (e *Erasure) EraseSessionObjects(ctx context.Context, in EraseObjectsInput) (EraseObjectsResult, error) {
	var res EraseObjectsResult
	tenant := in.Erase.Tenant
	for _, run := range in.Objects.Runs {
		prefix, err := blob.RunPrefix(tenant, run)
		if err != nil {
			return res, badInput(fmt.Errorf("erase intermediates of run %s: %w", run, err))
		}
		n, err := e.Blob.DeletePrefix(ctx, prefix)
		if err != nil {
			return res, blobErr(err)
		}
		res.Deleted += n
	}
	for _, key := range in.Objects.Keys {
		_, _, sha, err := blob.ParseContentKey(key)
		if err != nil || blob.CheckOwned(tenant, key) != nil {
			return res, badInput(fmt.Errorf("erase object %s: not the tenant's content key", key))
		}
		kept, err := e.Erasures.ReleaseErasedObject(ctx, tenant, key, func(ctx context.Context) error {
			return e.Blob.Delete(ctx, key)
		})
		if err != nil {
			return res, storeErr(err)
		}
		if kept {
			res.Kept++
			continue
		}
		res.Deleted++
		// An archive and an output of the same bytes are two objects of
		// one digest: the tombstone names each digest once.
		if !slices.Contains(res.SHA256, sha) {
			res.SHA256 = append(res.SHA256, sha)
		}
	}
	return res, nil
}

// FinishErasure completes the erasure's tombstone with what went.
func (e *Erasure) FinishErasure(ctx context.Context, in FinishErasureInput) error {
	return storeErr(e.Erasures.FinishErasure(ctx, in.Erase.ErasureID, in.Objects.Deleted, in.Objects.Kept, in.Objects.SHA256))
}
