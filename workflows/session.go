package workflows

import (
	"errors"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
)

// RunTimeout bounds one Compaction run: its S3/Postgres steps retry for up
// to an hour, its summarizer calls a few times five minutes.
const RunTimeout = 3 * time.Hour

// sessionIdle is how long a session workflow waits for another event
// before it completes; the next event starts it again.
const sessionIdle = 10 * time.Minute

// maxRunsPerSession bounds a session workflow's history: after this many
// runs it continues as new with its queue.
const maxRunsPerSession = 50

// seenLimit bounds the event ids a session remembers for deduplication
// across continue-as-new (Postgres keeps them all).
const seenLimit = 500

// Session serializes the compactions of one session: events arrive as
// signals, duplicates (same event id) are dropped, and each event runs as a
// child Compaction workflow whose id is the run id, one after another.
func Session(ctx workflow.Context, in contract.SessionInput) error {
	s, err := newSessionQueue(ctx, in)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

// sessionQueue is a Session workflow's state: the events waiting to run,
// in order, and the event ids seen (carried across continue-as-new).
type sessionQueue struct {
	in      contract.SessionInput
	logger  log.Logger
	queue   []contract.CompactionInput
	seen    []string
	known   map[string]bool // seen and queued, only looked up
	signals workflow.ReceiveChannel
}

// newSessionQueue starts the queue from in (what a continue-as-new
// carried) and answers QueueQuery from it.
func newSessionQueue(ctx workflow.Context, in contract.SessionInput) (*sessionQueue, error) {
	s := &sessionQueue{in: in, logger: workflow.GetLogger(ctx), queue: in.Pending, seen: append([]string(nil), in.Seen...)}
	s.known = make(map[string]bool, len(s.seen))
	for _, id := range s.seen {
		s.known[id] = true
	}
	for _, ev := range s.queue {
		s.known[ev.Run.EventID] = true
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueueQuery, func() ([]string, error) {
		return queuedRuns(s.queue), nil
	}); err != nil {
		return nil, err
	}
	s.signals = workflow.GetSignalChannel(ctx, contract.EventSignal)
	return s, nil
}

// add queues ev unless its event id was seen.
func (s *sessionQueue) add(ev contract.CompactionInput) {
	if s.known[ev.Run.EventID] {
		s.logger.Info("duplicate event dropped", "event", ev.Run.EventID)
		return
	}
	s.known[ev.Run.EventID] = true
	s.queue = append(s.queue, ev)
}

// drain queues the events already signalled.
func (s *sessionQueue) drain() {
	for {
		var ev contract.CompactionInput
		if !s.signals.ReceiveAsync(&ev) {
			return
		}
		s.add(ev)
	}
}

// run runs the queued events one after another, each once admitted,
// until the queue stays empty or the workflow continues as new.
func (s *sessionQueue) run(ctx workflow.Context) error {
	// Admission (TENANT_RUNS_IN_FLIGHT): sessions of before it run
	// their events at once, as they did.
	admission := workflow.GetVersion(ctx, "admission", workflow.DefaultVersion, 1) >= 1
	admits := workflow.GetSignalChannel(ctx, contract.AdmitSignal)
	// freed is set while a run of this session ended and its slot has
	// not been handed on (the next Admit call does it).
	freed := false
	runs := 0
	for {
		s.drain()
		if len(s.queue) == 0 {
			if freed {
				admit(ctx, s.in.Tenant, "")
				freed = false
			}
			if !waitForEvent(ctx, s.signals, s.add) {
				s.drain()
				if len(s.queue) == 0 {
					return nil
				}
			}
			continue
		}
		ev := s.queue[0]
		if admission {
			// The run stays first in the queue while it waits, where
			// QueueQuery (and so the reconciler) sees it.
			awaitAdmission(ctx, s.in.Tenant, ev.Run.ID, admits, s.signals, s.add)
			freed = false
		}
		s.queue = s.queue[1:]
		s.seen = append(s.seen, ev.Run.EventID)
		runChild(ctx, ev)
		freed = admission
		runs++
		if runs >= maxRunsPerSession || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return s.continueAsNew(ctx, freed, admits)
		}
	}
}

// continueAsNew ends this run of the workflow for a new one that carries
// the queue and the ids seen, handing on a slot the last run freed.
func (s *sessionQueue) continueAsNew(ctx workflow.Context, freed bool, admits workflow.ReceiveChannel) error {
	if freed {
		_, told := admitWithin(ctx, localStepOptions(), s.in.Tenant, "")
		// This run of the session closes next: its signals must be out
		// first (awaitTold). Sessions of before continued at once.
		if len(told) > 0 && workflow.GetVersion(ctx, "admission-told", workflow.DefaultVersion, 1) >= 1 {
			awaitTold(ctx, told)
		}
	}
	s.drain()
	// Admissions already acted on (a run that found itself admitted
	// before its signal came): nothing to carry.
	var stale string
	for admits.ReceiveAsync(&stale) {
	}
	seen := s.seen
	if len(seen) > seenLimit {
		seen = seen[len(seen)-seenLimit:]
	}
	return workflow.NewContinueAsNewError(ctx, Session, contract.SessionInput{
		Tenant: s.in.Tenant, Session: s.in.Session, Pending: s.queue, Seen: seen,
	})
}

// Rechecks of a run waiting for admission: the signal of the session
// whose run freed a slot is the way it learns of one; the recheck only
// covers a slot freed without one (a run whose session workflow was
// terminated, a raised bound, a signal lost with a crashed Admit call),
// so it backs off from admitRecheckFirst to admitRecheckMax.
const (
	admitRecheckFirst = 30 * time.Second
	admitRecheckMax   = 5 * time.Minute
)

// awaitAdmission returns once run runID of tenant is admitted
// (TENANT_RUNS_IN_FLIGHT), taking in the session's events meanwhile.
//
// Why the wait lives here: a run waiting for admission is a session
// workflow blocked on a signal and a timer, which takes no task-queue
// slot, no activity slot and no Postgres connection, so thousands of
// waiting runs cost nothing while they wait, and the worker's queues hold
// only admitted runs' tasks, where another tenant's run is never behind a
// flood. Postgres decides (store.Admit: an atomic admission under the
// tenant's lock, oldest waiting run first, and a final run's slot free by
// the update that makes it final); a session whose run ended hands the
// slot on in its next Admit call, which tells the sessions it admitted
// by AdmitSignal. A recheck with backoff covers a slot freed without a
// signal.
func awaitAdmission(ctx workflow.Context, tenant, runID string, admits, signals workflow.ReceiveChannel, add func(contract.CompactionInput)) {
	wait := admitRecheckFirst
	for !admit(ctx, tenant, runID) {
		tctx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, wait)
		admitted, recheck := false, false
		for !admitted && !recheck {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(admits, func(c workflow.ReceiveChannel, _ bool) {
				var id string
				c.Receive(ctx, &id)
				// An admission this session acted on before its
				// signal came is not this run's.
				admitted = id == runID
			})
			sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
				var ev contract.CompactionInput
				c.Receive(ctx, &ev)
				add(ev)
			})
			sel.AddFuture(timer, func(workflow.Future) { recheck = true })
			sel.Select(ctx)
		}
		cancel()
		if admitted {
			return
		}
		wait = min(2*wait, admitRecheckMax)
	}
}

// admit runs the Admit step for runID of tenant (empty: only hand a freed
// slot on) and tells the sessions of the other runs it admitted. It
// reports whether runID may start. Postgres failing for the step's hour
// lets the run start: admission is fairness, and the run's own steps
// meet the same outage.
func admit(ctx workflow.Context, tenant, runID string) bool {
	admitted, _ := admitWithin(ctx, localStepOptions(), tenant, runID)
	return admitted
}

// admitWithin is admit with the step's options. told are the signals to
// the other sessions, under way: a workflow about to close waits for
// them (awaitTold), since Temporal drops a signal whose sender closed
// before the signal went out.
func admitWithin(ctx workflow.Context, opts workflow.LocalActivityOptions, tenant, runID string) (admitted bool, told []workflow.Future) {
	var a *activities.Admission
	var res activities.AdmitResult
	lctx := workflow.WithLocalActivityOptions(ctx, opts)
	if err := workflow.ExecuteLocalActivity(lctx, a.Admit, activities.AdmitInput{Tenant: tenant, RunID: runID}).Get(ctx, &res); err != nil {
		if runID == "" {
			workflow.GetLogger(ctx).Warn("handing a freed admission slot on failed; the next Admit call or a recheck does it", "tenant", tenant, "error", err)
			return false, nil
		}
		workflow.GetLogger(ctx).Error("admission failed; the run starts", "run", runID, "error", err)
		return true, nil
	}
	for _, o := range res.Others {
		// Not waited for here: the run goes on while they go out.
		told = append(told, workflow.SignalExternalWorkflow(ctx, contract.SessionWorkflowID(tenant, o.Session), "", contract.AdmitSignal, o.RunID))
	}
	return res.Admitted, told
}

// awaitTold waits, before a workflow closes, for the admission signals it
// sent to go out. Temporal sends a workflow's signal to another after the
// task that issued it, and drops it when the sender has closed by then:
// under load a run that handed its slot on and ended at once left the
// admitted run to wait for the retell or its recheck (15 to 30 s, the
// ceiling bench's p99). A signal that fails (a session that is gone has
// its run started again by the reconciler, admitted already) is logged.
func awaitTold(ctx workflow.Context, told []workflow.Future) {
	for _, f := range told {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("admission signal not delivered", "error", err)
		}
	}
}

// queuedRuns are the run ids of the queued events, in order.
func queuedRuns(queue []contract.CompactionInput) []string {
	ids := make([]string, len(queue))
	for i, ev := range queue {
		ids[i] = ev.Run.ID
	}
	return ids
}

// RunTaskTimeout is the workflow task timeout of a run's Compaction
// workflow. Its floor is the link to Temporal: the SDK keeps a task that
// runs local steps alive by completing it at 80% of the timeout, counted
// from when the worker got the task, so the task's delivery and that
// completion must both cross the link within the last 20%: with 3 s
// each way (the chaos soak's worst, 2 s of latency and 1 s of jitter),
// 30 s, with no margin left.
const RunTaskTimeout = 30 * time.Second

// runChild runs one event as its Compaction child workflow and waits for
// it. A run records its own failure, so the session only logs it and
// goes on.
func runChild(ctx workflow.Context, ev contract.CompactionInput) {
	childOpts := workflow.ChildWorkflowOptions{
		WorkflowID:            ev.Run.ID,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enums.PARENT_CLOSE_POLICY_ABANDON,
		// A run never hangs: past this it times out, and the reconciler
		// marks its row failed (gateway.Reconcile).
		WorkflowExecutionTimeout: RunTimeout,
		// A run's workflow task runs its local steps; under a slow link
		// to Temporal the default 10 s expired mid-task and the steps ran
		// again (the chaos soak's finding). The price: a worker that dies
		// mid-task holds the run this long, until the task times out (the
		// sticky queue's 5 s covers only a task not started yet); the
		// soak's killed workers cost their runs 30 s each.
		WorkflowTaskTimeout: RunTaskTimeout,
	}
	if ev.Visibility {
		childOpts.TypedSearchAttributes = runSearchAttributes(ev)
	}
	cctx := workflow.WithChildOptions(ctx, childOpts)
	err := workflow.ExecuteChildWorkflow(cctx, Compaction, ev).Get(ctx, nil)
	var started *temporal.ChildWorkflowExecutionAlreadyStartedError
	switch {
	case errors.As(err, &started):
		workflow.GetLogger(ctx).Info("run already exists", "run", ev.Run.ID)
	case err != nil:
		workflow.GetLogger(ctx).Warn("run failed", "run", ev.Run.ID, "error", err)
	}
}

// waitForEvent blocks until an event arrives (true) or the session has
// been idle for sessionIdle (false).
func waitForEvent(ctx workflow.Context, signals workflow.ReceiveChannel, add func(contract.CompactionInput)) bool {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	got := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
		var ev contract.CompactionInput
		c.Receive(ctx, &ev)
		add(ev)
		got = true
	})
	sel.AddFuture(workflow.NewTimer(tctx, sessionIdle), func(workflow.Future) {})
	sel.Select(ctx)
	return got
}

// handOnSlot hands the slot of a run that just became final to its
// tenant's oldest waiting run, in the run's own last workflow task. The
// waiting run's session hears at once, rather than after this run's
// session has woken for its child's end (a workflow task and a round trip
// later), which under a flood was most of a waiting tenant's delay. The
// session still hands on after its child too (admit with no run); that
// call has no slot left to hand on unless this run's workflow ended
// without reaching this. It tries for a minute at most (Postgres down):
// the workflow's release and delivery come after it, and the session's
// call and the waiting sessions' rechecks do the handoff later anyway.
// told are its signals to the admitted runs' sessions, which a run of the
// current shape waits for before it closes (awaitTold).
func (r *compactionRun) handOnSlot(ctx workflow.Context) (told []workflow.Future) {
	if !r.changed(ctx, "admission-handoff") {
		return nil
	}
	opts := localStepOptions()
	opts.StartToCloseTimeout, opts.ScheduleToCloseTimeout = handOnTimeout/2, handOnTimeout
	_, told = admitWithin(ctx, opts, r.run.Tenant, "")
	return told
}

// handOnTimeout bounds a finished run's handoff of its slot.
const handOnTimeout = time.Minute
