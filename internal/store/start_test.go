package store_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestSubmitRun(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := store.Run{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "ev-1", Trigger: "manual", Preset: "three-tier",
		AgentModel: "gpt-4o", ContextLimit: 40000, Overrides: json.RawMessage(`{"history":{"keep_last":3}}`),
		InputKey: "tenants/acme/archive/ab/abc", InputSHA256: "abc", ResolvedPreset: json.RawMessage(`{"name":"three-tier"}`)}

	sub, err := s.SubmitRun(ctx, r, "body-a", nil)
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: "run-1", Generation: 1}, sub)
	got, err := s.GetRun(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, store.RunPending, got.Status)
	require.Equal(t, "gpt-4o", got.AgentModel)
	require.Equal(t, 40000, got.ContextLimit)
	require.JSONEq(t, `{"history":{"keep_last":3}}`, string(got.Overrides))
	require.JSONEq(t, `{"name":"three-tier"}`, string(got.ResolvedPreset))
	require.Equal(t, "abc", got.InputSHA256)

	// The same event again (a retry, even one that names another run id)
	// is the first run; nothing changes.
	again := r
	again.ID = "run-other"
	sub, err = s.SubmitRun(ctx, again, "body-a", nil)
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: "run-1", Existing: true, Generation: 1}, sub)
	_, err = s.GetRun(ctx, "run-other")
	require.ErrorIs(t, err, store.ErrNotFound)

	// The same event id with another body is a conflict that names the
	// run holding the id and writes nothing.
	other := r
	other.ID = "run-other"
	sub, err = s.SubmitRun(ctx, other, "body-b", nil)
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: "run-1", Conflict: true}, sub)
	var sessions int
	require.NoError(t, s.Pool().QueryRow(ctx, `select count(*) from sessions where tenant_id = 'acme'`).Scan(&sessions))
	require.Equal(t, 1, sessions)

	// Event ids are unique per session: another session's "ev-1" is its own
	// event and run.
	other.Session, other.ID = "s2", "run-s2"
	sub, err = s.SubmitRun(ctx, other, "body-a", nil)
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: "run-s2", Generation: 1}, sub)
	run, err := s.EventRun(ctx, "acme", "s2", r.EventID)
	require.NoError(t, err)
	require.Equal(t, "run-s2", run)

	// Bad input is refused before anything is written.
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-2", Tenant: "acme", Session: "s1"}, "body", nil)
	require.ErrorContains(t, err, "EventID is empty")
	_, err = s.SubmitRun(ctx, store.Run{ID: "run-2", Tenant: "acme", Session: "s1", EventID: "ev-2"}, "", nil)
	require.ErrorContains(t, err, "bodySHA256 is empty")
}

func TestStartRun(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	// A run the gateway did not record is not created.
	r := store.Run{ID: "run-new", Tenant: "acme", Session: "s9", EventID: "ev", Trigger: "threshold"}
	start := store.RunStart{RunPlan: store.RunPlan{Preset: "adaptive", Level: "RED", TokensBefore: 100},
		ArchiveKey: "tenants/acme/archive/a", ArchiveSHA256: "a"}
	require.ErrorIs(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, start), store.ErrNotFound)
	_, err := s.GetRun(ctx, r.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	// A run the gateway recorded starts running with its plan and archive.
	_, err = s.SubmitRun(ctx, r, "body", nil)
	require.NoError(t, err)
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, start))
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, start), "a retry")
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, got.Status)
	require.Equal(t, "adaptive", got.Preset)
	require.Equal(t, int64(100), got.TokensBefore)
	require.Equal(t, "tenants/acme/archive/a", got.ArchiveKey)

	// Another archive for the same run is refused; the first stays.
	other := start
	other.ArchiveKey, other.ArchiveSHA256 = "tenants/acme/archive/b", "b"
	require.ErrorContains(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, other), "already archived")
	got, err = s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "a", got.ArchiveSHA256)

	// A run id of another tenant or session is not taken over.
	require.ErrorContains(t, s.StartRun(ctx, r.ID, "evil", r.Session, store.RunStart{}), "already used")
	require.ErrorContains(t, s.StartRun(ctx, r.ID, r.Tenant, "s1", store.RunStart{}), "already used")
	got, err = s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "acme", got.Tenant)

	// Half an archive is refused before anything is written.
	require.ErrorContains(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{ArchiveKey: "k"}), "go together")
	require.ErrorContains(t, s.StartRun(ctx, r.ID, "", r.Session, store.RunStart{}), "tenant is empty")
}

// TestOneLiveRunExtendsABase: two incremental events on one base would
// make two outputs, each with one delta. The claim's unique index lets
// one live run (pending, running or committed) extend a base, also
// under a race of claims; the refusal names the holder. A failed
// extension frees its base. A run whose base is no longer the session's
// latest output when it starts (a whole conversation committed since)
// is refused by StartRun with ErrBaseSuperseded.
func TestOneLiveRunExtendsABase(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	start := store.RunStart{RunPlan: store.RunPlan{Preset: "adaptive"}}
	commit := func(id string) {
		t.Helper()
		require.NoError(t, s.StartRun(ctx, id, "acme", "s1", start))
		c, err := s.CommitRun(ctx, id, store.RunResult{OutputKey: "tenants/acme/output/" + id, OutputSHA256: id})
		require.NoError(t, err)
		require.True(t, c.Committed)
	}
	base := store.Run{ID: "run-base", Tenant: "acme", Session: "s1", EventID: "ev-base", Trigger: "threshold"}
	_, err := s.SubmitRun(ctx, base, "body-base", nil)
	require.NoError(t, err)
	commit(base.ID)

	// Eight racing claims on one base: exactly one is accepted.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			r := store.Run{ID: fmt.Sprintf("run-d%d", i), Tenant: "acme", Session: "s1", EventID: fmt.Sprintf("ev-d%d", i),
				Trigger: "threshold", BaseRunID: base.ID}
			_, errs[i] = s.SubmitRun(ctx, r, fmt.Sprintf("body-d%d", i), nil)
		})
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			require.Empty(t, winner, "a second extension of one base was accepted")
			winner = fmt.Sprintf("run-d%d", i)
		}
	}
	require.NotEmpty(t, winner)
	for _, err := range errs {
		if err != nil {
			var held *store.BaseHeldError
			require.ErrorAs(t, err, &held)
			require.Equal(t, winner, held.RunID, "the refusal names the run that holds the base")
		}
	}
	holder, err := s.BaseExtension(ctx, "acme", "s1", base.ID)
	require.NoError(t, err)
	require.Equal(t, winner, holder)
	// Another tenant naming the same run as its base learns nothing.
	holder, err = s.BaseExtension(ctx, "evil", "s1", base.ID)
	require.NoError(t, err)
	require.Empty(t, holder, "no other tenant's run is named")

	// Failed, the winner frees the base; a retry of its own event is
	// still its run.
	_, err = s.FailRun(ctx, winner, store.Failure{Message: "summarizer down"})
	require.NoError(t, err)
	next := store.Run{ID: "run-next", Tenant: "acme", Session: "s1", EventID: "ev-next", Trigger: "threshold", BaseRunID: base.ID}
	_, err = s.SubmitRun(ctx, next, "body-next", nil)
	require.NoError(t, err, "a failed extension frees its base")

	// A whole conversation commits before the extension starts: its base
	// is no longer the latest, and it may not start.
	whole := store.Run{ID: "run-whole", Tenant: "acme", Session: "s1", EventID: "ev-whole", Trigger: "threshold"}
	_, err = s.SubmitRun(ctx, whole, "body-whole", nil)
	require.NoError(t, err)
	commit(whole.ID)
	err = s.StartRun(ctx, next.ID, "acme", "s1", start)
	require.ErrorIs(t, err, store.ErrBaseSuperseded)
	require.ErrorContains(t, err, "run-whole")
	got, err := s.GetRun(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunPending, got.Status)

	// An extension of the latest output starts.
	last := store.Run{ID: "run-last", Tenant: "acme", Session: "s1", EventID: "ev-last", Trigger: "threshold", BaseRunID: whole.ID}
	_, err = s.SubmitRun(ctx, last, "body-last", nil)
	require.NoError(t, err)
	require.NoError(t, s.StartRun(ctx, last.ID, "acme", "s1", start))
}
