package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// memErasures is activities.ErasureStore and RetentionStore in memory:
// what the store would answer, and what the activities told it.
type memErasures struct {
	live     int
	keys     []string
	runs     []string
	held     map[string]bool // keys another session of the tenant still holds
	rows     int
	finished []int // deleted, kept
	sha256s  []string
	expired  []store.ExpiredRun
	swept    []int
	snaps    []store.ExpiredSnapshot
	released []string // snapshot objects deleted
}

func (m *memErasures) LiveRuns(context.Context, string, string) (int, error) { return m.live, nil }

func (m *memErasures) SessionObjects(context.Context, string, string) ([]string, []string, error) {
	return m.keys, m.runs, nil
}

func (m *memErasures) EraseSessionRows(context.Context, string, string, string) (int, error) {
	return m.rows, nil
}

func (m *memErasures) ReleaseErasedObject(ctx context.Context, _ string, key string, del func(ctx context.Context) error) (bool, error) {
	if m.held[key] {
		return true, nil
	}
	return false, del(ctx)
}

func (m *memErasures) FinishErasure(_ context.Context, _ string, deleted, kept int, sha256s []string) error {
	m.finished, m.sha256s = []int{deleted, kept}, sha256s
	return nil
}

func (m *memErasures) ExpiredRuns(context.Context, int) ([]store.ExpiredRun, error) {
	return m.expired, nil
}

func (m *memErasures) RunObjects(context.Context, string, []string) ([]string, error) {
	return m.keys, nil
}

func (m *memErasures) EraseExpiredRuns(_ context.Context, _ string, runIDs []string) ([]string, error) {
	return runIDs[:1], nil
}

func (m *memErasures) RecordSweepObjects(_ context.Context, _ string, deleted, kept int) error {
	m.swept = []int{deleted, kept}
	return nil
}

func (m *memErasures) ExpiredSnapshots(context.Context, int) ([]store.ExpiredSnapshot, error) {
	return m.snaps, nil
}

func (m *memErasures) ReleaseExpiredSnapshot(ctx context.Context, _ string, key string, del func(ctx context.Context) error) (int, bool, error) {
	if m.held[key] {
		return 1, true, nil
	}
	if err := del(ctx); err != nil {
		return 0, false, err
	}
	m.released = append(m.released, key)
	return 2, false, nil
}

// TestUnitEraseSession: the erasure's steps pass the store's answers on;
// its objects go (every run's intermediates, each key no other session
// holds, its digest recorded) and a key another session holds stays; a
// key that is not the tenant's stops the step for good, deleting nothing
// of it.
func TestUnitEraseSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t)
	er := &memErasures{live: 2, rows: 7, held: map[string]bool{}}
	ea := &activities.Erasure{Erasures: er, Blob: u.blob}
	in := contract.EraseInput{ErasureID: "erase_1", Tenant: "acme", Session: "s1"}

	live, err := ea.CountLiveRuns(ctx, in)
	require.NoError(t, err)
	require.Equal(t, 2, live)

	inter, err := u.blob.PutRunContentString(ctx, "acme", u.run.ID, blob.KindWork, "an intermediate")
	require.NoError(t, err)
	gone := u.put(blob.KindArchive, "the session's original")
	// An output of the very bytes of the original: one digest, two
	// objects, named once in the tombstone.
	same := u.put(blob.KindOutput, "the session's original")
	shared := u.put(blob.KindOffload, "bytes another session holds")
	er.keys, er.runs, er.held[shared] = []string{gone, same, shared}, []string{u.run.ID}, true

	objs, err := ea.CollectSessionObjects(ctx, in)
	require.NoError(t, err)
	require.Equal(t, activities.SessionObjects{Keys: er.keys, Runs: er.runs}, objs)
	rows, err := ea.EraseSessionRows(ctx, in)
	require.NoError(t, err)
	require.Equal(t, 7, rows)

	res, err := ea.EraseSessionObjects(ctx, activities.EraseObjectsInput{Erase: in, Objects: objs})
	require.NoError(t, err)
	require.Equal(t, 3, res.Deleted, "the intermediate, the original and its twin output")
	require.Equal(t, 1, res.Kept)
	_, _, sha, err := blob.ParseContentKey(gone)
	require.NoError(t, err)
	require.Equal(t, []string{sha}, res.SHA256, "one digest once")
	require.False(t, u.blob.has(inter.Key))
	require.False(t, u.blob.has(gone))
	require.True(t, u.blob.has(shared), "bytes another session holds stay")

	require.NoError(t, ea.FinishErasure(ctx, activities.FinishErasureInput{Erase: in, Objects: res}))
	require.Equal(t, []int{3, 1}, er.finished)
	require.Equal(t, res.SHA256, er.sha256s)

	foreign, err := u.blob.PutContentString(ctx, "other", blob.KindArchive, "another tenant's")
	require.NoError(t, err)
	_, err = ea.EraseSessionObjects(ctx, activities.EraseObjectsInput{Erase: in, Objects: activities.SessionObjects{Keys: []string{foreign.Key}}})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app) && app.NonRetryable(), "another tenant's key is bad input, not retried: %v", err)
	require.True(t, u.blob.has(foreign.Key), "another tenant's object is never deleted")
}

// TestUnitRetentionSweep: expired runs are grouped by tenant in the order
// found; a batch's objects are its rows' keys and its runs' prefixes; the
// rows erased are the store's answer; the sweep records what went.
func TestUnitRetentionSweep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t)
	er := &memErasures{expired: []store.ExpiredRun{{Tenant: "acme", RunID: "r1"}, {Tenant: "other", RunID: "r2"}, {Tenant: "acme", RunID: "r3"}},
		keys: []string{"tenants/acme/output/ab/ab"}}
	ea := &activities.Erasure{Retention: er, Blob: u.blob}

	batches, err := ea.ListExpiredRuns(ctx, activities.ExpiredRunsInput{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []activities.ExpiredBatch{{Tenant: "acme", Runs: []string{"r1", "r3"}}, {Tenant: "other", Runs: []string{"r2"}}}, batches)
	objs, err := ea.CollectRunObjects(ctx, batches[0])
	require.NoError(t, err)
	require.Equal(t, activities.SessionObjects{Keys: er.keys, Runs: []string{"r1", "r3"}}, objs)
	erased, err := ea.EraseExpiredRuns(ctx, batches[0])
	require.NoError(t, err)
	require.Equal(t, []string{"r1"}, erased, "the runs the store deleted, not the ones asked")
	require.NoError(t, ea.RecordSweepObjects(ctx, activities.FinishErasureInput{Erase: contract.EraseInput{Tenant: "acme"},
		Objects: activities.EraseObjectsResult{Deleted: 3, Kept: 1}}))
	require.Equal(t, []int{3, 1}, er.swept)
}

// TestUnitSweepExpiredSnapshots: each expired snapshot object goes unless
// something else of the tenant names it, the rows the store deleted are
// counted, and a key that is not the tenant's stops the step for good.
func TestUnitSweepExpiredSnapshots(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t)
	held := "tenants/acme/snapshot/cd/" + strings.Repeat("cd", 32)
	gone := "tenants/acme/snapshot/ab/" + strings.Repeat("ab", 32)
	er := &memErasures{held: map[string]bool{held: true},
		snaps: []store.ExpiredSnapshot{{Tenant: "acme", Key: gone}, {Tenant: "acme", Key: held}}}
	ea := &activities.Erasure{Retention: er, Blob: u.blob}
	res, err := ea.SweepExpiredSnapshots(ctx, activities.ExpiredRunsInput{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, activities.SnapshotSweep{Listed: 2, Rows: 3, Deleted: 1, Kept: 1}, res)
	require.Equal(t, []string{gone}, er.released)

	er.snaps = []store.ExpiredSnapshot{{Tenant: "other", Key: gone}}
	_, err = ea.SweepExpiredSnapshots(ctx, activities.ExpiredRunsInput{Limit: 10})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.True(t, appErr.NonRetryable(), "another tenant's key is a defect, not a retry")
	require.Len(t, er.released, 1, "nothing of the foreign key was deleted")
}
