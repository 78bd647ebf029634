package store

import "context"

// MigrateTo exposes migrateTo so tests can check the down migrations.
func (s *Store) MigrateTo(ctx context.Context, version int32) error {
	return s.migrateTo(ctx, version)
}

// HashAPIKey exposes the stored form of an API key.
var HashAPIKey = hashAPIKey

// ListRunsQuery exposes listRunsQuery, for the plan test.
var ListRunsQuery = listRunsQuery
