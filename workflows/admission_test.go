package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// fakeAdmission is store.Admit in memory, for one tenant: runs in flight
// under the bound, waiting runs admitted in the order they asked.
type fakeAdmission struct {
	mu       sync.Mutex
	live     map[string]bool
	done     map[string]bool
	waiting  []string
	sessions map[string]string
	calls    []string
}

func newFakeAdmission() *fakeAdmission {
	return &fakeAdmission{live: map[string]bool{}, done: map[string]bool{}, sessions: map[string]string{}}
}

func (f *fakeAdmission) Admit(_ context.Context, _, runID string, bound int) (store.Admission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, runID)
	if runID != "" && !f.live[runID] && !f.done[runID] && !slices.Contains(f.waiting, runID) {
		f.waiting = append(f.waiting, runID)
		if f.sessions[runID] == "" {
			f.sessions[runID] = "s1"
		}
	}
	var out store.Admission
	for len(f.live) < bound && len(f.waiting) > 0 {
		w := f.waiting[0]
		f.waiting = f.waiting[1:]
		f.live[w] = true
		if w != runID {
			out.Others = append(out.Others, store.AdmittedRun{RunID: w, Session: f.sessions[w]})
		}
	}
	out.Admitted = runID != "" && (f.live[runID] || f.done[runID])
	return out, nil
}

// finish makes run final: its slot is free.
func (f *fakeAdmission) finish(run string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, run)
	f.done[run] = true
}

// admitHarness is a session harness with a bound of one run in flight and
// the fake admission, whose children's ends free their slots.
func admitHarness(f *fakeAdmission) *sessionHarness {
	h := newSessionHarnessWith(time.Minute, nil, activities.Set{Admission: &activities.Admission{Store: f, TenantRunsInFlight: 1}})
	h.env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, _ converter.EncodedValue, _ error) {
		f.finish(info.WorkflowExecution.ID)
		h.mu.Lock()
		defer h.mu.Unlock()
		for i := range h.children {
			if h.children[i].workflowID == info.WorkflowExecution.ID {
				h.children[i].end = h.env.Now()
			}
		}
	})
	return h
}

// startOffsets are the children's start times after t0.
func (h *sessionHarness) startOffsets(t0 time.Time) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	for _, c := range h.children {
		out = append(out, c.start.Sub(t0))
	}
	return out
}

// A run waits for admission while its tenant's slot is taken, shown first
// in the session's queue, and starts when another session's run ends and
// that session tells it (not at the recheck); the next run of the session
// then takes the slot its own run freed at once.
func TestSessionWaitsForAdmission(t *testing.T) {
	t.Parallel()
	f := newFakeAdmission()
	f.live["run-other"], f.sessions["run-other"] = true, "s2"
	h := admitHarness(f)
	t0 := h.env.Now()
	h.signalAt(0, "e1", "e2")
	var queued []string
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(contract.QueueQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&queued))
		// Session s2's run ends; its Admit call admits run-e1 and
		// tells this session.
		f.finish("run-other")
		a, err := f.Admit(t.Context(), "t1", "", 1)
		require.NoError(t, err)
		require.Equal(t, []store.AdmittedRun{{RunID: "run-e1", Session: "s1"}}, a.Others)
		h.env.SignalWorkflow(contract.AdmitSignal, "run-e1")
	}, 10*time.Second)
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	require.Equal(t, []string{"run-e1", "run-e2"}, queued, "the run waiting for admission is queued, first")
	require.Equal(t, []string{"e1", "e2"}, h.eventIDs())
	require.Equal(t, []time.Duration{10 * time.Second, 70 * time.Second}, h.startOffsets(t0),
		"e1 starts when admitted, e2 as soon as e1 freed the slot")
}

// A slot freed without a signal (the session that would tell was
// terminated) is found by the recheck, after admitRecheckFirst.
func TestSessionRechecksAdmission(t *testing.T) {
	t.Parallel()
	f := newFakeAdmission()
	f.live["run-other"], f.sessions["run-other"] = true, "s2"
	h := admitHarness(f)
	t0 := h.env.Now()
	h.signalAt(0, "e1")
	h.env.RegisterDelayedCallback(func() { f.finish("run-other") }, 10*time.Second)
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	require.Equal(t, []time.Duration{admitRecheckFirst}, h.startOffsets(t0))
}

// A session whose run ended hands its slot to the tenant's oldest waiting
// run, of another session, and tells that session.
func TestSessionHandsItsSlotOn(t *testing.T) {
	t.Parallel()
	f := newFakeAdmission()
	h := admitHarness(f)
	h.signalAt(0, "e1")
	// Session s2's run asks while e1 runs and waits.
	h.env.RegisterDelayedCallback(func() {
		f.sessions["run-x"] = "s2"
		a, err := f.Admit(t.Context(), "t1", "run-x", 1)
		require.NoError(t, err)
		require.False(t, a.Admitted)
	}, 10*time.Second)
	told := admitSignals(h.env, "s2")
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	require.Equal(t, []string{"e1"}, h.eventIDs())
	require.Equal(t, []string{"run-x"}, told.wait(t, 1), "session s2 is told its run was admitted")
	require.True(t, f.live["run-x"])
}

// A session that continues as new right after its last run hands that
// run's slot on first, and continues only once its signal to the
// admitted run's session is out: Temporal drops a signal whose sender
// has closed.
func TestSessionContinuesAsNewOnceItsAdmissionSignalsAreOut(t *testing.T) {
	t.Parallel()
	f := newFakeAdmission()
	h := admitHarness(f)
	var ids []string
	for i := 0; i < maxRunsPerSession; i++ {
		ids = append(ids, fmt.Sprintf("e%d", i))
	}
	h.signalAt(0, ids...)
	// Session s2's run asks while the session's last run runs (each
	// takes a minute of the test clock) and waits.
	h.env.RegisterDelayedCallback(func() {
		f.sessions["run-x"] = "s2"
		a, err := f.Admit(t.Context(), "t1", "run-x", 1)
		require.NoError(t, err)
		require.False(t, a.Admitted)
	}, time.Duration(maxRunsPerSession)*time.Minute-30*time.Second)
	var delivered atomic.Bool
	h.env.OnSignalExternalWorkflow(mock.Anything, contract.SessionWorkflowID("t1", "s2"), "", contract.AdmitSignal, "run-x").Return(
		func(_, _, _, _ string, _ interface{}) error {
			time.Sleep(300 * time.Millisecond)
			delivered.Store(true)
			return nil
		})
	err := h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Len(t, h.eventIDs(), maxRunsPerSession)
	require.True(t, f.live["run-x"], "the last run's slot went to run-x")
	require.True(t, delivered.Load(), "the session continued as new before its admission signal went out")
}

// signals collects the run ids an Admit signal told a session. The test
// environment calls a SignalExternalWorkflow mock on its own goroutine
// and does not wait for it (the workflow does not wait for the signal
// either), so the workflow can complete before the mock has run: wait
// reads them through a channel rather than a shared slice.
type signals chan string

// admitSignals mocks the Admit signal to a session of tenant t1.
func admitSignals(env *testsuite.TestWorkflowEnvironment, session string) signals {
	ch := make(signals, 16)
	env.OnSignalExternalWorkflow(mock.Anything, contract.SessionWorkflowID("t1", session), "", contract.AdmitSignal, mock.Anything).Return(
		func(_, _, _, _ string, arg interface{}) error {
			ch <- arg.(string)
			return nil
		})
	return ch
}

// wait returns the first n run ids told, failing after 10 s.
func (s signals) wait(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case id := <-s:
			got = append(got, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d Admit signals came: %v", len(got), n, got)
		}
	}
	return got
}
