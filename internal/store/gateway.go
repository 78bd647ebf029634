package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MinAPIKeyLength is the shortest raw API key AddAPIKey accepts; shorter
// keys are guessable.
const MinAPIKeyLength = 16

// Submission is what SubmitRun did: the run that serves the event
// (Existing when an earlier claim of the same event made it), or a
// Conflict with the run of an earlier claim of another body or session.
type Submission struct {
	RunID    string
	Existing bool
	Conflict bool
	// Generation is the session's: 1 for a name never erased, one more
	// after each erasure; PreviousErasure is the last erasure of the
	// name when Generation is above 1.
	Generation      int
	PreviousErasure *Erasure
}

// SubmitRun claims event r.EventID of r.Tenant for run r.ID, so that a
// duplicate delivery never starts a second run, and records the run,
// pending, with what the caller asked for, in one transaction: the run
// row is the source of truth from the moment the event is accepted. A
// repeat of the same session and body returns the first claim's run
// (recorded again only if missing); the same event id with another body
// or session is a Conflict that writes nothing at all, not even the
// session.
func (s *Store) SubmitRun(ctx context.Context, r Run, bodySHA256 string, restore func(context.Context) error) (Submission, error) {
	op := fmt.Sprintf("submit event %s of tenant %s", r.EventID, r.Tenant)
	if err := requireNonEmpty(op, [2]string{"EventID", r.EventID}, [2]string{"bodySHA256", bodySHA256}); err != nil {
		return Submission{}, err
	}
	if err := checkNewRun(r); err != nil {
		return Submission{}, fmt.Errorf("%s: %w", op, err)
	}
	runArgs, err := runInsertArgs(r)
	if err != nil {
		return Submission{}, fmt.Errorf("%s: %w", op, err)
	}
	sub := Submission{RunID: r.ID}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The original's lock and discard check and the claim go in one
		// round trip; a discarded original is written again before the
		// transaction commits, under the lock the first statement took.
		b := &pgx.Batch{}
		// Nothing new lands in a session that is being erased; checked in
		// the claim's own round trip, under the session's write lock
		// (see StartErasure).
		erasing := false
		b.Queue(`select pg_advisory_xact_lock_shared(`+sessionLockSQL+`) is null, `+erasingSQL, r.Tenant, r.Session).
			QueryRow(func(row pgx.Row) error { return row.Scan(nil, &erasing) })
		discarded := false
		if r.InputKey != "" {
			b.Queue(inputLockSharedSQL+`, coalesce((select discarded from input_discards where key = $1), false)`,
				r.InputKey).QueryRow(func(row pgx.Row) error { return row.Scan(nil, &discarded) })
		}
		var inserted string
		var insertErr error
		b.Queue(claimSQL, r.Tenant, r.EventID, r.Session, bodySHA256, r.ID).QueryRow(func(row pgx.Row) error {
			insertErr = row.Scan(&inserted)
			return nil
		})
		// The run's row, in the same round trip, when the claim just made
		// is this run's (a repeat's run is recorded below, if missing).
		recorded := false
		b.Queue(runInsertSQL(`exists (select 1 from events where tenant_id = $2 and session_id = $3 and event_id = $4 and run_id = $1)`),
			runArgs...).Exec(func(tag pgconn.CommandTag) error {
			recorded = tag.RowsAffected() == 1
			return nil
		})
		// The session's generation, in the same round trip: a name taken
		// again after its erasure is told so.
		var prevID string
		var prevAt time.Time
		b.Queue(`select s.generation, coalesce(e.id, ''), coalesce(e.finished_at, 'epoch') from sessions s
			left join lateral (select id, finished_at from session_erasures
				where tenant_id = s.tenant_id and session_id = s.id and finished_at is not null
				order by finished_at desc limit 1) e on s.generation > 1
			where s.tenant_id = $1 and s.id = $2`, r.Tenant, r.Session).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&sub.Generation, &prevID, &prevAt); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			if erasing {
				return ErrSessionErasing // what the first statement found comes first
			}
			return fmt.Errorf("lock original and claim: %w", err)
		}
		if prevID != "" {
			sub.PreviousErasure = &Erasure{ID: prevID, Tenant: r.Tenant, Session: r.Session, FinishedAt: prevAt}
		}
		if erasing {
			return ErrSessionErasing // rolls the claim back
		}
		if discarded {
			if err := restoreInput(ctx, tx, r.InputKey, restore); err != nil {
				return err
			}
		}
		existing, err := claimed(ctx, tx, insertErr, r.Tenant, r.Session, r.EventID, bodySHA256)
		if err != nil {
			return err
		}
		if existing != "" {
			sub.RunID, sub.Existing = existing, true
			r.ID = existing
		} else if recorded {
			return nil
		}
		_, err = createRun(ctx, tx, r)
		return err
	})
	var conflict *claimConflictError
	if errors.As(err, &conflict) {
		return Submission{RunID: conflict.run, Conflict: true}, nil
	}
	if isUniqueViolation(err, baseIndex) {
		return Submission{}, s.baseHeld(ctx, r.Tenant, r.Session, r.BaseRunID)
	}
	if err != nil {
		return Submission{}, fmt.Errorf("%s: %w", op, err)
	}
	return sub, nil
}

// baseIndex is the unique index that lets one live run extend a base
// (migration 023).
const baseIndex = "runs_one_extension_per_base"

// BaseHeldError refuses an incremental event whose base another live
// run (RunID: pending, running or committed) already extends: two
// outputs from one base would each hold one delta, and one of them
// would be lost.
type BaseHeldError struct {
	Base  string
	RunID string
}

func (e *BaseHeldError) Error() string {
	return fmt.Sprintf("the output of run %s is already continued by run %s: continue from that run's output", e.Base, e.RunID)
}

// baseHeld is the error of a claim the base index refused: it names the
// run that holds base.
func (s *Store) baseHeld(ctx context.Context, tenant, session, base string) error {
	holder, err := s.BaseExtension(ctx, tenant, session, base)
	if err != nil {
		return err
	}
	return &BaseHeldError{Base: base, RunID: holder}
}

// BaseExtension is the live run (pending, running or committed) of
// tenant's session that continues the output of run base, or "" when
// none does. base is the caller's word: only that session's runs are
// looked at, so no other tenant's run is ever named.
func (s *Store) BaseExtension(ctx context.Context, tenant, session, base string) (string, error) {
	var holder string
	err := s.pool.QueryRow(ctx, `select id from runs
		where tenant_id = $2 and session_id = $3 and base_run_id = $1 and status <> 'failed' limit 1`,
		base, tenant, session).Scan(&holder)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read the run that continues %s: %w", base, err)
	}
	return holder, nil
}

// inputLockSQL takes key's advisory lock for the transaction: shared by
// claims, exclusive for DiscardInput.
const (
	inputLockSharedSQL = `select pg_advisory_xact_lock_shared(hashtextextended($1, 7))`
	inputLockSQL       = `select pg_advisory_xact_lock(hashtextextended($1, 7))`
)

// restoreInput writes again, in a claim's transaction, the original key a
// failed submit discarded, before the claim commits. The shared lock the
// claim took keeps any new discard of the key out until then.
func restoreInput(ctx context.Context, tx pgx.Tx, key string, restore func(context.Context) error) error {
	if restore == nil {
		return fmt.Errorf("original %s was discarded and cannot be written again here", key)
	}
	if err := restore(ctx); err != nil {
		return fmt.Errorf("write discarded original %s again: %w", key, err)
	}
	if _, err := tx.Exec(ctx, `update input_discards set discarded = false, updated_at = now() where key = $1`, key); err != nil {
		return fmt.Errorf("record original %s written again: %w", key, err)
	}
	return nil
}

// DiscardInput deletes (with del) the original key a failed submit of
// tenant stored, unless a run refers to it. It reports whether it was
// deleted. The key's exclusive lock keeps claims of the same bytes out
// while it decides, and the record it leaves makes a claim that raced it
// write the object again (see ensureInput).
func (s *Store) DiscardInput(ctx context.Context, tenant, key string, del func(context.Context) error) (bool, error) {
	deleted := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var used bool
		if err := tx.QueryRow(ctx, inputLockSQL+`, exists(select 1 from runs where tenant_id = $2 and (input_key = $1 or archive_key = $1))`,
			key, tenant).Scan(nil, &used); err != nil {
			return err
		}
		if used {
			return nil
		}
		if _, err := tx.Exec(ctx, `
			insert into input_discards (key, tenant_id, discarded) values ($1, $2, true)
			on conflict (key) do update set discarded = true, updated_at = now()`, key, tenant); err != nil {
			return err
		}
		if err := del(ctx); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("discard original %s: %w", key, err)
	}
	return deleted, nil
}

// claimConflictError rolls back the transaction of a conflicting claim;
// run is the first claim's run.
type claimConflictError struct{ run string }

func (e *claimConflictError) Error() string {
	return "event claimed with another request (run " + e.run + ")"
}

// claimSQL creates the tenant and session when missing and claims the
// event, in one statement (foreign keys are checked at its end); it
// returns the run id when this claim inserted the event.
var claimSQL = `
	with tenant as (insert into tenants (id) values ($1) on conflict do nothing),
	session as (insert into sessions (tenant_id, id, generation) values ($1, $3, ` + generationSQL("$1", "$3") + `) on conflict do nothing)
	insert into events (tenant_id, event_id, session_id, body_sha256, run_id)
	values ($1, $2, $3, $4, $5)
	on conflict (tenant_id, session_id, event_id) do nothing
	returning run_id`

// claimed reads the outcome of claimSQL in tx (err is its scan's error).
// It returns "" when this claim is the first, the first claim's run id
// for a repeat of the same body, and a *claimConflictError for the same
// event id of the session with another body.
func claimed(ctx context.Context, tx pgx.Tx, err error, tenant, session, eventID, bodySHA256 string) (string, error) {
	if err == nil {
		return "", nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("insert: %w", err)
	}
	var storedBody, storedRun string
	err = tx.QueryRow(ctx, `select body_sha256, run_id from events where tenant_id = $1 and session_id = $2 and event_id = $3`,
		tenant, session, eventID).Scan(&storedBody, &storedRun)
	if err != nil {
		return "", fmt.Errorf("read first claim: %w", err)
	}
	if storedBody != bodySHA256 {
		// Roll back: a refused event leaves no session row behind.
		return "", &claimConflictError{run: storedRun}
	}
	return storedRun, nil
}

// hashAPIKey is the stored form of a raw key: hex sha256. Keys are random
// and long, so a fast unsalted hash is enough and allows lookup by hash.
func hashAPIKey(rawKey string) string {
	sum := sha256.Sum256([]byte(rawKey))
	return hex.EncodeToString(sum[:])
}

// AddAPIKey stores the hash of rawKey as a key of tenant, creating the
// tenant if new. Adding the same key to the same tenant again is a no-op;
// a key that belongs to another tenant is an error. The raw key is never
// stored nor printed.
func (s *Store) AddAPIKey(ctx context.Context, tenant, rawKey string) error {
	op := "add api key for tenant " + tenant
	if err := requireNonEmpty(op, [2]string{"tenant", tenant}); err != nil {
		return err
	}
	if len(rawKey) < MinAPIKeyLength {
		return fmt.Errorf("%s: key shorter than %d characters", op, MinAPIKeyLength)
	}
	hash := hashAPIKey(rawKey)
	var owner string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `insert into tenants (id) values ($1) on conflict do nothing`, tenant); err != nil {
			return fmt.Errorf("upsert tenant: %w", err)
		}
		if _, err := tx.Exec(ctx, `insert into api_keys (key_hash, tenant_id) values ($1, $2) on conflict do nothing`,
			hash, tenant); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return tx.QueryRow(ctx, `select tenant_id from api_keys where key_hash = $1`, hash).Scan(&owner)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if owner != tenant {
		return fmt.Errorf("%s: key already belongs to another tenant", op)
	}
	return nil
}

// RevokeAPIKey revokes rawKey. It reports whether a live key was revoked;
// an unknown or already revoked key returns false without error.
func (s *Store) RevokeAPIKey(ctx context.Context, rawKey string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `update api_keys set revoked_at = now() where key_hash = $1 and revoked_at is null`,
		hashAPIKey(rawKey))
	if err != nil {
		return false, fmt.Errorf("revoke api key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// TenantForKey returns the tenant owning the live key rawKey; ok is false
// when the key is unknown or revoked.
func (s *Store) TenantForKey(ctx context.Context, rawKey string) (string, bool, error) {
	if rawKey == "" {
		return "", false, nil
	}
	var tenant string
	err := s.pool.QueryRow(ctx, `select tenant_id from api_keys where key_hash = $1 and revoked_at is null`,
		hashAPIKey(rawKey)).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("look up api key: %w", err)
	}
	return tenant, true, nil
}
