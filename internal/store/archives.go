package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SessionArchive returns the key of the archived original whose SHA-256 is
// sha when a run of this tenant and session recorded it (runs.archive_key
// and archive_sha256): how a recover id, which names an archive by its
// digest, is resolved. ok is false for any other archive, another
// tenant's or another session's included: an id is never a key.
func (s *Store) SessionArchive(ctx context.Context, tenant, session, sha string) (key string, ok bool, err error) {
	if tenant == "" || session == "" || sha == "" {
		return "", false, nil
	}
	err = s.pool.QueryRow(ctx, `
		select archive_key from runs
		where tenant_id = $1 and session_id = $2 and archive_sha256 = $3 and archive_key <> ''
		order by started_at desc, id desc
		limit 1`, tenant, session, sha).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("archive of %s/%s: %w", tenant, session, err)
	}
	return key, true, nil
}
