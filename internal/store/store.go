// Package store is the Postgres repository of the orchestrator: tenants,
// sessions, compaction runs and their per-step history, drift verdicts,
// offloads, watermarks, event dedup and API keys.
//
// Every write is idempotent under activity retry: rows are keyed by what the
// caller already knows (run id, step name and attempt, drift pass, offload
// key, watermark tool_use id, event id), inserts use ON CONFLICT DO NOTHING
// and state changes are guarded by the state they start from. History rows
// are append-only; the schema enforces it with triggers.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/ctxcompact/orchestrator/schema"
)

// ErrNotFound reports that the requested row does not exist. Errors returned
// by Get*, and by state changes of a missing run, wrap it. It is the one
// not-found sentinel above the store too: audit, gateway, httpapi, mcp and
// webui return and test it for an unknown run or session, or one of
// another tenant (the two are indistinguishable on purpose), so that one
// errors.Is answers "not found" wherever it was decided.
var ErrNotFound = errors.New("not found")

// ErrRunFinal reports an attempt to change a run that has already succeeded,
// ended over_limit or failed, in a way that is not a harmless retry.
var ErrRunFinal = errors.New("run is final")

// versionTableName is tern's bookkeeping table, created in the current schema
// so that each schema (one per test, or per deployment) migrates on its own.
const versionTableName = "schema_version"

// pingAfterIdle is how long a pooled connection may sit unused before it
// is pinged on acquire.
const pingAfterIdle = time.Second

// Store is the Postgres repository. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// retell is how long an admitted run may stay pending before Admit
	// names it again (admitRetell; tests shorten it).
	retell time.Duration
}

// Open connects to the database at databaseURL (a postgres:// URL or a
// keyword/value string) and pings it. Runtime parameters in the URL are
// passed to the server, so `?search_path=name` selects the schema the store
// works in. Errors never contain the password.
//
// Open does not migrate; call Migrate once at start.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) {
			// The parse error quotes the connection string and its password
			// redaction is best effort, so only the cause is shown.
			return nil, &redactedError{msg: "parse database url: malformed connection string (details withheld: they may contain the password)", err: err}
		}
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	password := cfg.ConnConfig.Password
	// Ping a connection before handing it out only when it has been idle
	// for a while: after a Postgres restart the pool still holds
	// connections the server closed, and each would cost an activity a
	// failed attempt. A connection used within the last second is almost
	// surely alive, and pinging it too doubled the round trips of every
	// statement (a run made 80 instead of 40); a stale one that slips
	// through fails one attempt, which the step's retry absorbs.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > pingAfterIdle }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", describe(cfg), scrub(err, password))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", describe(cfg), scrub(err, password))
	}
	return &Store{pool: pool, retell: admitRetell}, nil
}

// Close closes every connection of the pool; it waits for acquired ones.
func (s *Store) Close() {
	s.pool.Close()
}

// Pool returns the underlying pool, for health checks and tests.
func (s *Store) Pool() *pgxpool.Pool {
	return s.pool
}

// Migrate applies every embedded migration not yet applied to the current
// schema (the first existing schema of search_path). It is safe to call from
// several processes at once: tern's migrator holds a Postgres advisory lock
// while it creates its version table and while it migrates, so a second
// caller waits and then finds nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, -1)
}

// migrateTo migrates to version target, or to the latest when target < 0.
func (s *Store) migrateTo(ctx context.Context, target int32) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate schema: acquire connection: %w", err)
	}
	defer conn.Release()

	var current *string
	if err := conn.QueryRow(ctx, "select current_schema()").Scan(&current); err != nil {
		return fmt.Errorf("migrate schema: read current schema: %w", err)
	}
	if current == nil {
		return errors.New("migrate schema: no schema of search_path exists; create it first")
	}
	versionTable := pgx.Identifier{*current, versionTableName}.Sanitize()

	m, err := migrate.NewMigrator(ctx, conn.Conn(), versionTable)
	if err != nil {
		return fmt.Errorf("migrate schema %q: create migrator: %w", *current, err)
	}
	if err := m.LoadMigrations(schema.FS); err != nil {
		return fmt.Errorf("migrate schema %q: load migrations: %w", *current, err)
	}
	if target < 0 {
		err = m.Migrate(ctx)
	} else {
		err = m.MigrateTo(ctx, target)
	}
	if err != nil {
		return fmt.Errorf("migrate schema %q: %w", *current, err)
	}
	return nil
}

// UserOf returns the user a connection string connects as.
func UserOf(databaseURL string) (string, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return "", errors.New("malformed connection string (details withheld: they may contain the password)")
	}
	return cfg.User, nil
}

// GrantRuntime gives role what the worker and the API need in the current
// schema and nothing more: read, insert and update rows, use the identity
// sequences. It has no DELETE, TRUNCATE, REFERENCES or TRIGGER right and
// owns nothing, so it cannot drop or alter a table or disable the
// triggers that keep history append-only. Run it as the schema's owner
// after Migrate (MIGRATE_DATABASE_URL does so at start); it is idempotent.
func (s *Store) GrantRuntime(ctx context.Context, role string) error {
	if strings.TrimSpace(role) == "" {
		return errors.New("grant runtime rights: empty role")
	}
	var current *string
	if err := s.pool.QueryRow(ctx, "select current_schema()").Scan(&current); err != nil || current == nil {
		return fmt.Errorf("grant runtime rights: read current schema: %v", err)
	}
	schemaID, roleID := pgx.Identifier{*current}.Sanitize(), pgx.Identifier{role}.Sanitize()
	stmts := []string{
		"grant usage on schema " + schemaID + " to " + roleID,
		"revoke all on all tables in schema " + schemaID + " from " + roleID,
		"grant select, insert, update on all tables in schema " + schemaID + " to " + roleID,
		"grant usage, select on all sequences in schema " + schemaID + " to " + roleID,
		// The migrations' version is the owner's to write.
		"revoke insert, update on table " + schemaID + ".schema_version from " + roleID,
		// Only erase_session_rows (SECURITY DEFINER) opens the
		// append-only tables to a DELETE, for one session.
		"revoke insert, update on table " + schemaID + ".erase_guard from " + roleID,
	}
	for _, q := range stmts {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("grant runtime rights to %s: %w", role, err)
		}
	}
	return nil
}

// generationSQL is the generation of a session row created now: one more
// than the erasures its name has been through (tenant and session are the
// statement's placeholders).
func generationSQL(tenant, session string) string {
	return "1 + (select count(*) from session_erasures where tenant_id = " + tenant +
		" and session_id = " + session + " and finished_at is not null)"
}

// ensureSessionSQL creates tenant $1 and its session $2 when missing.
var ensureSessionSQL = `
	with tenant as (insert into tenants (id) values ($1) on conflict do nothing)
	insert into sessions (tenant_id, id, generation) values ($1, $2, ` + generationSQL("$1", "$2") + `) on conflict do nothing`

// ensureSession creates the tenant and session rows if they do not exist,
// so that callers never need a separate registration step.
func ensureSession(ctx context.Context, tx pgx.Tx, tenant, session string) error {
	// One statement, one round trip: the session's foreign key to its
	// tenant is checked at the end of the statement, after both inserts.
	if _, err := tx.Exec(ctx, ensureSessionSQL, tenant, session); err != nil {
		return fmt.Errorf("upsert session %q/%q: %w", tenant, session, err)
	}
	return nil
}

// requireNonEmpty returns an error naming the first empty field.
func requireNonEmpty(op string, fields ...[2]string) error {
	for _, f := range fields {
		if strings.TrimSpace(f[1]) == "" {
			return fmt.Errorf("%s: %s is empty", op, f[0])
		}
	}
	return nil
}

// describe names the target of a connection without its password.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres %s:%d/%s as %s", c.Host, c.Port, c.Database, c.User)
}

// scrub hides password in err's message while keeping err for errors.Is/As.
// pgx does not print passwords today; this keeps it so if that changes.
func scrub(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}

// redactedError prints msg but unwraps to the original error.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
