package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// inFlight counts tenant's runs that hold an admission slot, as Admit
// counts them.
func inFlight(t *testing.T, s *store.Store, tenant string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `select count(*) from runs where tenant_id = $1
		and (status = 'running' or (status = 'pending' and admitted_at is not null))`, tenant).Scan(&n))
	return n
}

// admittedRuns are tenant's runs admitted so far.
func admittedRuns(t *testing.T, s *store.Store, tenant string) map[string]bool {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `select id from runs where tenant_id = $1 and admitted_at is not null`, tenant)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out[id] = true
	}
	require.NoError(t, rows.Err())
	return out
}

// TestAdmitBoundsATenantsRunsInFlight: however many of a tenant's runs ask
// at once, at most the bound are admitted; a run that becomes final frees
// its slot for the oldest waiting run, with nothing else to call; another
// tenant is not held by the first one's backlog.
func TestAdmitBoundsATenantsRunsInFlight(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// No admitted run is named again here, however slow the test.
	s.SetAdmitRetell(time.Hour)
	ctx := t.Context()
	const bound, n = 3, 24
	runs := make([]store.Run, n)
	for i := range runs {
		runs[i] = newRun(t, s, "flood", fmt.Sprintf("s%02d", i))
		// Submission order is the admission order: distinct times, the
		// first run oldest.
		_, err := s.Pool().Exec(ctx, `update runs set started_at = $2 where id = $1`, runs[i].ID,
			time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		require.NoError(t, err)
	}

	// Every run asks at once, twice over: the bound holds. Other tenants
	// race the same way first, each a fresh chance for two callers to
	// take one slot.
	for round := range 8 {
		tenant := fmt.Sprintf("race-%d", round)
		var ids []string
		for i := range n {
			ids = append(ids, newRun(t, s, tenant, fmt.Sprintf("s%02d", i)).ID)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2*n)
		for i := range 2 * n {
			wg.Go(func() { _, errs[i] = s.Admit(ctx, tenant, ids[i%n], bound) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, bound, inFlight(t, s, tenant), "round %d", round)
	}
	var wg sync.WaitGroup
	answers := make([]store.Admission, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() { answers[i], errs[i] = s.Admit(ctx, "flood", runs[i%n].ID, bound) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, bound, inFlight(t, s, "flood"))
	admitted := admittedRuns(t, s, "flood")
	require.Len(t, admitted, bound)
	for i, a := range answers {
		require.Equal(t, admitted[runs[i%n].ID], a.Admitted, "run %d's answer", i%n)
		for _, o := range a.Others {
			require.True(t, admitted[o.RunID], "told to start but not admitted: %s", o.RunID)
		}
	}

	// Another tenant's run is admitted at once.
	quiet := newRun(t, s, "quiet", "q")
	a, err := s.Admit(ctx, "quiet", quiet.ID, bound)
	require.NoError(t, err)
	require.True(t, a.Admitted)

	// The waiting runs, oldest first.
	var waiting []string
	for _, r := range runs {
		if !admitted[r.ID] {
			waiting = append(waiting, r.ID)
		}
	}
	// An admitted run starts (still in flight), then ends: its slot goes
	// to the oldest waiting run, to the first Admit call after it (here
	// the session whose run ended, asking for nothing of its own), which
	// names it with its session to be told.
	var live []string
	for _, r := range runs {
		if admitted[r.ID] {
			live = append(live, r.ID)
		}
	}
	a, err = s.Admit(ctx, "flood", "", bound)
	require.NoError(t, err)
	require.Empty(t, a.Others, "no slot is free while the admitted runs are live")
	first := runOf(t, s, live[0])
	require.NoError(t, s.StartRun(ctx, first.ID, first.Tenant, first.Session, store.RunStart{}))
	for i, id := range waiting {
		finished := live[0]
		live = append(live[1:], id)
		if i%2 == 0 {
			_, err = s.FailRun(ctx, finished, store.Failure{Message: "test"})
		} else {
			_, err = s.CommitRun(ctx, finished, store.RunResult{TokensAfter: 1})
		}
		require.NoError(t, err)
		require.Equal(t, bound-1, inFlight(t, s, "flood"), "a final run holds no slot")
		a, err := s.Admit(ctx, "flood", "", bound)
		require.NoError(t, err)
		require.False(t, a.Admitted, "no run of its own asked")
		require.Len(t, a.Others, 1)
		require.Equal(t, id, a.Others[0].RunID, "the oldest waiting run is admitted first")
		require.Equal(t, runOf(t, s, id).Session, a.Others[0].Session)
		require.Equal(t, bound, inFlight(t, s, "flood"))
		// Asking again for that run finds it admitted.
		again, err := s.Admit(ctx, "flood", id, bound)
		require.NoError(t, err)
		require.True(t, again.Admitted)
		require.Empty(t, again.Others)
	}
}

// TestAdmitRetellsARunLeftPending: an admitted run that is still pending
// is named again by an Admit call once per retell period (its session
// may never have been told), until it starts; a run admitted by the call
// itself is named once.
func TestAdmitRetellsARunLeftPending(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	s.SetAdmitRetell(time.Hour)
	a, b := newRun(t, s, "acme", "sa"), newRun(t, s, "acme", "sb")
	got, err := s.Admit(ctx, "acme", a.ID, 1)
	require.NoError(t, err)
	require.True(t, got.Admitted)
	got, err = s.Admit(ctx, "acme", b.ID, 1)
	require.NoError(t, err)
	require.False(t, got.Admitted, "a holds the one slot")
	require.Empty(t, got.Others, "a was admitted a moment ago")

	// a's session was never told: past the delay a call names it, and
	// the calls within the next period do not.
	const period = 500 * time.Millisecond
	s.SetAdmitRetell(period)
	retold := func(after time.Duration) []store.AdmittedRun {
		t.Helper()
		time.Sleep(after)
		got, err := s.Admit(ctx, "acme", "", 1)
		require.NoError(t, err)
		require.Equal(t, len(got.Others), got.Retold, "every run named is one named again")
		require.Empty(t, got.Waited, "nobody was admitted")
		return got.Others
	}
	named := []store.AdmittedRun{{RunID: a.ID, Session: "sa"}}
	require.Equal(t, named, retold(period+100*time.Millisecond))
	require.Empty(t, retold(0), "named once per period")
	require.Equal(t, named, retold(period+100*time.Millisecond), "and again in the next")
	// Once it runs it is not named; when it ends, b is admitted and named
	// once by the call that admitted it.
	require.NoError(t, s.StartRun(ctx, a.ID, a.Tenant, a.Session, store.RunStart{}))
	got, err = s.Admit(ctx, "acme", "", 1)
	require.NoError(t, err)
	require.Empty(t, got.Others)
	_, err = s.CommitRun(ctx, a.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	got, err = s.Admit(ctx, "acme", "", 1)
	require.NoError(t, err)
	require.Equal(t, []store.AdmittedRun{{RunID: b.ID, Session: "sb"}}, got.Others)
	require.Zero(t, got.Retold, "b is admitted, not named again")
}

// TestAdmitReportsWaitsAndLoad: an Admit call reports how long each run
// it admitted waited, once; AdmissionLoad counts the waiting runs, the
// runs holding a slot and the tenants waiting across every tenant, and
// the oldest wait.
func TestAdmitReportsWaitsAndLoad(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.SetAdmitRetell(time.Hour)
	ctx := t.Context()
	load := func() store.AdmissionLoad {
		t.Helper()
		l, err := s.AdmissionLoad(ctx)
		require.NoError(t, err)
		return l
	}
	require.Equal(t, store.AdmissionLoad{}, load(), "nothing asked yet")

	a, b, c := newRun(t, s, "acme", "sa"), newRun(t, s, "acme", "sb"), newRun(t, s, "beta", "sc")
	// A pending run that never asked (no bound when it was submitted)
	// neither waits nor holds a slot.
	newRun(t, s, "gamma", "sd")
	got, err := s.Admit(ctx, "acme", a.ID, 1)
	require.NoError(t, err)
	require.True(t, got.Admitted)
	require.Len(t, got.Waited, 1, "a itself was admitted by this call")
	require.Less(t, got.Waited[0], time.Minute)
	got, err = s.Admit(ctx, "acme", b.ID, 1)
	require.NoError(t, err)
	require.False(t, got.Admitted)
	require.Empty(t, got.Waited)
	got, err = s.Admit(ctx, "beta", c.ID, 1)
	require.NoError(t, err)
	require.True(t, got.Admitted)

	const pause = 200 * time.Millisecond
	time.Sleep(pause)
	l := load()
	require.Equal(t, 1, l.Waiting, "b waits")
	require.Equal(t, 2, l.InFlight, "a and c hold their tenants' slots")
	require.Equal(t, 1, l.TenantsWaiting)
	require.GreaterOrEqual(t, l.OldestWait, pause)

	// a ends: the next call admits b, and reports its wait once.
	require.NoError(t, s.StartRun(ctx, a.ID, a.Tenant, a.Session, store.RunStart{}))
	_, err = s.CommitRun(ctx, a.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	got, err = s.Admit(ctx, "acme", "", 1)
	require.NoError(t, err)
	require.Equal(t, []store.AdmittedRun{{RunID: b.ID, Session: "sb"}}, got.Others)
	require.Len(t, got.Waited, 1)
	require.GreaterOrEqual(t, got.Waited[0], pause)
	got, err = s.Admit(ctx, "acme", b.ID, 1)
	require.NoError(t, err)
	require.True(t, got.Admitted)
	require.Empty(t, got.Waited, "b's wait was reported by the call that admitted it")
	require.Equal(t, store.AdmissionLoad{InFlight: 2}, load())
}

// TestAdmitWithoutBound: no bound admits everything and writes nothing;
// a run that is not waiting (running, final, unknown) is never held.
func TestAdmitWithoutBound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	a, err := s.Admit(ctx, "acme", r.ID, 0)
	require.NoError(t, err)
	require.Equal(t, store.Admission{Admitted: true}, a)
	require.Empty(t, admittedRuns(t, s, "acme"))

	// A running run that never asked still takes a slot (a run of before
	// admission), and is itself never held.
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{}))
	a, err = s.Admit(ctx, "acme", r.ID, 1)
	require.NoError(t, err)
	require.True(t, a.Admitted)
	next := newRun(t, s, "acme", "s2")
	a, err = s.Admit(ctx, "acme", next.ID, 1)
	require.NoError(t, err)
	require.False(t, a.Admitted, "the running run takes the only slot")
	a, err = s.Admit(ctx, "acme", "run-unknown", 1)
	require.NoError(t, err)
	require.True(t, a.Admitted, "a run Postgres does not know is not held (its plan step creates it)")
	_, err = s.Admit(ctx, "", r.ID, 1)
	require.Error(t, err)
}

// runOf reads run id.
func runOf(t *testing.T, s *store.Store, id string) store.Run {
	t.Helper()
	r, err := s.GetRun(t.Context(), id)
	require.NoError(t, err)
	return r
}
