package workflows

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// event is the signal for one event of session s1.
func event(id string) contract.CompactionInput {
	return contract.CompactionInput{
		Run:      contract.Run{ID: "run-" + id, Tenant: "t1", Session: "s1", EventID: id, Preset: "adaptive"},
		InputKey: "t1/archive/" + id, InputSHA256: id,
	}
}

// childRun is one child Compaction as the session started it.
type childRun struct {
	workflowID string
	eventID    string
	start, end time.Time
}

// sessionHarness runs the Session workflow with the child Compaction
// mocked: each child takes childTime on the test clock and fails when
// its event id is in fail.
type sessionHarness struct {
	env       *testsuite.TestWorkflowEnvironment
	childTime time.Duration
	fail      map[string]error

	mu       sync.Mutex
	children []childRun
	inFlight int
	peak     int
}

func newSessionHarness(childTime time.Duration, fail map[string]error) *sessionHarness {
	// No bound: every run is admitted at once.
	return newSessionHarnessWith(childTime, fail, activities.Set{})
}

// newSessionHarnessWith is a harness whose steps (admission) are acts'.
func newSessionHarnessWith(childTime time.Duration, fail map[string]error, acts activities.Set) *sessionHarness {
	h := &sessionHarness{env: newTestEnv(), childTime: childTime, fail: fail}
	if acts.Admission == nil {
		acts.Admission = &activities.Admission{}
	}
	h.env.RegisterActivity(acts.Admission)
	h.env.OnWorkflow(Compaction, mock.Anything, mock.Anything).After(childTime).Return(
		func(ctx workflow.Context, in contract.CompactionInput) (contract.Outcome, error) {
			if err := h.fail[in.Run.EventID]; err != nil {
				return contract.Outcome{}, err
			}
			return contract.Outcome{RunID: in.Run.ID}, nil
		})
	h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		var in contract.CompactionInput
		if err := args.Get(&in); err != nil {
			panic(err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.children = append(h.children, childRun{workflowID: info.WorkflowExecution.ID, eventID: in.Run.EventID, start: h.env.Now()})
		h.inFlight++
		h.peak = max(h.peak, h.inFlight)
	})
	h.env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, _ converter.EncodedValue, _ error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.inFlight--
		for i := range h.children {
			if h.children[i].workflowID == info.WorkflowExecution.ID {
				h.children[i].end = h.env.Now()
			}
		}
	})
	return h
}

// signalAt delivers the events after d on the test clock.
func (h *sessionHarness) signalAt(d time.Duration, ids ...string) {
	h.env.RegisterDelayedCallback(func() {
		for _, id := range ids {
			h.env.SignalWorkflow(contract.EventSignal, event(id))
		}
	}, d)
}

func (h *sessionHarness) run(t *testing.T, in contract.SessionInput) error {
	t.Helper()
	h.env.ExecuteWorkflow(Session, in)
	require.True(t, h.env.IsWorkflowCompleted())
	return h.env.GetWorkflowError()
}

// eventIDs lists the children's event ids in start order.
func (h *sessionHarness) eventIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.children {
		out = append(out, c.eventID)
	}
	return out
}

func TestSessionRunsEventsOneAfterAnother(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   contract.SessionInput
		signals map[time.Duration][]string
		fail    map[string]error
		want    []string
	}{{
		name:    "a duplicate event id is dropped",
		signals: map[time.Duration][]string{0: {"e1", "e1", "e2"}},
		want:    []string{"e1", "e2"},
	}, {
		name:    "events arriving during a run wait for it, duplicates of the running one too",
		signals: map[time.Duration][]string{0: {"e1"}, 30 * time.Second: {"e2", "e1", "e3"}, 90 * time.Second: {"e2", "e4"}},
		want:    []string{"e1", "e2", "e3", "e4"},
	}, {
		name:    "a failed run does not stop the session",
		signals: map[time.Duration][]string{0: {"e1", "e2"}},
		fail:    map[string]error{"e1": errors.New("plan: bad input")},
		want:    []string{"e1", "e2"},
	}, {
		name:    "events seen before continue-as-new stay deduplicated",
		input:   contract.SessionInput{Seen: []string{"e1"}},
		signals: map[time.Duration][]string{0: {"e1", "e2"}},
		want:    []string{"e2"},
	}, {
		name:    "the pending queue runs first",
		input:   contract.SessionInput{Pending: []contract.CompactionInput{event("p1"), event("p2")}},
		signals: map[time.Duration][]string{0: {"e1", "p2"}},
		want:    []string{"p1", "p2", "e1"},
	}, {
		name:    "an event just inside the idle window still runs",
		signals: map[time.Duration][]string{0: {"e1"}, time.Minute + sessionIdle - time.Second: {"e2"}},
		want:    []string{"e1", "e2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newSessionHarness(time.Minute, tt.fail)
			for d, ids := range tt.signals {
				h.signalAt(d, ids...)
			}
			in := tt.input
			in.Tenant, in.Session = "t1", "s1"
			require.NoError(t, h.run(t, in))
			require.Equal(t, tt.want, h.eventIDs())
			require.Equal(t, 1, h.peak, "at most one run of a session at a time")
			for i, c := range h.children {
				require.Equal(t, "run-"+c.eventID, c.workflowID, "the child's workflow id is the run id")
				if i > 0 {
					require.False(t, c.start.Before(h.children[i-1].end), "run %d starts after run %d ended", i, i-1)
				}
			}
		})
	}
}

func TestSessionCompletesWhenIdle(t *testing.T) {
	t.Parallel()
	h := newSessionHarness(time.Minute, nil)
	start := h.env.Now()
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	require.Empty(t, h.eventIDs())
	require.Equal(t, sessionIdle, h.env.Now().Sub(start), "an empty session waits sessionIdle for an event")
}

func TestSessionAlreadyStartedRunIsSkipped(t *testing.T) {
	t.Parallel()
	// The first child cannot start: its run id exists already (a replay of
	// a finished event).
	h := newSessionHarness(time.Minute, map[string]error{"e1": testsuite.ErrMockStartChildWorkflowFailed})
	h.signalAt(0, "e1", "e2")
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	ids := h.eventIDs()
	require.Equal(t, "e2", ids[len(ids)-1], "the session goes on after a run that exists already")
}

func TestSessionQueueQuery(t *testing.T) {
	t.Parallel()
	h := newSessionHarness(time.Minute, nil)
	h.signalAt(0, "e1", "e2", "e3")
	var queued []string
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(contract.QueueQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&queued))
	}, 30*time.Second)
	require.NoError(t, h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1"}))
	require.Equal(t, []string{"run-e2", "run-e3"}, queued, "e1 runs; e2 and e3 wait")
}

func TestSessionContinuesAsNew(t *testing.T) {
	t.Parallel()
	var old []string
	for i := 0; i < seenLimit; i++ {
		old = append(old, fmt.Sprintf("old-%d", i))
	}
	tests := []struct {
		name     string
		seen     []string
		wantSeen func(ran []string) []string
	}{{
		name:     "fresh session carries the events it ran",
		wantSeen: func(ran []string) []string { return ran },
	}, {
		name: "seen ids are bounded by seenLimit, oldest dropped",
		seen: old,
		wantSeen: func(ran []string) []string {
			all := append(append([]string(nil), old...), ran...)
			return all[len(all)-seenLimit:]
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newSessionHarness(time.Second, nil)
			var ids []string
			for i := 0; i < maxRunsPerSession+2; i++ {
				ids = append(ids, fmt.Sprintf("e%d", i))
			}
			h.signalAt(0, ids...)
			err := h.run(t, contract.SessionInput{Tenant: "t1", Session: "s1", Seen: tt.seen})
			var can *workflow.ContinueAsNewError
			require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
			require.Equal(t, "Session", can.WorkflowType.Name)

			ran := ids[:maxRunsPerSession]
			require.Equal(t, ran, h.eventIDs())
			var next contract.SessionInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			require.Equal(t, "t1", next.Tenant)
			require.Equal(t, "s1", next.Session)
			require.Equal(t, []contract.CompactionInput{event(ids[maxRunsPerSession]), event(ids[maxRunsPerSession+1])}, next.Pending, "queued events go to the next run")
			require.Equal(t, tt.wantSeen(ran), next.Seen)
		})
	}
}
