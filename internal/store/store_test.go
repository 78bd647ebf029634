package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/tern/v2/migrate"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
	"github.com/ctxcompact/orchestrator/schema"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return storetest.New(t)
}

// newRun creates a pending run of tenant/session with a fresh id.
func newRun(t *testing.T, s *store.Store, tenant, session string) store.Run {
	t.Helper()
	r, created, err := s.CreateRun(t.Context(), store.Run{ID: uuid.NewString(), Tenant: tenant, Session: session})
	require.NoError(t, err)
	require.True(t, created)
	return r
}

func schemaVersion(t *testing.T, s *store.Store) int32 {
	t.Helper()
	var v int32
	require.NoError(t, s.Pool().QueryRow(t.Context(), "select version from schema_version").Scan(&v))
	return v
}

func latestVersion(t *testing.T) int32 {
	t.Helper()
	files, err := migrate.FindMigrations(schema.FS)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return int32(len(files))
}

func tableExists(t *testing.T, s *store.Store, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, s.Pool().QueryRow(t.Context(),
		"select exists (select 1 from pg_tables where schemaname = current_schema() and tablename = $1)", name).Scan(&ok))
	return ok
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	require.Equal(t, latestVersion(t), schemaVersion(t, s))
	require.NoError(t, s.Migrate(t.Context()))
	require.Equal(t, latestVersion(t), schemaVersion(t, s))
	for _, table := range []string{"tenants", "sessions", "runs", "run_steps", "drift_verdicts",
		"offloads", "watermarks", "watermark_history", "events", "api_keys"} {
		require.True(t, tableExists(t, s, table), table)
	}
}

// TestMigrateConcurrently starts several stores on one fresh schema at once,
// as several workers starting together would.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := storetest.NewURL(t)
	const n = 4
	stores := make([]*store.Store, n)
	for i := range stores {
		s, err := store.Open(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		stores[i] = s
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "store %d", i)
	}
	require.Equal(t, latestVersion(t), schemaVersion(t, stores[0]))
}

func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	require.NoError(t, s.MigrateTo(t.Context(), 0))
	require.Equal(t, int32(0), schemaVersion(t, s))
	require.False(t, tableExists(t, s, "runs"))
	require.NoError(t, s.Migrate(t.Context()))
	require.Equal(t, latestVersion(t), schemaVersion(t, s))
	newRun(t, s, "acme", "s1")
}

func TestMigrateWithoutSchema(t *testing.T) {
	t.Parallel()
	storetest.SkipShort(t)
	base := storetest.BaseURL()
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	s, err := store.Open(t.Context(), base+sep+"search_path=no_such_schema_"+uuid.NewString()[:8])
	require.NoError(t, err)
	defer s.Close()
	err = s.Migrate(t.Context())
	require.ErrorContains(t, err, "no schema of search_path exists")
}

func TestOpenNeverPrintsPassword(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55word"
	tests := []struct {
		name string
		url  string
	}{
		{"malformed url", "postgres://user:" + secret + "@127.0.0.1:notaport/test"},
		{"malformed keyword string", "host=127.0.0.1 password='" + secret},
		{"unreachable server", "postgres://user:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=5"},
		{"wrong password", "postgres://nosuchuser:" + secret + "@127.0.0.1:5432/test?sslmode=disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := store.Open(ctx, tt.url)
			if s != nil {
				s.Close()
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), secret)
		})
	}
}
