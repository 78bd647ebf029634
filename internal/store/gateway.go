package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MinAPIKeyLength is the shortest raw API key AddAPIKey accepts; shorter
// keys are guessable.
const MinAPIKeyLength = 16

// errClaimConflict rolls back the transaction of a conflicting claim.
var errClaimConflict = errors.New("event claimed with another request")

// ClaimEvent records that event eventID of a tenant starts run runID, so
// that a duplicate delivery never starts a second run. The first claim
// inserts and returns ("", false). A later claim with the same session and
// body returns the run id of the first claim (equal to runID if this is a
// retry of the same claim). The same event id with another body or session
// is a conflict: it returns the first run id and conflict true, no error.
func (s *Store) ClaimEvent(ctx context.Context, tenant, session, eventID, bodySHA256, runID string) (string, bool, error) {
	op := fmt.Sprintf("claim event %s of tenant %s", eventID, tenant)
	if err := requireNonEmpty(op, [2]string{"tenant", tenant}, [2]string{"session", session}, [2]string{"eventID", eventID},
		[2]string{"bodySHA256", bodySHA256}, [2]string{"runID", runID}); err != nil {
		return "", false, err
	}
	var existingRun string
	var conflict bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := ensureSession(ctx, tx, tenant, session); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			insert into events (tenant_id, event_id, session_id, body_sha256, run_id)
			values ($1, $2, $3, $4, $5)
			on conflict (tenant_id, event_id) do nothing`,
			tenant, eventID, session, bodySHA256, runID)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var storedSession, storedBody string
		err = tx.QueryRow(ctx, `select session_id, body_sha256, run_id from events where tenant_id = $1 and event_id = $2`,
			tenant, eventID).Scan(&storedSession, &storedBody, &existingRun)
		if err != nil {
			return fmt.Errorf("read first claim: %w", err)
		}
		conflict = storedSession != session || storedBody != bodySHA256
		if conflict {
			// Roll back: a refused event leaves no session row behind.
			return errClaimConflict
		}
		return nil
	})
	if errors.Is(err, errClaimConflict) {
		return existingRun, true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", op, err)
	}
	return existingRun, conflict, nil
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
