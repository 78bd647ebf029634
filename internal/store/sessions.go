package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Offload records a tool result moved out of the conversation into object
// storage, replaced by a reference.
type Offload struct {
	Tenant    string
	Session   string
	RunID     string // the run that offloaded it, "" if none
	Key       string // object key of the offloaded content
	ToolID    string
	ToolName  string
	Tokens    int
	SHA256    string
	CreatedAt time.Time // set by the database
	DeletedAt time.Time // zero while the object is live
}

// AddOffload records an offload, and its tenant and session if new. While
// the key is live in the session a second call is a no-op; after the key was
// marked deleted, the same key may be offloaded again as a new record.
func (s *Store) AddOffload(ctx context.Context, o Offload) error {
	op := fmt.Sprintf("add offload %s", o.Key)
	if err := requireNonEmpty(op, [2]string{"Tenant", o.Tenant}, [2]string{"Session", o.Session}, [2]string{"Key", o.Key}); err != nil {
		return err
	}
	if o.Tokens < 0 {
		return fmt.Errorf("%s: negative tokens %d", op, o.Tokens)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A caller's own offload (results:compress, no run) is a new
		// write to the session: refused once its erasure is asked for.
		// A run's offloads are not: the erasure waits for the run.
		if o.RunID == "" {
			if err := checkNotErasing(ctx, tx, o.Tenant, o.Session); err != nil {
				return err
			}
		}
		if err := ensureSession(ctx, tx, o.Tenant, o.Session); err != nil {
			return err
		}
		// Serialized with ReleaseOffloads on the same object: a release
		// either sees this row or finishes its delete before it exists.
		if err := lockOffloadKeys(ctx, tx, o.Tenant, []string{o.Key}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			insert into offloads (tenant_id, session_id, run_id, key, tool_id, tool_name, tokens, sha256)
			values ($1, $2, $3, $4, $5, $6, $7, $8)
			on conflict (tenant_id, session_id, key) where deleted_at is null do nothing`,
			o.Tenant, o.Session, nullIfEmpty(o.RunID), o.Key, o.ToolID, o.ToolName, o.Tokens, o.SHA256)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// ListOffloads returns the offloads of a session, oldest first; deleted ones
// only when includeDeleted is true.
func (s *Store) ListOffloads(ctx context.Context, tenant, session string, includeDeleted bool) ([]Offload, error) {
	rows, err := s.pool.Query(ctx, `
		select tenant_id, session_id, coalesce(run_id, ''), key, tool_id, tool_name, tokens, sha256,
			created_at, deleted_at
		from offloads
		where tenant_id = $1 and session_id = $2 and ($3 or deleted_at is null)
		order by created_at, id`, tenant, session, includeDeleted)
	if err != nil {
		return nil, fmt.Errorf("list offloads of %s/%s: %w", tenant, session, err)
	}
	offloads, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Offload, error) {
		var o Offload
		var deleted *time.Time
		err := row.Scan(&o.Tenant, &o.Session, &o.RunID, &o.Key, &o.ToolID, &o.ToolName, &o.Tokens, &o.SHA256,
			&o.CreatedAt, &deleted)
		o.CreatedAt = o.CreatedAt.UTC()
		if deleted != nil {
			o.DeletedAt = deleted.UTC()
		}
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list offloads of %s/%s: %w", tenant, session, err)
	}
	return offloads, nil
}

// MarkOffloadsDeleted records that the objects under keys were deleted. Rows
// are kept for audit. It returns how many live offloads it marked; keys
// already marked or unknown are skipped, so a retry returns 0.
func (s *Store) MarkOffloadsDeleted(ctx context.Context, tenant, session string, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		update offloads set deleted_at = now()
		where tenant_id = $1 and session_id = $2 and key = any($3) and deleted_at is null`,
		tenant, session, keys)
	if err != nil {
		return 0, fmt.Errorf("mark %d offloads of %s/%s deleted: %w", len(keys), tenant, session, err)
	}
	return int(tag.RowsAffected()), nil
}

// LiveOffloads reports which of keys are live offloads of the session:
// what a run may treat as a reference. Anything else a conversation names
// is ordinary text, whatever it looks like.
func (s *Store) LiveOffloads(ctx context.Context, tenant, session string, keys []string) (map[string]bool, error) {
	live := map[string]bool{}
	if len(keys) == 0 {
		return live, nil
	}
	rows, err := s.pool.Query(ctx, `
		select distinct key from offloads
		where tenant_id = $1 and session_id = $2 and key = any($3) and deleted_at is null`, tenant, session, keys)
	if err != nil {
		return nil, fmt.Errorf("live offloads of %s/%s: %w", tenant, session, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("live offloads of %s/%s: %w", tenant, session, err)
	}
	for _, k := range found {
		live[k] = true
	}
	return live, nil
}

// ReleaseOffloads marks the session's live offloads under keys deleted and,
// in the same transaction, calls del for every key that no live offload of
// the tenant (another session, results:compress) still refers to; a key
// the session never recorded is never deleted. A lock
// per key, shared with AddOffload, makes the decision and the delete one
// step: no offload can be recorded for an object between the check and its
// deletion. If del fails nothing is marked, and a retry starts over. It
// returns how many rows it marked and which objects it deleted.
func (s *Store) ReleaseOffloads(ctx context.Context, tenant, session string, keys []string,
	del func(ctx context.Context, key string) error) (int, []string, error) {
	if len(keys) == 0 {
		return 0, nil, nil
	}
	op := fmt.Sprintf("release %d offloads of %s/%s", len(keys), tenant, session)
	var marked int
	var deleted []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		marked, deleted = 0, nil
		if err := lockOffloadKeys(ctx, tx, tenant, keys); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			update offloads set deleted_at = now()
			where tenant_id = $1 and session_id = $2 and key = any($3) and deleted_at is null`,
			tenant, session, keys)
		if err != nil {
			return err
		}
		marked = int(tag.RowsAffected())
		rows, err := tx.Query(ctx, `
			select k from unnest($3::text[]) as k
			where exists (select 1 from offloads o where o.tenant_id = $1 and o.session_id = $2 and o.key = k)
			and not exists (select 1 from offloads o where o.tenant_id = $1 and o.key = k and o.deleted_at is null)
			order by k`, tenant, session, keys)
		if err != nil {
			return err
		}
		free, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, k := range free {
			if err := del(ctx, k); err != nil {
				return fmt.Errorf("delete %s: %w", k, err)
			}
			deleted = append(deleted, k)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", op, err)
	}
	return marked, deleted, nil
}

// lockOffloadKeys takes a transaction lock per offload object, in key
// order so that two transactions never wait on each other in a cycle.
func lockOffloadKeys(ctx context.Context, tx pgx.Tx, tenant string, keys []string) error {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for _, k := range slices.Compact(sorted) {
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended($1, 0))`, "offload:"+tenant+"/"+k); err != nil {
			return fmt.Errorf("lock offload %s: %w", k, err)
		}
	}
	return nil
}

// Watermark is a checkpoint of a session (the watermark design): every tool_use and
// tool_result block before the tool_use with id ToolUseID is pruned.
type Watermark struct {
	Tenant    string
	Session   string
	ToolUseID string
	RunID     string
	At        time.Time
}

// GetWatermark returns the current watermark tool_use id of a session, or ""
// if none was ever set.
func (s *Store) GetWatermark(ctx context.Context, tenant, session string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `select tool_use_id from watermarks where tenant_id = $1 and session_id = $2`,
		tenant, session).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get watermark of %s/%s: %w", tenant, session, err)
	}
	return id, nil
}

// SetWatermark advances the watermark of a session to toolUseID and appends
// it to the session's watermark history. A watermark only moves forward and
// tool_use ids are unique within a conversation, so a toolUseID the session
// already had is a retry: nothing changes, even if the watermark has moved
// on since.
func (s *Store) SetWatermark(ctx context.Context, tenant, session, toolUseID, runID string) error {
	op := fmt.Sprintf("set watermark of %s/%s to %s", tenant, session, toolUseID)
	if err := requireNonEmpty(op, [2]string{"tenant", tenant}, [2]string{"session", session}, [2]string{"toolUseID", toolUseID}); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return setWatermark(ctx, tx, tenant, session, toolUseID, runID)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// ListWatermarks returns every watermark a session had, oldest first.
func (s *Store) ListWatermarks(ctx context.Context, tenant, session string) ([]Watermark, error) {
	rows, err := s.pool.Query(ctx, `
		select tenant_id, session_id, tool_use_id, run_id, created_at
		from watermark_history where tenant_id = $1 and session_id = $2
		order by seq`, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("list watermarks of %s/%s: %w", tenant, session, err)
	}
	marks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Watermark, error) {
		var w Watermark
		err := row.Scan(&w.Tenant, &w.Session, &w.ToolUseID, &w.RunID, &w.At)
		w.At = w.At.UTC()
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list watermarks of %s/%s: %w", tenant, session, err)
	}
	return marks, nil
}

// setWatermark is SetWatermark inside tx.
func setWatermark(ctx context.Context, tx pgx.Tx, tenant, session, toolUseID, runID string) error {
	if err := ensureSession(ctx, tx, tenant, session); err != nil {
		return err
	}
	// One statement, so the history row and the current value move
	// together; the current value moves only if the history row is new.
	_, err := tx.Exec(ctx, `
		with h as (
			insert into watermark_history (tenant_id, session_id, tool_use_id, run_id)
			values ($1, $2, $3, $4)
			on conflict do nothing
			returning 1
		)
		insert into watermarks (tenant_id, session_id, tool_use_id, run_id)
		select $1, $2, $3, $4 where exists (select 1 from h)
		on conflict (tenant_id, session_id) do update
			set tool_use_id = excluded.tool_use_id, run_id = excluded.run_id, updated_at = now()`,
		tenant, session, toolUseID, runID)
	return err
}
