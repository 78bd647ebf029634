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
	base := BaseURL()
	name := "t_" + randomHex(t, 8)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("storetest: connect to test database (set TEST_DATABASE_URL; is Postgres running?): %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create schema "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("storetest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() { dropSchema(t, base, name) })

	schemaURL, err := withSearchPath(base, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return schemaURL
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

func dropSchema(t testing.TB, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("storetest: connect to drop schema %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "drop schema "+pgx.Identifier{name}.Sanitize()+" cascade"); err != nil {
		t.Errorf("storetest: drop schema %s: %v", name, err)
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("storetest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
