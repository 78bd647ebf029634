package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// GetRunForTenant returns run id if it belongs to tenant. A run of another
// tenant is reported exactly like a missing one, an error wrapping
// ErrNotFound, so that a caller cannot learn that it exists.
func (s *Store) GetRunForTenant(ctx context.Context, tenant, id string) (Run, error) {
	if err := requireNonEmpty("get run", [2]string{"tenant", tenant}, [2]string{"id", id}); err != nil {
		return Run{}, err
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `select `+runColumns+` from runs where id = $1 and tenant_id = $2`, id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, fmt.Errorf("get run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}
