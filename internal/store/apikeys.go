package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKeyPrefixLen is how much of a key is kept in clear to recognise it in
// a list (never enough to use it).
const APIKeyPrefixLen = 8

// APIKey is what is known about a key; never the key itself.
type APIKey struct {
	// ID is public: keys are listed and revoked by it.
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Prefix  string    `json:"prefix"`
	Created time.Time `json:"created_at"`
	// Expires, LastUsed and Revoked are zero when unset.
	Expires  time.Time `json:"expires_at"`
	LastUsed time.Time `json:"last_used_at"`
	Revoked  time.Time `json:"revoked_at"`
}

// CreateAPIKey stores rawKey (its hash, and its first APIKeyPrefixLen
// characters to recognise it by) as a key of tenant, valid until expires
// (zero: no expiry), and returns it. Like AddAPIKey it creates the tenant
// if new and refuses a key that belongs to another tenant.
func (s *Store) CreateAPIKey(ctx context.Context, tenant, rawKey string, expires time.Time) (APIKey, error) {
	if err := s.AddAPIKey(ctx, tenant, rawKey); err != nil {
		return APIKey{}, err
	}
	prefix := rawKey[:min(APIKeyPrefixLen, len(rawKey))]
	var exp *time.Time
	if !expires.IsZero() {
		exp = &expires
	}
	row := s.pool.QueryRow(ctx, `
		update api_keys set prefix = $2, expires_at = $3 where key_hash = $1
		returning `+apiKeyColumns, hashAPIKey(rawKey), prefix, exp)
	k, err := scanAPIKey(row)
	if err != nil {
		return APIKey{}, fmt.Errorf("create api key for tenant %s: %w", tenant, err)
	}
	return k, nil
}

// ListAPIKeys lists the keys of tenant ("" for every tenant), newest
// first, revoked ones included.
func (s *Store) ListAPIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `select `+apiKeyColumns+` from api_keys
		where $1 = '' or tenant_id = $1 order by created_at desc, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIKey, error) { return scanAPIKey(row) })
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKeyByID revokes the key with the public id. It reports whether
// a live key was revoked; an unknown or already revoked id is false.
func (s *Store) RevokeAPIKeyByID(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `update api_keys set revoked_at = now() where id = $1 and revoked_at is null`, id)
	if err != nil {
		return false, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// lastUsedEvery is how stale last_used_at may get: a busy key costs one
// write a minute, not one per request.
const lastUsedEvery = time.Minute

// Authenticate returns the live key rawKey: not revoked, not expired. ok
// is false otherwise. It records the use, at most once per lastUsedEvery,
// in the same round trip.
func (s *Store) Authenticate(ctx context.Context, rawKey string) (key APIKey, ok bool, err error) {
	if rawKey == "" {
		return APIKey{}, false, nil
	}
	row := s.pool.QueryRow(ctx, `
		with k as (
			select id from api_keys
			where key_hash = $1 and revoked_at is null and (expires_at is null or expires_at > now())),
		touched as (
			update api_keys set last_used_at = now()
			where id in (select id from k) and (last_used_at is null or last_used_at < now() - $2 * interval '1 second'))
		select `+apiKeyColumns+` from api_keys where id in (select id from k)`,
		hashAPIKey(rawKey), int(lastUsedEvery/time.Second))
	key, err = scanAPIKey(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, false, nil
	}
	if err != nil {
		return APIKey{}, false, fmt.Errorf("look up api key: %w", err)
	}
	return key, true, nil
}

const apiKeyColumns = `id, tenant_id, prefix, created_at, expires_at, last_used_at, revoked_at`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	var exp, used, revoked *time.Time
	if err := row.Scan(&k.ID, &k.Tenant, &k.Prefix, &k.Created, &exp, &used, &revoked); err != nil {
		return APIKey{}, err
	}
	k.Created = k.Created.UTC()
	for _, p := range []struct {
		src *time.Time
		dst *time.Time
	}{{exp, &k.Expires}, {used, &k.LastUsed}, {revoked, &k.Revoked}} {
		if p.src != nil {
			*p.dst = p.src.UTC()
		}
	}
	return k, nil
}
