package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// ErrNotFound is wrapped by errors for objects that do not exist.
var ErrNotFound = errors.New("blob: object not found")

// ErrChecksum is wrapped by errors for content whose SHA-256 differs from the
// one expected: the object was overwritten or corrupted, and retrying the
// read cannot help.
var ErrChecksum = errors.New("blob: sha256 mismatch")

// ErrDamagedUpload is wrapped by errors for an upload whose stored bytes
// differ from the ones sent (PutContentVerified's read-back): they were
// damaged on the way, and sending them again may work, so it is
// retryable, unlike ErrChecksum.
var ErrDamagedUpload = errors.New("blob: upload damaged on its way")

// notFoundCodes are the S3 error codes meaning "this object does not exist".
// HEAD responses have no body, so they only ever say "NotFound".
var notFoundCodes = map[string]bool{
	"NoSuchKey": true,
	"NotFound":  true,
}

// permanentCodes are never retryable whatever HTTP status carried them; they
// are configuration or programming errors that a retry would only repeat.
var permanentCodes = map[string]bool{
	"AccessDenied":          true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"NoSuchBucket":          true,
	"InvalidBucketName":     true,
	"BucketAlreadyExists":   true,
	"InvalidArgument":       true,
	"InvalidRequest":        true,
	"EntityTooLarge":        true,
	"MethodNotAllowed":      true,
	"NotImplemented":        true,
}

// transientCodes are retryable whatever HTTP status carried them: the
// server found the body damaged on its way (the checksum or payload hash
// it computed differs from the one sent), so sending it again may work.
var transientCodes = map[string]bool{
	"BadDigest":                 true,
	"XAmzContentSHA256Mismatch": true,
	// A put that lost a race with the removal of an empty folder on a
	// server over a file system (isFolderRace), after its immediate
	// retries: the step's next attempt makes the folders afresh.
	"ExistingObjectIsDirectory": true,
}

// sdkRetryables is the SDK's own classification (connection errors,
// 500/502/503/504, throttling codes, RequestTimeout). Reusing it keeps this
// package in step with what the SDK retryer itself retries.
var sdkRetryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// IsRetryable reports whether err is transient, so that the same call may
// succeed later: network failures, timeouts, 5xx, 429/SlowDown and
// RequestTimeout. Missing objects, checksum mismatches, a cancelled context
// and client errors such as AccessDenied or NoSuchBucket are not. This is the
// one place where S3 errors are classified; callers (Temporal activities)
// turn a false into a non-retryable application error.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.Is(err, ErrDamagedUpload):
		return true
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrChecksum):
		return false
	case errors.Is(err, context.Canceled):
		// The caller gave up; a retry would be against its wishes.
		return false
	case errors.Is(err, context.DeadlineExceeded):
		// The per-operation timeout or the caller's deadline: the server was
		// too slow this time.
		return true
	}

	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && permanentCodes[apiErr.ErrorCode()] {
		return false
	}
	if errors.As(err, &apiErr) && transientCodes[apiErr.ErrorCode()] {
		return true
	}
	if sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}

	var statusErr interface{ HTTPStatusCode() int }
	if errors.As(err, &statusErr) {
		code := statusErr.HTTPStatusCode()
		return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
	}
	// A connection cut mid-response surfaces as an unexpected EOF rather
	// than a net.Error.
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	return false
}

// IsOutage reports whether err is an S3 operation that failed in a way a
// retry may fix: S3 is down or too slow, or stored other bytes than were
// sent (ErrDamagedUpload, found by reading an upload back). Unlike
// IsRetryable it is only true for errors from S3 itself, so that a caller
// can tell which dependency is out.
func IsOutage(err error) bool {
	var opErr *smithy.OperationError
	return (errors.As(err, &opErr) || errors.Is(err, ErrDamagedUpload)) && IsRetryable(err)
}

// mapError turns SDK "object does not exist" errors into ErrNotFound, keeping
// the original in the chain for diagnostics. NoSuchBucket is a 404 too but
// means misconfiguration, so it is left alone.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && notFoundCodes[apiErr.ErrorCode()] {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
