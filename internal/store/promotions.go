package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Promotion records that a replay became its session's state: the agent
// continues from the replay's output, and the session's watermark moved
// to the one the replay reached (Watermark, "" when it reached none).
type Promotion struct {
	Tenant     string    `json:"tenant"`
	Session    string    `json:"session"`
	RunID      string    `json:"run_id"`
	ReplayOf   string    `json:"replay_of"`
	Watermark  string    `json:"watermark,omitempty"`
	PromotedBy string    `json:"promoted_by,omitempty"`
	PromotedAt time.Time `json:"promoted_at"`
}

// PromoteError says why a replay cannot be promoted; Field names what is
// wrong ("run": the replay, "replay_of": its original, "session").
type PromoteError struct {
	Field  string
	Reason string
}

func (e *PromoteError) Error() string { return e.Field + ": " + e.Reason }

// Promote makes replay runID of tenant its session's state, once: the
// replay must have succeeded where its original failed or ended over its
// limit, and no run of the session may have committed since the
// original (the agent has moved on from it). Promoting a promoted replay
// again answers the first promotion with fresh false. A replay that
// reached a watermark moves the session's watermark to it in the same
// transaction.
func (s *Store) Promote(ctx context.Context, tenant, runID, by string) (p Promotion, fresh bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		replay, err := scanRun(tx.QueryRow(ctx, `select `+runColumns+` from runs where id = $1 and tenant_id = $2`, runID, tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read run %s: %w", runID, err)
		}
		if replay.ReplayOf == "" {
			return &PromoteError{Field: "run", Reason: fmt.Sprintf("run %s is not a replay; only a replay can be promoted", runID)}
		}
		// The original's row lock serializes promotions of its replays.
		orig, err := scanRun(tx.QueryRow(ctx, `select `+runColumns+` from runs where id = $1 for update`, replay.ReplayOf))
		if err != nil {
			return fmt.Errorf("read run %s: %w", replay.ReplayOf, err)
		}
		p, err = promotionOf(ctx, tx, replay.ReplayOf)
		switch {
		case err == nil && p.RunID == runID:
			return nil
		case err == nil:
			return &PromoteError{Field: "replay_of", Reason: fmt.Sprintf("run %s was already repaired by replay %s", orig.ID, p.RunID)}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if err := promotable(ctx, tx, replay, orig); err != nil {
			return err
		}
		stats, err := replay.ParseStats()
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `
			insert into promotions (tenant_id, session_id, run_id, replay_of, watermark, promoted_by)
			values ($1, $2, $3, $4, $5, $6) returning promoted_at`,
			tenant, replay.Session, runID, orig.ID, stats.Watermark, by).Scan(&p.PromotedAt)
		if err != nil {
			return fmt.Errorf("record promotion of %s: %w", runID, err)
		}
		p = Promotion{Tenant: tenant, Session: replay.Session, RunID: runID, ReplayOf: orig.ID,
			Watermark: stats.Watermark, PromotedBy: by, PromotedAt: p.PromotedAt}
		fresh = true
		if stats.Watermark == "" {
			return nil
		}
		return setWatermark(ctx, tx, tenant, replay.Session, stats.Watermark, runID)
	})
	if err != nil {
		return Promotion{}, false, fmt.Errorf("promote %s: %w", runID, err)
	}
	return p, fresh, nil
}

// promotable checks that replay repairs orig and that the session has not
// moved on since orig.
func promotable(ctx context.Context, tx pgx.Tx, replay, orig Run) error {
	if !replay.Status.Final() {
		// A live replay may yet fail: promoting it now would make the
		// session's state a run that has no output. The operator waits
		// for it (GET /v1/runs/{run}?wait=) and promotes it then; its
		// run.promoted still follows its run.succeeded (see
		// PrecedingDelivery).
		return &PromoteError{Field: "run", Reason: fmt.Sprintf("replay %s is %s; wait until it succeeded, then promote it", replay.ID, replay.Status)}
	}
	if replay.Status != RunSucceeded {
		return &PromoteError{Field: "run", Reason: fmt.Sprintf("replay %s is %s; only a replay that succeeded can be promoted", replay.ID, replay.Status)}
	}
	if orig.Status != RunFailed && orig.Status != RunOverLimit {
		return &PromoteError{Field: "replay_of", Reason: fmt.Sprintf("run %s is %s; a promotion repairs a failed or over_limit run", orig.ID, orig.Status)}
	}
	var later string
	err := tx.QueryRow(ctx, `
		select id from runs
		where tenant_id = $1 and session_id = $2 and replay_of is null and id <> $3
		  and started_at > $4 and status in ('succeeded', 'over_limit')
		order by started_at limit 1`,
		orig.Tenant, orig.Session, orig.ID, orig.StartedAt).Scan(&later)
	if err == nil {
		return &PromoteError{Field: "session", Reason: fmt.Sprintf("run %s of the session committed after run %s; the agent has moved on from it", later, orig.ID)}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look for later runs: %w", err)
	}
	return nil
}

// promotionOf reads the promotion of original run origID (pgx.ErrNoRows:
// none).
func promotionOf(ctx context.Context, tx pgx.Tx, origID string) (Promotion, error) {
	var p Promotion
	err := tx.QueryRow(ctx, `
		select tenant_id, session_id, run_id, replay_of, watermark, promoted_by, promoted_at
		from promotions where replay_of = $1`, origID).
		Scan(&p.Tenant, &p.Session, &p.RunID, &p.ReplayOf, &p.Watermark, &p.PromotedBy, &p.PromotedAt)
	return p, err
}

// Promotions lists the promotions of a session, oldest first.
func (s *Store) Promotions(ctx context.Context, tenant, session string) ([]Promotion, error) {
	rows, err := s.pool.Query(ctx, `
		select tenant_id, session_id, run_id, replay_of, watermark, promoted_by, promoted_at
		from promotions where tenant_id = $1 and session_id = $2 order by promoted_at, run_id`, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("list promotions of %s/%s: %w", tenant, session, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Promotion, error) {
		var p Promotion
		err := row.Scan(&p.Tenant, &p.Session, &p.RunID, &p.ReplayOf, &p.Watermark, &p.PromotedBy, &p.PromotedAt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list promotions of %s/%s: %w", tenant, session, err)
	}
	return out, nil
}

// WatermarkSeenBy is the watermark the session had when run runID
// started: what a replay of it prunes against, rather than whatever the
// session reached since. Runs of a session run one at a time, so the
// last watermark recorded before the run started is the one it read.
func (s *Store) WatermarkSeenBy(ctx context.Context, tenant, session, runID string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `
		select h.tool_use_id from watermark_history h
		where h.tenant_id = $1 and h.session_id = $2
		  and h.created_at < (select started_at from runs where id = $3 and tenant_id = $1)
		order by h.seq desc limit 1`, tenant, session, runID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("watermark seen by run %s: %w", runID, err)
	}
	return id, nil
}

// SessionExists reports whether tenant has a session named session (one
// that an event or a watermark created, and no erasure removed).
func (s *Store) SessionExists(ctx context.Context, tenant, session string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `select exists (select 1 from sessions where tenant_id = $1 and id = $2)`, tenant, session).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up session %s/%s: %w", tenant, session, err)
	}
	return ok, nil
}

// RunPromotions are the promotions that concern some runs, looked up
// both ways: Of[replay] is the promotion of a promoted replay, and
// RepairedBy[original] the promotion of the replay that repaired an
// original. A promoted replay is its session's state; the original it
// repaired no longer is (its output was replaced), so readers that add
// up a session's life (status, overview, export) count the replay in
// its place, never both.
type RunPromotions struct {
	Of         map[string]Promotion
	RepairedBy map[string]Promotion
}

// Promoted reports whether run id is a promoted replay.
func (p RunPromotions) Promoted(id string) bool { _, ok := p.Of[id]; return ok }

// Superseded reports whether run id is an original that a promoted
// replay repaired.
func (p RunPromotions) Superseded(id string) bool { _, ok := p.RepairedBy[id]; return ok }

// SessionState reports whether run r counts as its session's state: a
// run that is not a replay and that no promoted replay superseded, or a
// promoted replay. A replay that was not promoted is a what-if.
func (p RunPromotions) SessionState(r Run) bool {
	if r.ReplayOf != "" {
		return p.Promoted(r.ID)
	}
	return !p.Superseded(r.ID)
}

// PromotionsOf returns the promotions of tenant that concern runIDs, as
// promoted replays or as repaired originals.
func (s *Store) PromotionsOf(ctx context.Context, tenant string, runIDs []string) (RunPromotions, error) {
	out := RunPromotions{Of: map[string]Promotion{}, RepairedBy: map[string]Promotion{}}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		select tenant_id, session_id, run_id, replay_of, watermark, promoted_by, promoted_at
		from promotions where tenant_id = $1 and (run_id = any($2) or replay_of = any($2))`, tenant, runIDs)
	if err != nil {
		return out, fmt.Errorf("look up promotions of tenant %s: %w", tenant, err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Promotion, error) {
		var p Promotion
		err := row.Scan(&p.Tenant, &p.Session, &p.RunID, &p.ReplayOf, &p.Watermark, &p.PromotedBy, &p.PromotedAt)
		return p, err
	})
	if err != nil {
		return out, fmt.Errorf("look up promotions of tenant %s: %w", tenant, err)
	}
	for _, p := range ps {
		out.Of[p.RunID], out.RepairedBy[p.ReplayOf] = p, p
	}
	return out, nil
}

// SessionPromotions is Promotions as RunPromotions.
func SessionPromotions(ps []Promotion) RunPromotions {
	out := RunPromotions{Of: map[string]Promotion{}, RepairedBy: map[string]Promotion{}}
	for _, p := range ps {
		out.Of[p.RunID], out.RepairedBy[p.ReplayOf] = p, p
	}
	return out
}

// PrecedingDelivery is the delivery that must reach promoted's endpoint
// before promoted, a run.promoted delivery: the same run's final event
// (event, "run.<status>") to the same endpoint. It is recorded now when
// missing (the run ended before the endpoint was registered, or before
// its own delivery workflow prepared it), so that an endpoint never
// hears of a promotion before the run's final state, whichever of the
// run's delivery and the promotion is prepared first.
func (s *Store) PrecedingDelivery(ctx context.Context, promoted Delivery, event string) (Delivery, error) {
	op := "delivery before " + promoted.ID
	id, err := newID("msg_")
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", op, err)
	}
	_, err = s.pool.Exec(ctx, `insert into webhook_deliveries (id, tenant_id, endpoint_id, run_id, event_type)
		values ($1, $2, $3, $4, $5) on conflict (endpoint_id, run_id, event_type) do nothing`,
		id, promoted.Tenant, promoted.EndpointID, promoted.RunID, event)
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", op, err)
	}
	ds, err := s.deliveries(ctx, `where d.endpoint_id = $1 and d.run_id = $2 and d.event_type = $3`, promoted.EndpointID, promoted.RunID, event)
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", op, err)
	}
	if len(ds) != 1 {
		return Delivery{}, fmt.Errorf("%s: %d deliveries of %s", op, len(ds), event)
	}
	return ds[0], nil
}
