package runview_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// workflows is a stand-in for the gateway's wait on a run's workflow:
// wait decides when and how it ends.
type workflows struct {
	calls atomic.Int32
	wait  func(ctx context.Context) error
}

func (w *workflows) Wait(ctx context.Context, _ string) (contract.Outcome, error) {
	w.calls.Add(1)
	return contract.Outcome{}, w.wait(ctx)
}

// never is a workflow that does not end before the wait does.
func never(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// pendingRun records a live run of tenant.
func pendingRun(t *testing.T, st *store.Store, tenant, id string) {
	t.Helper()
	_, _, err := st.CreateRun(t.Context(), store.Run{ID: id, Tenant: tenant, Session: "s1", EventID: id, Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)
}

// commitLater marks run id succeeded after d, from another goroutine;
// the channel gives the error (only the test goroutine may fail it).
func commitLater(st *store.Store, id string, d time.Duration, then func()) <-chan error {
	done := make(chan error, 1)
	go func() {
		time.Sleep(d)
		c, err := st.CommitRun(context.Background(), id, store.RunResult{TokensAfter: 10, OutputKey: "k", OutputSHA256: fmt.Sprintf("%064x", 1)})
		if err == nil && !c.Committed {
			err = errors.New("not committed")
		}
		if then != nil {
			then()
		}
		done <- err
	}()
	return done
}

func newReader(st *store.Store, w runview.Waiter) *runview.Reader {
	return &runview.Reader{Audit: &audit.Service{Store: st}, Workflows: w, Recheck: time.Hour}
}

// TestWaitAnswersOnceTheRunIsFinal: the workflow's end wakes the wait,
// which answers with the row read again (succeeded), long before its
// time; a run final before the wait answers at once, without asking the
// workflow service.
func TestWaitAnswersOnceTheRunIsFinal(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	pendingRun(t, st, "acme", "r1")
	release := make(chan struct{})
	w := &workflows{wait: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	rd := newReader(st, w)
	committed := commitLater(st, "r1", 100*time.Millisecond, func() { close(release) })
	start := time.Now()
	run, err := rd.Wait(t.Context(), "acme", "r1", time.Minute)
	require.NoError(t, <-committed)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, run.Status)
	require.Less(t, time.Since(start), 30*time.Second, "the workflow's end wakes the wait")

	run, err = rd.Wait(t.Context(), "acme", "r1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, run.Status)
	require.EqualValues(t, 1, w.calls.Load(), "a final run needs no workflow")
}

// TestWaitSeesTheRowBeforeTheWorkflowEnds: a run whose row is final while
// its workflow goes on (releasing its intermediates, or its worker lost
// after the commit) answers from the row, at the next recheck.
func TestWaitSeesTheRowBeforeTheWorkflowEnds(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	pendingRun(t, st, "acme", "r1")
	rd := newReader(st, &workflows{wait: never})
	rd.Recheck = 20 * time.Millisecond
	committed := commitLater(st, "r1", 50*time.Millisecond, nil)
	run, err := rd.Wait(t.Context(), "acme", "r1", 15*time.Second)
	require.NoError(t, <-committed)
	require.NoError(t, err)
	require.Equal(t, store.RunSucceeded, run.Status, "the row is read again while the workflow goes on")
}

// TestWaitEndsHonestly: a wait that ends before the run (its time, the
// server draining, a workflow that ended without recording the run)
// answers the run's status as it is, without an error; the caller
// leaving and a workflow service that cannot tell are errors.
func TestWaitEndsHonestly(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	pendingRun(t, st, "acme", "r1")

	t.Run("its time", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		run, err := newReader(st, &workflows{wait: never}).Wait(t.Context(), "acme", "r1", 300*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, store.RunPending, run.Status)
		require.Equal(t, "r1", run.ID)
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	})
	t.Run("draining", func(t *testing.T) {
		t.Parallel()
		draining, drain := context.WithCancel(context.Background())
		rd := newReader(st, &workflows{wait: never})
		rd.Draining = draining
		time.AfterFunc(100*time.Millisecond, drain)
		start := time.Now()
		run, err := rd.Wait(t.Context(), "acme", "r1", time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.RunPending, run.Status)
		require.Less(t, time.Since(start), 30*time.Second)
	})
	for name, ended := range map[string]error{
		"a workflow that completed":  nil,
		"a workflow that terminated": fmt.Errorf("get result: %w", &temporal.WorkflowExecutionError{}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			run, err := newReader(st, &workflows{wait: func(context.Context) error { return ended }}).Wait(t.Context(), "acme", "r1", time.Minute)
			require.NoError(t, err)
			require.Equal(t, store.RunPending, run.Status, "the reconciler's to mark")
			require.Less(t, time.Since(start), 30*time.Second, "nothing else will change the run: no use waiting")
		})
	}
	t.Run("no workflow service", func(t *testing.T) {
		t.Parallel()
		down := serviceerror.NewUnavailable("connection refused")
		_, err := newReader(st, &workflows{wait: func(context.Context) error { return down }}).Wait(t.Context(), "acme", "r1", time.Minute)
		require.ErrorIs(t, err, down)
	})
	t.Run("the caller left", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := newReader(st, &workflows{wait: never}).Wait(ctx, "acme", "r1", time.Minute)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("no wait", func(t *testing.T) {
		t.Parallel()
		w := &workflows{wait: never}
		run, err := newReader(st, w).Wait(t.Context(), "acme", "r1", 0)
		require.NoError(t, err)
		require.Equal(t, store.RunPending, run.Status)
		require.Zero(t, w.calls.Load())
	})
}

// TestNotFoundAndGone: another tenant's run reads as one that does not
// exist, through every read, and waits for nothing; an erased session is
// gone (410), not unknown, while the same name under another tenant is
// that tenant's own unknown session (404).
func TestNotFoundAndGone(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	pendingRun(t, st, "acme", "theirs")
	w := &workflows{wait: never}
	rd := newReader(st, w)
	ctx := t.Context()
	for _, id := range []string{"theirs", "nobody"} {
		_, err := rd.Run(ctx, "initech", id)
		require.ErrorIs(t, err, runview.ErrNotFound, id)
		require.Equal(t, http.StatusNotFound, runview.Status(err), id)
		_, err = rd.Wait(ctx, "initech", id, time.Minute)
		require.Equal(t, http.StatusNotFound, runview.Status(err), id)
		for _, part := range []runview.Part{runview.Original, runview.Output, runview.Handoff} {
			d, err := rd.Download(ctx, "initech", id, part)
			require.Equal(t, http.StatusNotFound, runview.Status(err), "%s %s", id, part)
			require.Empty(t, d.Data)
			require.Empty(t, d.Run.ID, "nothing of the run is handed out")
		}
	}
	require.Zero(t, w.calls.Load(), "no wait for a run the tenant does not have")

	svc := &audit.Service{Store: st}
	_, err := svc.Status(ctx, "acme", "s2")
	require.Equal(t, http.StatusNotFound, runview.Status(err), "a session never used")
	_, _, err = st.CreateRun(ctx, store.Run{ID: "done", Tenant: "acme", Session: "erased", EventID: "done", Trigger: "manual",
		Preset: "adaptive", Status: store.RunPending})
	require.NoError(t, err)
	require.NoError(t, <-commitLater(st, "done", 0, nil))
	_, err = svc.Status(ctx, "acme", "erased")
	require.NoError(t, err, "a live session")
	e, _, err := st.StartErasure(ctx, "acme", "erased", "test")
	require.NoError(t, err)
	for _, finish := range []bool{false, true} {
		if finish {
			_, err := st.EraseSessionRows(ctx, e.ID, "acme", "erased")
			require.NoError(t, err)
			require.NoError(t, st.FinishErasure(ctx, e.ID, 1, 0, nil))
		}
		_, err = svc.Status(ctx, "acme", "erased")
		require.Equal(t, http.StatusGone, runview.Status(err), "erasure finished: %v", finish)
		var gone *store.SessionGoneError
		require.ErrorAs(t, err, &gone)
		require.Equal(t, e.ID, gone.Erasure.ID)
		_, err = svc.Status(ctx, "initech", "erased")
		require.Equal(t, http.StatusNotFound, runview.Status(err), "another tenant's session of the name")
	}
	require.Zero(t, runview.Status(errors.New("something else")))
	require.Zero(t, runview.Status(nil))
}

// TestDownloads: a run's conversations read back byte for byte with
// their checksums, and a run without one says which it lacks (404);
// a stats row that names another tenant's object gives nothing back.
func TestDownloads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	bs := blobtest.New(t)
	rd := &runview.Reader{Audit: &audit.Service{Store: st, Blob: bs}}
	original := []byte(`{"messages":[{"role":"user","content":"fix the build"}]}`)
	output := []byte(`{"messages":[{"role":"user","content":"fix it"}]}`)
	handoff := []byte(`{"messages":[{"role":"user","content":"go on"}]}`)
	put := func(tenant, kind string, data []byte) blob.Ref {
		ref, err := bs.PutContent(ctx, tenant, kind, data)
		require.NoError(t, err)
		return ref
	}
	arch, out, hand := put("acme", blob.KindArchive, original), put("acme", blob.KindOutput, output), put("acme", "handoff", handoff)
	theirs := put("other", "handoff", []byte(`{"secret":"other tenant"}`))

	committed := func(id string, h blob.Ref) {
		pendingRun(t, st, "acme", id)
		require.NoError(t, st.StartRun(ctx, id, "acme", "s1", store.RunStart{ArchiveKey: arch.Key, ArchiveSHA256: arch.SHA256}))
		stats, err := json.Marshal(store.RunStats{Stats: contract.Stats{Unit: "tokens", HandoffKey: h.Key, HandoffSHA256: h.SHA256}})
		require.NoError(t, err)
		_, err = st.CommitRun(ctx, id, store.RunResult{TokensAfter: 10, OutputKey: out.Key, OutputSHA256: out.SHA256, Stats: stats})
		require.NoError(t, err)
	}
	committed("r1", hand)
	committed("forged", theirs)
	pendingRun(t, st, "acme", "live")

	for part, want := range map[runview.Part][]byte{runview.Original: original, runview.Output: output, runview.Handoff: handoff} {
		d, err := rd.Download(ctx, "acme", "r1", part)
		require.NoError(t, err, part)
		require.Equal(t, want, d.Data, part)
		require.Equal(t, "r1-"+string(part)+".json", d.Filename())
	}
	res, err := rd.Result(ctx, mustRun(t, rd, "r1"), true)
	require.NoError(t, err)
	require.True(t, res.Final())
	require.Equal(t, "succeeded", res.Outcome.Status)
	require.Equal(t, out.Key, res.Outcome.OutputKey)
	require.JSONEq(t, string(handoff), string(res.Handoff))
	require.JSONEq(t, string(output), string(res.Conversation))
	res, err = rd.Result(ctx, mustRun(t, rd, "r1"), false)
	require.NoError(t, err)
	require.Nil(t, res.Conversation, "the conversation only when asked")

	for _, tc := range []struct {
		part runview.Part
		want error
	}{{runview.Original, audit.ErrNoArchive}, {runview.Output, audit.ErrNoOutput}, {runview.Handoff, runview.ErrNoHandoff}} {
		d, err := rd.Download(ctx, "acme", "live", tc.part)
		require.ErrorIs(t, err, tc.want, tc.part)
		require.Equal(t, http.StatusNotFound, runview.Status(err), tc.part)
		require.NotEmpty(t, runview.Missing(err), tc.part)
		require.Equal(t, store.RunPending, d.Run.Status, "the run is named: the API's 409 says its status")
	}

	d, err := rd.Download(ctx, "acme", "forged", runview.Handoff)
	require.Error(t, err, "another tenant's key in a row is not read")
	require.Empty(t, d.Data)
	_, err = rd.Result(ctx, mustRun(t, rd, "forged"), false)
	require.Error(t, err)
}

func mustRun(t *testing.T, rd *runview.Reader, id string) store.Run {
	t.Helper()
	run, err := rd.Run(t.Context(), "acme", id)
	require.NoError(t, err)
	return run
}

// TestWrite: a download carries its type, size and SHA-256, and a file
// name when it has one.
func TestWrite(t *testing.T) {
	t.Parallel()
	data := []byte(`{"messages":[]}`)
	sum := sha256.Sum256(data)
	rec := httptest.NewRecorder()
	runview.Write(rec, "application/json", "run-1-output.json", data)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, `attachment; filename=run-1-output.json`, rec.Header().Get("Content-Disposition"))
	require.Equal(t, hex.EncodeToString(sum[:]), rec.Header().Get("X-Content-SHA256"))
	require.Equal(t, "15", rec.Header().Get("Content-Length"))
	require.Equal(t, data, rec.Body.Bytes())

	rec = httptest.NewRecorder()
	runview.Write(rec, "text/plain; charset=utf-8", "", []byte("line\n"))
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Empty(t, rec.Header().Values("Content-Disposition"), "the API answers bodies, not files")
	require.Equal(t, "5", rec.Header().Get("Content-Length"))
}
