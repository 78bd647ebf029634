package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Snapshot is one record of a proxy session's state between compactions
// (schema/026_session_snapshots.sql): the host's messages From..To,
// stored as the object Key, chained to the record of the session whose
// Digest is its Base.
type Snapshot struct {
	Tenant    string
	Session   string
	Seq       int64 // set by the database
	Wire      string
	From, To  int
	Base      string
	Digest    string
	Key       string
	SHA256    string
	Bytes     int64
	CreatedAt time.Time // set by the database
}

// AddSnapshot records s, and its session if new, after put has written
// its object. A record whose base is no record of the session (erased
// with it, or gone under retention) is ErrSnapshotBase, and nothing is
// written. put runs under the object's key lock, shared, so that a
// release of the same bytes (an erasure, a retention sweep) either sees
// the row or has deleted the object before put writes it again; and under
// the session's write lock, so that a session whose erasure was asked for
// takes no new snapshot (ErrSessionErasing).
func (s *Store) AddSnapshot(ctx context.Context, snap Snapshot, put func(ctx context.Context) error) (int64, error) {
	op := "add snapshot of session " + snap.Session
	if err := requireNonEmpty(op, [2]string{"Tenant", snap.Tenant}, [2]string{"Session", snap.Session},
		[2]string{"Key", snap.Key}, [2]string{"Digest", snap.Digest}); err != nil {
		return 0, err
	}
	var seq int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkNotErasing(ctx, tx, snap.Tenant, snap.Session); err != nil {
			return err
		}
		if err := ensureSession(ctx, tx, snap.Tenant, snap.Session); err != nil {
			return err
		}
		if snap.Base != "" {
			// A record extends one of the session's: one erased (with
			// its session) or gone under retention is no base.
			var found bool
			if err := tx.QueryRow(ctx, `select exists (select 1 from session_snapshots
				where tenant_id = $1 and session_id = $2 and digest = $3 and to_message = $4)`,
				snap.Tenant, snap.Session, snap.Base, snap.From-1).Scan(&found); err != nil {
				return err
			}
			if !found {
				return ErrSnapshotBase
			}
		}
		if _, err := tx.Exec(ctx, inputLockSharedSQL, snap.Key); err != nil {
			return err
		}
		if err := put(ctx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			insert into session_snapshots (tenant_id, session_id, wire, from_message, to_message, base, digest, key, sha256, bytes)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning seq`,
			snap.Tenant, snap.Session, snap.Wire, snap.From, snap.To, snap.Base, snap.Digest, snap.Key, snap.SHA256, snap.Bytes).Scan(&seq)
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return seq, nil
}

const snapshotColumns = `tenant_id, session_id, seq, wire, from_message, to_message, base, digest, key, sha256, bytes, created_at`

func scanSnapshot(row pgx.CollectableRow) (Snapshot, error) {
	var s Snapshot
	err := row.Scan(&s.Tenant, &s.Session, &s.Seq, &s.Wire, &s.From, &s.To, &s.Base, &s.Digest, &s.Key, &s.SHA256, &s.Bytes, &s.CreatedAt)
	return s, err
}

// ListSnapshots returns tenant's session's snapshots, oldest first.
func (s *Store) ListSnapshots(ctx context.Context, tenant, session string) ([]Snapshot, error) {
	rows, err := s.pool.Query(ctx, `select `+snapshotColumns+` from session_snapshots
		where tenant_id = $1 and session_id = $2 order by seq`, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("list snapshots of session %s: %w", session, err)
	}
	out, err := pgx.CollectRows(rows, scanSnapshot)
	if err != nil {
		return nil, fmt.Errorf("list snapshots of session %s: %w", session, err)
	}
	return out, nil
}

// SnapshotChain returns tenant's session's snapshot seq and the records
// before it that it extends, the first of its chain first: together they
// hold the conversation as the host sent it then. ErrNotFound when the
// session has no such snapshot (or another tenant's).
func (s *Store) SnapshotChain(ctx context.Context, tenant, session string, seq int64) ([]Snapshot, error) {
	op := fmt.Sprintf("read snapshot %d of session %s", seq, session)
	rows, err := s.pool.Query(ctx, `select `+snapshotColumns+` from session_snapshots
		where tenant_id = $1 and session_id = $2 and seq <= $3 order by seq desc`, tenant, session, seq)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	all, err := pgx.CollectRows(rows, scanSnapshot)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(all) == 0 || all[0].Seq != seq {
		return nil, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	// Walk back from seq: each record extends the newest earlier one
	// whose digest is its base and which ended just before it.
	chain := []Snapshot{all[0]}
	for _, r := range all[1:] {
		c := chain[len(chain)-1]
		if c.From == 1 {
			break
		}
		if r.Digest == c.Base && r.To == c.From-1 {
			chain = append(chain, r)
		}
	}
	slices.Reverse(chain)
	if chain[0].From != 1 {
		// A link that went under retention: what is left is said, not
		// passed off as the whole conversation.
		return chain, fmt.Errorf("%s: %w: the records before message %d are gone (retention)", op, ErrSnapshotIncomplete, chain[0].From)
	}
	return chain, nil
}

// ErrSnapshotBase is a snapshot whose base is no record of its session
// (erased with it, or gone under retention): it must start a chain.
var ErrSnapshotBase = errors.New("snapshot base not recorded")

// ErrSnapshotIncomplete is a snapshot chain whose first records are gone.
var ErrSnapshotIncomplete = errors.New("snapshot incomplete")

// LatestSnapshot is where tenant's session's newest snapshot ended: its
// last message and its digest (0 and "" when it has none).
func (s *Store) LatestSnapshot(ctx context.Context, tenant, session string) (to int, digest string, err error) {
	err = s.pool.QueryRow(ctx, `select to_message, digest from session_snapshots
		where tenant_id = $1 and session_id = $2 order by seq desc limit 1`, tenant, session).Scan(&to, &digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read latest snapshot of session %s: %w", session, err)
	}
	return to, digest, nil
}

// ExpiredSnapshot is an object that snapshots past their tenant's
// retention name.
type ExpiredSnapshot struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
}

// ExpiredSnapshots lists up to limit objects named by snapshots past
// their tenant's retention, oldest first.
func (s *Store) ExpiredSnapshots(ctx context.Context, limit int) ([]ExpiredSnapshot, error) {
	rows, err := s.pool.Query(ctx, `
		select s.tenant_id, s.key from session_snapshots s join tenant_retention t on t.tenant_id = s.tenant_id
		where s.created_at < now() - make_interval(secs => t.days * 86400)
		group by s.tenant_id, s.key order by min(s.created_at), s.key limit $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list expired snapshots: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ExpiredSnapshot])
	if err != nil {
		return nil, fmt.Errorf("list expired snapshots: %w", err)
	}
	return out, nil
}

// ReleaseExpiredSnapshot deletes tenant's snapshot rows naming key that
// are past retention and, when nothing names key any more, the object
// with del, in one transaction under the key's lock: a del that fails
// leaves the rows, for the next sweep. kept says the object stays.
func (s *Store) ReleaseExpiredSnapshot(ctx context.Context, tenant, key string, del func(ctx context.Context) error) (rows int, kept bool, err error) {
	op := "release expired snapshot " + key
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, inputLockSQL, key); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `select erase_expired_snapshots($1, $2)`, tenant, key).Scan(&rows); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, keyNamedSQL, tenant, key).Scan(&kept); err != nil {
			return err
		}
		if kept {
			return nil
		}
		return del(ctx)
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", op, err)
	}
	return rows, kept, nil
}

// keyNamedSQL says whether a row of tenant $1 still names object $2: a
// run (its input, archive, output or handoff), an offload or a snapshot.
const keyNamedSQL = `select exists (select 1 from runs where tenant_id = $1
		and (input_key = $2 or archive_key = $2 or output_key = $2 or stats->>'handoff_key' = $2))
	or exists (select 1 from offloads where tenant_id = $1 and key = $2)
	or exists (select 1 from session_snapshots where tenant_id = $1 and key = $2)`
