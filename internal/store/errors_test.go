package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func pgErr(code string) error {
	return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "test"}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"serialization failure", pgErr("40001"), true},
		{"deadlock", pgErr("40P01"), true},
		{"lock not available", pgErr("55P03"), true},
		{"statement timeout", pgErr("57014"), true},
		{"admin shutdown", pgErr("57P01"), true},
		{"crash shutdown", pgErr("57P02"), true},
		{"cannot connect now", pgErr("57P03"), true},
		{"too many connections", pgErr("53300"), true},
		{"connection failure", pgErr("08006"), true},
		{"wrapped deadlock", fmt.Errorf("commit run x: %w", pgErr("40P01")), true},
		{"unique violation", pgErr("23505"), false},
		{"foreign key violation", pgErr("23503"), false},
		{"check violation", pgErr("23514"), false},
		{"append-only trigger", pgErr("23000"), false},
		{"syntax error", pgErr("42601"), false},
		{"undefined table", pgErr("42P01"), false},
		{"invalid password", pgErr("28P01"), false},
		{"disk full", pgErr("53100"), false},
		{"context deadline", context.DeadlineExceeded, true},
		{"wrapped context deadline", fmt.Errorf("list runs: %w", context.DeadlineExceeded), true},
		{"context canceled", context.Canceled, false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"unexpected eof", io.ErrUnexpectedEOF, true},
		{"closed network connection", net.ErrClosed, true},
		{"not found", fmt.Errorf("get run x: %w", store.ErrNotFound), false},
		{"run final", fmt.Errorf("record plan: %w", store.ErrRunFinal), false},
		{"no rows", pgx.ErrNoRows, false},
		{"plain error", errors.New("create run: ID is empty"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, store.IsRetryable(tt.err))
		})
	}
}

// TestIsRetryableRealErrors classifies errors produced by a real server and
// a real failed connection, not hand-made ones.
func TestIsRetryableRealErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	_, err := s.Pool().Exec(ctx, "select * from no_such_table")
	require.Error(t, err)
	require.False(t, store.IsRetryable(err), "undefined table: %v", err)

	_, err = s.Pool().Exec(ctx, "selec 1")
	require.Error(t, err)
	require.False(t, store.IsRetryable(err), "syntax error: %v", err)

	_, err = s.Pool().Exec(ctx, "do $$ begin raise exception 'boom' using errcode = 'serialization_failure'; end $$")
	require.Error(t, err)
	require.True(t, store.IsRetryable(err), "serialization failure: %v", err)

	// Port 1 on loopback refuses connections.
	_, err = store.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	require.Error(t, err)
	require.True(t, store.IsRetryable(err), "connection refused: %v", err)
}
