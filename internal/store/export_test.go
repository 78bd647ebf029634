package store

import (
	"context"
	"time"
)

// MigrateTo exposes migrateTo so tests can check the down migrations.
func (s *Store) MigrateTo(ctx context.Context, version int32) error {
	return s.migrateTo(ctx, version)
}

// HashAPIKey exposes the stored form of an API key.
var HashAPIKey = hashAPIKey

// ListRunsQuery exposes listRunsQuery, for the plan test.
var ListRunsQuery = listRunsQuery

// SetAdmitRetell sets how long an admitted run may stay pending before
// Admit names it again.
func (s *Store) SetAdmitRetell(d time.Duration) { s.retell = d }
