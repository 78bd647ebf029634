package store

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// SetRetention keeps tenant's final runs for days (more than 0) before
// the retention sweep deletes them.
func (s *Store) SetRetention(ctx context.Context, tenant string, days float64) error {
	if !(days > 0) || math.IsInf(days, 0) {
		return fmt.Errorf("set retention of tenant %s: days must be a positive number", tenant)
	}
	_, err := s.pool.Exec(ctx, `
		with t as (insert into tenants (id) values ($1) on conflict do nothing)
		insert into tenant_retention (tenant_id, days) values ($1, $2)
		on conflict (tenant_id) do update set days = excluded.days, updated_at = now()`, tenant, days)
	if err != nil {
		return fmt.Errorf("set retention of tenant %s: %w", tenant, err)
	}
	return nil
}

// UnsetRetention keeps tenant's runs for good again. The row stays with
// no days (the runtime role deletes nothing), which no sweep matches.
func (s *Store) UnsetRetention(ctx context.Context, tenant string) error {
	if _, err := s.pool.Exec(ctx, `update tenant_retention set days = null, updated_at = now() where tenant_id = $1`, tenant); err != nil {
		return fmt.Errorf("unset retention of tenant %s: %w", tenant, err)
	}
	return nil
}

// Retention returns tenant's retention in days; ok is false when it keeps
// its runs for good.
func (s *Store) Retention(ctx context.Context, tenant string) (days float64, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `select days from tenant_retention where tenant_id = $1 and days is not null`, tenant).Scan(&days)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read retention of tenant %s: %w", tenant, err)
	}
	return days, true, nil
}

// ExpiredRun is a final run past its tenant's retention.
type ExpiredRun struct {
	Tenant string
	RunID  string
}

// ExpiredRuns lists up to limit runs past their tenant's retention, oldest
// first (expired_runs).
func (s *Store) ExpiredRuns(ctx context.Context, limit int) ([]ExpiredRun, error) {
	rows, err := s.pool.Query(ctx, `select tenant_id, run_id from expired_runs($1)`, limit)
	if err != nil {
		return nil, fmt.Errorf("list expired runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExpiredRun, error) {
		var e ExpiredRun
		return e, r.Scan(&e.Tenant, &e.RunID)
	})
	if err != nil {
		return nil, fmt.Errorf("list expired runs: %w", err)
	}
	return out, nil
}

// RunObjects lists the keys tenant's runs runIDs name in S3: originals,
// outputs, handoffs and their released offloads.
func (s *Store) RunObjects(ctx context.Context, tenant string, runIDs []string) ([]string, error) {
	keys, err := s.objectKeys(ctx, tenant, runIDs, "")
	if err != nil {
		return nil, fmt.Errorf("list objects of expired runs: %w", err)
	}
	return keys, nil
}

// EraseExpiredRuns deletes the rows of tenant's runs runIDs that are
// still past retention (erase_runs_rows, the only path past the
// append-only triggers), records the batch, and returns the ids deleted.
func (s *Store) EraseExpiredRuns(ctx context.Context, tenant string, runIDs []string) ([]string, error) {
	var gone []string
	if err := s.pool.QueryRow(ctx, `select erase_runs_rows($1, $2)`, tenant, runIDs).Scan(&gone); err != nil {
		return nil, fmt.Errorf("erase expired runs of tenant %s: %w", tenant, err)
	}
	return gone, nil
}

// RecordSweepObjects adds what went from S3 to tenant's latest sweep.
func (s *Store) RecordSweepObjects(ctx context.Context, tenant string, deleted, kept int) error {
	_, err := s.pool.Exec(ctx, `update retention_sweeps set objects_deleted = objects_deleted + $2, objects_kept = objects_kept + $3
		where id = (select max(id) from retention_sweeps where tenant_id = $1)`, tenant, deleted, kept)
	if err != nil {
		return fmt.Errorf("record sweep of tenant %s: %w", tenant, err)
	}
	return nil
}
