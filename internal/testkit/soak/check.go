package soak

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/workflows"
)

// memorySlackKB is the caches' share of the memory bound, in KB.
const memorySlackKB = 128 << 10

// heapSettle is how long the end's live heap is read again while it is
// over its bound: longer than the two minutes after which the Go runtime
// collects an idle heap.
const heapSettle = 150 * time.Second

// checker reads the end state directly (not through the proxies).
type checker struct {
	topo *topology
	db   *pgxpool.Pool
	s3   *blob.Store
	logf func(string, ...any)
}

func newChecker(ctx context.Context, t *topology, logf func(string, ...any)) (*checker, error) {
	db, err := pgxpool.New(ctx, t.dbURL)
	if err != nil {
		return nil, err
	}
	s3, err := blob.New(ctx, t.s3)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &checker{topo: t, db: db, s3: s3, logf: logf}, nil
}

func (c *checker) close() { c.db.Close() }

// waitFinal waits up to bound for every run of ids to be final and
// returns those that are not.
func (c *checker) waitFinal(ctx context.Context, ids []string, bound time.Duration) []string {
	deadline := time.Now().Add(bound)
	for {
		rows, err := c.db.Query(ctx, `select id from runs where id = any($1) and status not in ('pending', 'running')`, ids)
		final := map[string]bool{}
		if err == nil {
			for rows.Next() {
				var id string
				if rows.Scan(&id) == nil {
					final[id] = true
				}
			}
			rows.Close()
		}
		var missing []string
		for _, id := range ids {
			if !final[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return missing
		}
		time.Sleep(2 * time.Second)
	}
}

// run makes every end check and fills rep.
func (c *checker) run(ctx context.Context, rep *Report, gen *loadGen, f *faults, h *hooks, cfg Config) {
	fail := func(format string, args ...any) { rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...)) }

	// What the clients saw.
	var accepted []string
	acceptedBy := map[string]*submission{}
	for _, s := range gen.subs {
		rep.Posted++
		switch {
		case s.accepted:
			rep.Accepted++
			accepted = append(accepted, s.runID)
			acceptedBy[s.runID] = s
			if s.bad {
				fail("invalid event %s/%s was accepted (run %s)", s.tenant, s.eventID, s.runID)
			}
		case s.refused:
			rep.Refused++
			if !s.bad {
				fail("valid event %s/%s refused with %d", s.tenant, s.eventID, s.status)
			}
		default:
			rep.GaveUp++
		}
		if f.overlaps(s.start, s.end) {
			rep.latFault = append(rep.latFault, s.end.Sub(s.start))
		} else {
			rep.latQuiet = append(rep.latQuiet, s.end.Sub(s.start))
		}
	}
	rep.Retries, rep.NetErrors, rep.Statuses = gen.retries, gen.netErrs, gen.answered
	for _, x := range gen.fivexx {
		fail("a %d answer without 503+Retry-After (Retry-After %q) at %s: %s", x.status, x.retryAfter, x.at.Format("15:04:05"), x.body)
	}
	rep.Faults = map[string]int{}
	f.mu.Lock()
	for _, x := range f.list {
		rep.Faults[x.kind]++
	}
	rep.Crashes, rep.CrashWhy = map[string]int{}, map[string]string{}
	for k, v := range f.crashes {
		rep.Crashes[k] = v
		rep.CrashWhy[k] = f.crashWhy[k]
	}
	f.mu.Unlock()

	// Every accepted event's run reaches a final status within Settle.
	missing := c.waitFinal(ctx, accepted, cfg.Settle)
	rep.SettledIn = max(time.Since(rep.FaultEnd), 0)
	if len(missing) > 0 {
		fail("%d accepted runs not final %s after the faults stopped: %v", len(missing), cfg.Settle, head(missing, 10))
	}

	// Exactly one run per accepted event, and the run is the event's.
	type runRow struct {
		id, tenant, session, event, status     string
		archive, archiveSHA, output, outputSHA string
		handoff, handoffSHA                    string
		created, finished                      *time.Time
	}
	rows, err := c.db.Query(ctx, `select r.id, r.tenant_id, r.session_id, r.event_id, r.status, r.archive_key, r.archive_sha256,
		r.output_key, r.output_sha256, coalesce(r.stats->>'handoff_key', ''), coalesce(r.stats->>'handoff_sha256', ''),
		e.created_at, r.finished_at
		from runs r left join events e on e.tenant_id = r.tenant_id and e.event_id = r.event_id`)
	if err != nil {
		fail("read runs: %v", err)
		return
	}
	var runs []runRow
	for rows.Next() {
		var r runRow
		if err := rows.Scan(&r.id, &r.tenant, &r.session, &r.event, &r.status, &r.archive, &r.archiveSHA, &r.output, &r.outputSHA,
			&r.handoff, &r.handoffSHA, &r.created, &r.finished); err != nil {
			fail("scan run: %v", err)
			rows.Close()
			return
		}
		runs = append(runs, r)
	}
	rows.Close()
	rep.Runs = len(runs)
	perEvent := map[string]int{}
	byID := map[string]bool{}
	for _, r := range runs {
		rep.Status = addCount(rep.Status, r.status)
		perEvent[r.tenant+"/"+r.event]++
		byID[r.id] = true
		if _, ok := acceptedBy[r.id]; !ok {
			// A run no client saw accepted: an event whose answer was
			// lost (a timeout) counts as accepted by the server. Only a
			// run for an event the client never sent is wrong.
			if !strings.HasPrefix(r.event, "ev-") {
				fail("run %s for event %s/%s that was never sent valid", r.id, r.tenant, r.event)
			}
			rep.AcceptedUnseen++
		}
		if r.created != nil && r.finished != nil {
			rep.toFinal = append(rep.toFinal, r.finished.Sub(*r.created))
		}
		if r.finished != nil && r.finished.After(rep.FaultEnd) {
			rep.drainOf(r.tenant).add(r.finished.Sub(rep.FaultEnd))
		}
	}
	for ev, n := range perEvent {
		if n > 1 {
			fail("event %s has %d runs", ev, n)
		}
	}
	for _, id := range accepted {
		if !byID[id] {
			fail("accepted run %s (event %s/%s) has no run row", id, acceptedBy[id].tenant, acceptedBy[id].eventID)
		}
	}

	// No event consumed by a refused request.
	for _, s := range gen.subs {
		if !s.refused {
			continue
		}
		var n int
		if err := c.db.QueryRow(ctx, `select (select count(*) from events where tenant_id = $1 and event_id = $2) +
			(select count(*) from runs where tenant_id = $1 and event_id = $2)`, s.tenant, s.eventID).Scan(&n); err != nil {
			fail("refused event %s: %v", s.eventID, err)
		} else if n > 0 {
			fail("refused event %s/%s (%d) was stored", s.tenant, s.eventID, s.status)
		}
	}

	// No duplicate step rows: one successful attempt per step of a run
	// (a retried write of the same attempt is a no-op by the schema).
	var dupSteps int
	if err := c.db.QueryRow(ctx, `select count(*) from (select run_id, name from run_steps where error = ''
		group by run_id, name having count(*) > 1) d`).Scan(&dupSteps); err != nil {
		fail("step duplicates: %v", err)
	}
	rep.DupSteps = dupSteps
	if dupSteps > 0 {
		fail("%d steps have more than one successful step row", dupSteps)
	}

	// Webhook deliveries: one per run, endpoint and event type, and each
	// delivered once the stack is healthy again.
	var dupDeliveries, undelivered int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_ = c.db.QueryRow(ctx, `select count(*) from (select 1 from webhook_deliveries group by endpoint_id, run_id, event_type having count(*) > 1) d`).Scan(&dupDeliveries)
		_ = c.db.QueryRow(ctx, `select count(*) from webhook_deliveries where status <> 'delivered'`).Scan(&undelivered)
		_ = c.db.QueryRow(ctx, `select count(*) from webhook_deliveries`).Scan(&rep.Deliveries)
		if undelivered == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	rep.HooksReceived, rep.HooksRepeated = h.received()
	if dupDeliveries > 0 {
		fail("%d duplicate webhook deliveries", dupDeliveries)
	}
	if undelivered > 0 {
		fail("%d webhook deliveries not delivered 2 minutes after the runs settled", undelivered)
	}

	// Every archive, output and handoff object is in S3 with its
	// recorded SHA-256.
	type obj struct{ run, kind, key, sha string }
	var objs []obj
	for _, r := range runs {
		for _, o := range []obj{{r.id, "archive", r.archive, r.archiveSHA}, {r.id, "output", r.output, r.outputSHA}, {r.id, "handoff", r.handoff, r.handoffSHA}} {
			if o.key != "" {
				objs = append(objs, o)
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan obj)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range ch {
				_, err := c.s3.GetVerified(ctx, o.key, o.sha)
				mu.Lock()
				rep.Objects++
				if err != nil {
					fail("run %s's %s %s: %v", o.run, o.kind, o.key, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, o := range objs {
		ch <- o
	}
	close(ch)
	wg.Wait()

	// Memory back near the quiet level: within twice it (the Go
	// runtime's GOGC=100 lets the heap grow to twice what is live before
	// collecting) plus what the worker's bounded caches hold when full
	// (the blob cache, BLOB_CACHE_MB 64 by default, and the parsed-
	// conversation cache, 32 MB), which a short warm-up does not fill.
	time.Sleep(5 * time.Second)
	rep.End = memory(c.topo)
	for role, q := range rep.Quiet {
		if e := rep.End[role]; q > 0 && e > 2*q+memorySlackKB {
			fail("%s memory %d MB after the soak, quiet level %d MB (bound: twice it + %d MB)", role, e>>10, q>>10, memorySlackKB>>10)
		}
	}
	// The live heap, without GOGC's headroom: back to its quiet level
	// but for the caches. It is the heap as of each process's last
	// collection, and an idle process collects at least every two
	// minutes: read again until it is within the bound, for up to
	// heapSettle. A role whose heap was not read at either time is said
	// so, not passed.
	heapOver := func(end map[string]int64) []string {
		var over []string
		for _, role := range []string{"worker", "api"} {
			q, qok := rep.QuietHeap[role]
			e, eok := end[role]
			switch {
			case !qok || !eok:
				over = append(over, fmt.Sprintf("%s live heap not read (quiet %v, end %v): see the log's \"live heap\" lines", role, qok, eok))
			case e > q+memorySlackKB:
				over = append(over, fmt.Sprintf("%s live heap %d MB after the soak, quiet level %d MB (bound: it + %d MB)", role, e>>10, q>>10, memorySlackKB>>10))
			}
		}
		return over
	}
	heapDeadline := time.Now().Add(heapSettle)
	rep.EndHeap = liveHeap(ctx, c.topo, c.logf)
	for len(heapOver(rep.EndHeap)) > 0 && time.Now().Before(heapDeadline) && ctx.Err() == nil {
		time.Sleep(15 * time.Second)
		rep.EndHeap = liveHeap(ctx, c.topo, c.logf)
	}
	for _, f := range heapOver(rep.EndHeap) {
		fail("%s", f)
	}

	// Every final run's history replays on the workflows of this build.
	// A run not final is reported above, and may have no workflow yet
	// (waiting in its session): drawn into the sample it only said "not
	// found" twice, 3,210 times in the 10,000-event soak.
	var ids []string
	status := map[string]string{}
	for _, r := range runs {
		if r.status == "pending" || r.status == "running" {
			continue
		}
		ids = append(ids, r.id)
		status[r.id] = r.status
	}
	c.replay(ctx, rep, ids, status, cfg.ReplayMax, fail)
}

func addCount(m map[string]int, k string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k]++
	return m
}

// replay fetches each run's Compaction history from the server and
// replays it with the workflows registered as workflows.Register does.
func (c *checker) replay(ctx context.Context, rep *Report, ids []string, status map[string]string, limit int, fail func(string, ...any)) {
	tc, err := client.Dial(client.Options{HostPort: c.topo.temporalAddr, Namespace: c.topo.namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		fail("temporal client: %v", err)
		return
	}
	defer tc.Close()
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Compaction, workflow.RegisterOptions{Name: contract.CompactionWorkflow})
	r.RegisterWorkflowWithOptions(workflows.Session, workflow.RegisterOptions{Name: contract.SessionWorkflow})
	r.RegisterWorkflowWithOptions(workflows.WebhookDelivery, workflow.RegisterOptions{Name: contract.DeliveryWorkflow})
	r.RegisterWorkflowWithOptions(workflows.SessionErasure, workflow.RegisterOptions{Name: contract.EraseWorkflow})
	r.RegisterWorkflowWithOptions(workflows.RetentionSweep, workflow.RegisterOptions{Name: contract.RetentionWorkflow})
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	rep.Workflows = map[string]int{}
	for _, id := range ids {
		err := r.ReplayWorkflowExecution(ctx, tc.WorkflowService(), quiet, c.topo.namespace, workflow.Execution{ID: id})
		rep.Replayed++
		if err != nil {
			fail("replay of run %s: %v", id, err)
		}
		// A run committed as succeeded or over its limit must have a
		// workflow that completed, not one that failed after the commit.
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			fail("describe run %s's workflow: %v", id, err)
			continue
		}
		st := d.WorkflowExecutionInfo.Status
		rep.Workflows[strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"))]++
		if (status[id] == "succeeded" || status[id] == "over_limit") && st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			fail("run %s is %s but its Compaction workflow ended %s", id, status[id], st)
		}
	}
}
