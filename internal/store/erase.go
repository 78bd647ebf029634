package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Erasure is the tombstone of a session's erasure: who asked, when, and
// what went. A session with an unfinished erasure takes no new event.
type Erasure struct {
	ID             string
	Tenant         string
	Session        string
	RequestedBy    string
	RequestedAt    time.Time
	FinishedAt     time.Time // zero while it runs
	Runs           int
	RowsDeleted    int
	ObjectsDeleted int
	ObjectsKept    int
	// DeletedSHA256 are the digests of the objects deleted (their keys
	// name them), never their contents.
	DeletedSHA256 []string
}

const erasureColumns = `id, tenant_id, session_id, requested_by, requested_at, coalesce(finished_at, 'epoch'),
	runs, rows_deleted, objects_deleted, objects_kept, deleted_sha256`

func scanErasure(row pgx.Row) (Erasure, error) {
	var e Erasure
	err := row.Scan(&e.ID, &e.Tenant, &e.Session, &e.RequestedBy, &e.RequestedAt, &e.FinishedAt,
		&e.Runs, &e.RowsDeleted, &e.ObjectsDeleted, &e.ObjectsKept, &e.DeletedSHA256)
	if errors.Is(err, pgx.ErrNoRows) {
		return Erasure{}, ErrNotFound
	}
	if e.FinishedAt.Unix() == 0 {
		e.FinishedAt = time.Time{}
	}
	return e, err
}

// StartErasure records the erasure of tenant's session, asked by
// requestedBy, and returns it; when one is already under way it is
// returned instead (existing). ErrNotFound when the tenant has nothing of
// that session: no run, no offload and no snapshot.
func (s *Store) StartErasure(ctx context.Context, tenant, session, requestedBy string) (e Erasure, existing bool, err error) {
	op := "start erasure of session " + session
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The exclusive side of the session's write lock: a write that
		// checked for an erasure before this one is recorded has
		// committed when the lock is granted, so the erasure sees its
		// rows; a write after it sees the erasure and is refused.
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(`+sessionLockSQL+`)`, tenant, session); err != nil {
			return err
		}
		e, err = scanErasure(tx.QueryRow(ctx, `select `+erasureColumns+` from session_erasures
			where tenant_id = $1 and session_id = $2 and finished_at is null`, tenant, session))
		if err == nil {
			existing = true
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		var known bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from runs where tenant_id = $1 and session_id = $2)
			or exists (select 1 from offloads where tenant_id = $1 and session_id = $2)
			or exists (select 1 from session_snapshots where tenant_id = $1 and session_id = $2)`, tenant, session).Scan(&known); err != nil {
			return err
		}
		if !known {
			return ErrNotFound
		}
		id, err := newID("erase_")
		if err != nil {
			return err
		}
		e, err = scanErasure(tx.QueryRow(ctx, `insert into session_erasures (id, tenant_id, session_id, requested_by)
			values ($1, $2, $3, $4) returning `+erasureColumns, id, tenant, session, Storable(requestedBy)))
		return err
	})
	if err != nil {
		return Erasure{}, false, fmt.Errorf("%s: %w", op, err)
	}
	return e, existing, nil
}

// sessionLockSQL is the key of a session's write lock (tenant $1,
// session $2): writes a caller starts take it shared with their erasure
// check, StartErasure exclusive.
const sessionLockSQL = `hashtextextended($1 || '/' || $2, 11)`

// checkNotErasing takes tenant's session's write lock, shared, for tx and
// returns ErrSessionErasing when an erasure of the session is under way.
func checkNotErasing(ctx context.Context, tx pgx.Tx, tenant, session string) error {
	var erasing bool
	if err := tx.QueryRow(ctx, `select pg_advisory_xact_lock_shared(`+sessionLockSQL+`) is null, `+erasingSQL,
		tenant, session).Scan(nil, &erasing); err != nil {
		return fmt.Errorf("check for an erasure: %w", err)
	}
	if erasing {
		return ErrSessionErasing
	}
	return nil
}

// SessionGoneError is a read of an erased session: its erasure was
// asked for (and may still be under way), and no event has started a new
// generation of the name since.
type SessionGoneError struct{ Erasure Erasure }

func (e *SessionGoneError) Error() string {
	if e.Erasure.FinishedAt.IsZero() {
		return fmt.Sprintf("session %s is being erased (erasure %s, asked at %s)", e.Erasure.Session, e.Erasure.ID,
			e.Erasure.RequestedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("session %s was erased (erasure %s, at %s)", e.Erasure.Session, e.Erasure.ID,
		e.Erasure.FinishedAt.UTC().Format(time.RFC3339))
}

// CheckSessionGone returns a *SessionGoneError when tenant's session is
// erased or being erased, nil for a live session or a name never used.
// Every read of a session asks it first, so that an erased session
// answers with its erasure rather than as a name never used. Under a
// context CheckSessionGoneOnce marked for the same session it answers
// nil at once: the read asked already.
func (s *Store) CheckSessionGone(ctx context.Context, tenant, session string) error {
	if c, ok := ctx.Value(sessionCheckedKey{}).(sessionChecked); ok && c == (sessionChecked{tenant, session}) {
		return nil
	}
	e, err := scanErasure(s.pool.QueryRow(ctx, `select `+erasureColumns+` from session_erasures
		where tenant_id = $1 and session_id = $2
		  and (finished_at is null or not exists (select 1 from sessions where tenant_id = $1 and id = $2))
		order by requested_at desc limit 1`, tenant, session))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check erasure of session %s: %w", session, err)
	}
	return &SessionGoneError{Erasure: e}
}

// sessionCheckedKey marks a context whose read found its session not
// gone (CheckSessionGoneOnce).
type sessionCheckedKey struct{}

// sessionChecked is the session a context's read checked.
type sessionChecked struct{ tenant, session string }

// CheckSessionGoneOnce is CheckSessionGone for a whole read: when the
// session is not gone it returns ctx marked, and every later
// CheckSessionGone of that session under the marked context answers
// without asking Postgres again. A read asks once however many layers
// check (the HTTP API checks a request's session before its handler,
// whose audit reads check it too). On an error ctx comes back unmarked.
func (s *Store) CheckSessionGoneOnce(ctx context.Context, tenant, session string) (context.Context, error) {
	if err := s.CheckSessionGone(ctx, tenant, session); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, sessionCheckedKey{}, sessionChecked{tenant, session}), nil
}

// Generation is the life of a session name: Number 1 for a name never
// erased; after an erasure, the next event starts Number 2, and so on,
// with Previous the erasure before it.
type Generation struct {
	Number   int
	Previous *Erasure
}

// SessionGeneration returns tenant's session's generation; a session with
// no row yet is the generation its first event would start.
func (s *Store) SessionGeneration(ctx context.Context, tenant, session string) (Generation, error) {
	g := Generation{Number: 1}
	err := s.pool.QueryRow(ctx, `select coalesce((select generation from sessions where tenant_id = $1 and id = $2), `+
		generationSQL("$1", "$2")+`)`, tenant, session).Scan(&g.Number)
	if err != nil {
		return Generation{}, fmt.Errorf("read generation of session %s: %w", session, err)
	}
	if g.Number == 1 {
		return g, nil
	}
	e, err := scanErasure(s.pool.QueryRow(ctx, `select `+erasureColumns+` from session_erasures
		where tenant_id = $1 and session_id = $2 and finished_at is not null
		order by finished_at desc limit 1`, tenant, session))
	if err != nil {
		return Generation{}, fmt.Errorf("read the erasure before session %s: %w", session, err)
	}
	g.Previous = &e
	return g, nil
}

// ErrSessionErasing refuses an event for a session whose erasure is under
// way (SubmitRun).
var ErrSessionErasing = errors.New("the session is being erased")

// erasingSQL reports whether tenant's ($1) session ($2) has an erasure
// under way.
const erasingSQL = `exists (select 1 from session_erasures
	where tenant_id = $1 and session_id = $2 and finished_at is null)`

// GetErasure returns tenant's erasure id (ErrNotFound for another
// tenant's).
func (s *Store) GetErasure(ctx context.Context, tenant, id string) (Erasure, error) {
	e, err := scanErasure(s.pool.QueryRow(ctx, `select `+erasureColumns+` from session_erasures
		where tenant_id = $1 and id = $2`, tenant, id))
	if err != nil {
		return Erasure{}, fmt.Errorf("read erasure %s: %w", id, err)
	}
	return e, nil
}

// LiveRuns counts tenant's session's runs that are not final yet.
func (s *Store) LiveRuns(ctx context.Context, tenant, session string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `select count(*) from runs where tenant_id = $1 and session_id = $2
		and status in ('pending', 'running')`, tenant, session).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live runs of session %s: %w", session, err)
	}
	return n, nil
}

// SessionObjects lists what tenant's session holds in S3: the keys its
// runs and offloads name (originals, outputs, handoffs, offloads) and its
// runs' ids (whose prefixes hold any intermediates left).
func (s *Store) SessionObjects(ctx context.Context, tenant, session string) (keys, runs []string, err error) {
	op := "list objects of session " + session
	rows, err := s.pool.Query(ctx, `select id from runs where tenant_id = $1 and session_id = $2 order by id`, tenant, session)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if runs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if keys, err = s.objectKeys(ctx, tenant, runs, session); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return keys, runs, nil
}

// objectKeys lists the keys tenant's runs runIDs name in S3 (originals,
// outputs, handoffs, their offloads) and, when session is not empty, the
// session's offloads: what an erasure or a retention sweep deletes.
func (s *Store) objectKeys(ctx context.Context, tenant string, runIDs []string, session string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		select k from (
			select unnest(array[input_key, archive_key, output_key, stats->>'handoff_key']) as k
				from runs where tenant_id = $1 and id = any($2)
			union select key from offloads where tenant_id = $1 and (run_id = any($2) or session_id = $3)
			union select key from session_snapshots where tenant_id = $1 and session_id = $3
		) x where k is not null and k <> '' order by k`, tenant, runIDs, session)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// EraseSessionRows deletes the rows of tenant's session that hold
// anything of its conversations, through erase_session_rows (the only
// path past the append-only triggers), and returns how many went. Safe to
// repeat.
func (s *Store) EraseSessionRows(ctx context.Context, erasureID, tenant, session string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `select erase_session_rows($1, $2, $3)`, erasureID, tenant, session).Scan(&n); err != nil {
		return 0, fmt.Errorf("erase rows of session %s: %w", session, err)
	}
	return n, nil
}

// ReleaseErasedObject deletes the object at key with del unless a run, an
// offload or a snapshot of tenant still names it (another session holds the same
// bytes); kept reports that. It runs under the key's advisory lock, as a
// claim of the same bytes does (see DiscardInput), so that a concurrent
// submit never ends with a run naming a deleted object.
func (s *Store) ReleaseErasedObject(ctx context.Context, tenant, key string, del func(ctx context.Context) error) (kept bool, err error) {
	op := "release erased object " + key
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, inputLockSQL, key); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if err := tx.QueryRow(ctx, keyNamedSQL, tenant, key).Scan(&kept); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if kept {
		return true, tx.Commit(ctx)
	}
	// A claim of the same bytes that raced this delete writes the
	// object again (see ensureInput), as after a discarded submit.
	if _, err := tx.Exec(ctx, `insert into input_discards (key, tenant_id, discarded) values ($1, $2, true)
		on conflict (key) do update set discarded = true, updated_at = now()`, key, tenant); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if err := del(ctx); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return false, tx.Commit(ctx)
}

// FinishErasure completes tombstone id with what went from S3.
func (s *Store) FinishErasure(ctx context.Context, id string, deleted, kept int, sha256s []string) error {
	if sha256s == nil {
		sha256s = []string{}
	}
	_, err := s.pool.Exec(ctx, `update session_erasures set finished_at = now(), objects_deleted = $2,
		objects_kept = $3, deleted_sha256 = $4 where id = $1 and finished_at is null`, id, deleted, kept, sha256s)
	if err != nil {
		return fmt.Errorf("finish erasure %s: %w", id, err)
	}
	return nil
}
