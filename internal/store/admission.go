package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Admission is what one call of Admit decided.
type Admission struct {
	// Admitted says the run asked about may start: it is admitted (now or
	// before), or it is not waiting at all (already running or final,
	// or unknown to Postgres), so admission has nothing to hold it for.
	Admitted bool
	// Others are the tenant's other runs whose sessions the caller
	// tells, oldest first: the waiting runs this call admitted, and runs
	// admitted earlier that are still pending, each at most once per
	// admitRetell (their session's signal may have been lost with a step
	// whose result was never recorded, and each holds a slot while it
	// is not told).
	Others []AdmittedRun
	// Waited is how long each run this call admitted had waited, from
	// its first ask to now (the run asked about included when admitted
	// now): what the admission wait metric observes, once per run.
	Waited []time.Duration
	// Retold counts the runs named again (admitted before, still
	// pending): each is a session's signal presumed lost.
	Retold int
}

// admitRetell is how often at most an admitted run that is still
// pending is named again. Without it, a signal lost with a crashed or
// timed-out workflow task (the step's retry admits nothing new, so it
// names nobody) left the run to its session's recheck, 30 s doubling to
// 5 minutes, holding one of its tenant's slots all along: in the chaos
// soak a tenant's slots were mostly such runs. Once per period, not at
// every call: naming every such run at every call (the first version)
// sent a session a signal a second while its run's first workflow task
// waited in the task queue behind those very signals' tasks, and the
// slots stayed idle longer. A session told twice ignores the second
// signal.
const admitRetell = 15 * time.Second

// AdmittedRun is a run an Admit call admitted or named again, and its
// session.
type AdmittedRun struct {
	RunID   string
	Session string
}

// admissionLockSQL takes the tenant's admission lock for the rest of the
// transaction: the count of the tenant's runs in flight and the runs it
// admits are read and written by one caller at a time, so that two
// callers cannot both take the last slot. An advisory lock rather than a
// row lock: a lock on the tenant's row would also queue the inserts of
// its sessions and runs behind it (their foreign key checks). Advisory
// locks are the database's, so the key names the schema too: deployments
// (and tests) in other schemas of one database do not wait on each other.
const admissionLockSQL = `select pg_advisory_xact_lock(hashtextextended('ctxcompact.admission/' || current_schema() || '/' || $1, 0))`

// admissionAskSQL marks run $2 as waiting for admission, once: it keeps
// the time it first asked.
const admissionAskSQL = `
	update runs set admission_asked_at = now(), updated_at = now()
	where id = $2 and tenant_id = $1 and status = 'pending' and admission_asked_at is null and admitted_at is null`

// admissionAdmitSQL admits the tenant's oldest waiting runs while fewer
// than $2 are in flight. In flight is running, or pending and admitted: a
// run that becomes final leaves the count in the same update, and a
// running run that never asked (one of before admission, or of a
// deployment without a bound) still counts.
const admissionAdmitSQL = `
	with live as (
		select count(*) as n from runs
		where tenant_id = $1 and (status = 'running' or (status = 'pending' and admitted_at is not null))
	), pick as (
		select id from runs
		where tenant_id = $1 and status = 'pending' and admission_asked_at is not null and admitted_at is null
		order by started_at, id
		limit greatest($2 - (select n from live), 0)
	), admitted as (
		update runs r set admitted_at = now(), updated_at = now()
		from pick where r.id = pick.id
		returning r.id, r.session_id, r.started_at, now() - r.admission_asked_at as waited, false as retold
	), untold as (
		-- Named again at most once per $3: updated_at is when it was
		-- admitted or last named. The statement's snapshot does not see
		-- the runs admitted just above as admitted, so no run is named
		-- twice by one call.
		update runs r set updated_at = now()
		where tenant_id = $1 and status = 'pending' and admitted_at is not null and updated_at < now() - $3::interval
		returning r.id, r.session_id, r.started_at, interval '0' as waited, true as retold
	)
	select id, session_id, waited, retold from (select * from admitted union all select * from untold) named order by started_at, id`

// admissionStateSQL reads where run $2 stands after the admission.
const admissionStateSQL = `select status, admitted_at is not null from runs where id = $2 and tenant_id = $1`

// Admit asks, for run runID of tenant, whether it may start now that it is
// next in its session, with at most bound of the tenant's runs in flight
// (bound < 1: no bound, everything is admitted and nothing is written).
// In one transaction under the tenant's lock it marks the run waiting,
// then admits the tenant's oldest waiting runs (by submission) into the
// free slots, this run or others. Its answer says whether this run is
// admitted and which other runs were, or were and still wait to be
// started (admitRetell), whose sessions the caller tells.
// An empty runID only admits others: what a session does when its run
// ended and nothing else of it waits, so that the freed slot goes on.
//
// It is safe to repeat: a run is admitted once, and a repeated call finds
// it admitted. One round trip (a batch runs as one implicit transaction).
func (s *Store) Admit(ctx context.Context, tenant, runID string, bound int) (Admission, error) {
	op := "admit runs of tenant " + tenant
	if tenant == "" {
		return Admission{}, fmt.Errorf("%s: empty tenant", op)
	}
	if bound < 1 {
		return Admission{Admitted: true}, nil
	}
	b := &pgx.Batch{}
	b.Queue(admissionLockSQL, tenant)
	b.Queue(admissionAskSQL, tenant, runID)
	b.Queue(admissionAdmitSQL, tenant, bound, s.retell)
	b.Queue(admissionStateSQL, tenant, runID)
	br := s.pool.SendBatch(ctx, b)
	var out Admission
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("mark waiting: %w", err)
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("admit: %w", err)
		}
		type named struct {
			run    AdmittedRun
			waited time.Duration
			retold bool
		}
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (named, error) {
			var n named
			return n, row.Scan(&n.run.RunID, &n.run.Session, &n.waited, &n.retold)
		})
		if err != nil {
			return fmt.Errorf("admit: %w", err)
		}
		for _, n := range got {
			if n.retold {
				out.Retold++
			} else {
				out.Waited = append(out.Waited, n.waited)
			}
			if n.run.RunID != runID {
				out.Others = append(out.Others, n.run)
			}
		}
		var status RunStatus
		var isAdmitted bool
		err = br.QueryRow().Scan(&status, &isAdmitted)
		switch {
		case runID == "" || errors.Is(err, pgx.ErrNoRows):
			// Nothing to hold: no run asked, or one Postgres does not
			// know (its plan step creates it).
			out.Admitted = runID != ""
		case err != nil:
			return fmt.Errorf("read run %s: %w", runID, err)
		default:
			out.Admitted = isAdmitted || status != RunPending
		}
		return nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Admission{}, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// AdmissionLoad is where admission stands across every tenant: what the
// worker's admission gauges report at each scrape.
type AdmissionLoad struct {
	// Waiting is the runs that asked and wait for a slot.
	Waiting int
	// InFlight is the runs holding a slot: running, or admitted and
	// still pending.
	InFlight int
	// TenantsWaiting is the tenants with at least one waiting run.
	TenantsWaiting int
	// OldestWait is how long the longest-waiting run has waited (zero
	// when none waits).
	OldestWait time.Duration
}

// admissionLoadSQL reads AdmissionLoad. Each part's filter is its partial
// index's predicate (schema 022), so neither reads the final runs.
const admissionLoadSQL = `
	select w.n, (select count(*) from runs where status = 'running' or (status = 'pending' and admitted_at is not null)), w.tenants, w.oldest
	from (select count(*) as n, count(distinct tenant_id) as tenants, coalesce(now() - min(admission_asked_at), interval '0') as oldest
		from runs where status = 'pending' and admission_asked_at is not null and admitted_at is null) w`

// AdmissionLoad reads where admission stands across every tenant.
func (s *Store) AdmissionLoad(ctx context.Context) (AdmissionLoad, error) {
	var l AdmissionLoad
	if err := s.pool.QueryRow(ctx, admissionLoadSQL).Scan(&l.Waiting, &l.InFlight, &l.TenantsWaiting, &l.OldestWait); err != nil {
		return AdmissionLoad{}, fmt.Errorf("read admission load: %w", err)
	}
	return l, nil
}
