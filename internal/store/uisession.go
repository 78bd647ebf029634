package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// UISession is a web UI sign-in: the browser holds ID, the store only its
// hash.
type UISession struct {
	// ID is the opaque value of the browser's cookie: 32 random bytes,
	// base64url. It is returned once, by OpenUISession.
	ID      string
	Tenant  string
	Expires time.Time
}

// OpenUISession signs in with rawKey for ttl: it checks the key as
// Authenticate does and stores a new session bound to it. ok is false
// when the key is not live.
func (s *Store) OpenUISession(ctx context.Context, rawKey string, ttl time.Duration) (sess UISession, ok bool, err error) {
	if ttl <= 0 {
		return UISession{}, false, errors.New("open ui session: the time to live must be positive")
	}
	key, ok, err := s.Authenticate(ctx, rawKey)
	if err != nil || !ok {
		return UISession{}, ok, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return UISession{}, false, fmt.Errorf("open ui session: random id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	// The key is checked again in the insert, so that a revocation
	// between the two statements cannot open a session.
	row := s.pool.QueryRow(ctx, `
		insert into ui_sessions (id_hash, key_hash, tenant_id, expires_at)
		select $1, key_hash, tenant_id, now() + $3 * interval '1 millisecond'
		from api_keys
		where key_hash = $2 and revoked_at is null and (expires_at is null or expires_at > now())
		returning tenant_id, expires_at`,
		hashAPIKey(id), hashAPIKey(rawKey), ttl.Milliseconds())
	sess = UISession{ID: id}
	if err := row.Scan(&sess.Tenant, &sess.Expires); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return UISession{}, false, nil
		}
		return UISession{}, false, fmt.Errorf("open ui session for key %s: %w", key.ID, err)
	}
	sess.Expires = sess.Expires.UTC()
	return sess, true, nil
}

// UISessionTenant returns the tenant of the live session id: not ended,
// not expired, and its key neither revoked nor expired. ok is false
// otherwise, and for any value that is not a session id.
func (s *Store) UISessionTenant(ctx context.Context, id string) (tenant string, ok bool, err error) {
	if !validUISessionID(id) {
		return "", false, nil
	}
	err = s.pool.QueryRow(ctx, `
		select s.tenant_id from ui_sessions s join api_keys k on k.key_hash = s.key_hash
		where s.id_hash = $1 and s.ended_at is null and s.expires_at > now()
			and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())`,
		hashAPIKey(id)).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("look up ui session: %w", err)
	}
	return tenant, true, nil
}

// EndUISession ends the session id (sign-out). Ending an unknown or ended
// session is a no-op.
func (s *Store) EndUISession(ctx context.Context, id string) error {
	if !validUISessionID(id) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `update ui_sessions set ended_at = now() where id_hash = $1 and ended_at is null`,
		hashAPIKey(id)); err != nil {
		return fmt.Errorf("end ui session: %w", err)
	}
	return nil
}

// validUISessionID reports whether id has the shape OpenUISession gives,
// so that a forged cookie of any other shape costs no lookup.
func validUISessionID(id string) bool {
	b, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(b) == 32
}
