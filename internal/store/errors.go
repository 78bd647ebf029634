package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// retryableCodes are the SQLSTATEs worth another try: the same statement
// can succeed once contention, a restart or a connection storm has passed.
var retryableCodes = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"55P03": true, // lock_not_available
	"57014": true, // query_canceled (statement_timeout)
	"57P01": true, // admin_shutdown
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now
	"53300": true, // too_many_connections
	"58000": true, // system_error
	"58030": true, // io_error
}

// IsRetryable reports whether err is transient: retrying the same operation
// later may succeed. It is the one place that decides; activities use it to
// mark other errors non-retryable.
//
// Retryable: connection failures and resets, errors pgconn marks safe to
// retry, timeouts (context.DeadlineExceeded included), serialization failures,
// deadlocks, lock timeouts, server shutdown and start-up, too many
// connections. Not retryable: nil, context.Canceled (the caller gave up),
// ErrNotFound, ErrRunFinal, validation errors, and every other server error
// (constraint violations, syntax errors, undefined tables, bad credentials).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrRunFinal) {
		return false
	}
	// A server error decides by its code, even inside a connect error:
	// bad credentials (28P01) will not get better on retry.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return retryableCodes[pgErr.Code] || strings.HasPrefix(pgErr.Code, "08")
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// isUniqueViolation reports whether err is Postgres refusing a row under
// the unique index or constraint named.
func isUniqueViolation(err error, name string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == name
}
