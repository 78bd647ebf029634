// Package storetest gives tests a migrated store in a schema of their own,
// so that tests (and test packages) run in parallel on one database without
// seeing each other's rows.
//
// The database is TEST_DATABASE_URL, or DefaultURL when unset. Tests fail,
// rather than skip, when it cannot be reached: a silently skipped database
// test proves nothing.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// DefaultURL is the test database used when TEST_DATABASE_URL is unset: the
// local Postgres with trust auth.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL returns the test database URL without a schema.
func BaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewURL creates an empty schema named t_<random> and returns a database
// URL whose search_path selects it. The schema and everything in it is
// dropped when the test ends. Nothing is migrated.
func NewURL(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	base := BaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schemaURL, name, err := CreateSchema(ctx, base, "t_")
	if err != nil {
		t.Fatalf("storetest: %v (set TEST_DATABASE_URL; is Postgres running?)", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DropSchema(ctx, base, name); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return schemaURL
}

// CreateSchema creates an empty schema named prefix<random> in the
// database of base and returns a URL whose search_path selects it, and its
// name. The tests and the bench both work in schemas made here.
func CreateSchema(ctx context.Context, base, prefix string) (schemaURL, name string, err error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("random schema name: %w", err)
	}
	name = prefix + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", "", fmt.Errorf("connect to the database: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create schema "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create schema %s: %w", name, err)
	}
	schemaURL, err = withSearchPath(base, name)
	if err != nil {
		return "", "", err
	}
	return schemaURL, name, nil
}

// DropSchema drops a schema of CreateSchema and everything in it.
func DropSchema(ctx context.Context, base, name string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("connect to drop schema %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "drop schema "+pgx.Identifier{name}.Sanitize()+" cascade"); err != nil {
		return fmt.Errorf("drop schema %s: %w", name, err)
	}
	return nil
}

// New returns a store on a fresh, migrated schema (see NewURL). The store is
// closed and the schema dropped when the test ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	return Open(t, NewURL(t))
}

// Open opens and migrates a store on databaseURL, for example a second store
// on the schema of NewURL, and closes it when the test ends.
func Open(t testing.TB, databaseURL string) *store.Store {
	t.Helper()
	SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := store.Open(ctx, databaseURL)
	if err != nil {
		t.Fatalf("storetest: open store: %v", err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("storetest: migrate: %v", err)
	}
	return s
}

// withSearchPath adds search_path to a URL or a keyword/value string.
func withSearchPath(base, schemaName string) (string, error) {
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return base + " search_path=" + schemaName, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		// Not err itself: url's error quotes the URL, password included.
		return "", errors.New("test database URL is not a valid URL")
	}
	q := u.Query()
	q.Set("search_path", schemaName)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// SkipShort skips a test that needs Postgres under go test -short (make
// unit), which runs the tests that need no service. Without -short a test
// whose database cannot be reached fails, never skips.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres: skipped under -short")
	}
}
