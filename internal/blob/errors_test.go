package blob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

// apiError builds an error shaped like the SDK's for an S3 error response:
// an operation error wrapping an HTTP response error wrapping the API error.
func apiError(status int, code string) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: "GetObject",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      &smithy.GenericAPIError{Code: code, Message: "test"},
			},
		},
	}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", refused, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"cut mid-body", fmt.Errorf("get k: read body: %w", io.ErrUnexpectedEOF), true},
		{"deadline", fmt.Errorf("get k: %w", context.DeadlineExceeded), true},
		{"canceled", fmt.Errorf("get k: %w", context.Canceled), false},
		{"500 InternalError", apiError(500, "InternalError"), true},
		{"503 ServiceUnavailable", apiError(503, "ServiceUnavailable"), true},
		{"507 odd 5xx", apiError(507, "InsufficientStorage"), true},
		{"503 SlowDown", apiError(503, "SlowDown"), true},
		{"429 no code", apiError(429, ""), true},
		{"400 RequestTimeout", apiError(400, "RequestTimeout"), true},
		{"403 AccessDenied", apiError(403, "AccessDenied"), false},
		{"403 SignatureDoesNotMatch", apiError(403, "SignatureDoesNotMatch"), false},
		{"404 NoSuchBucket", apiError(404, "NoSuchBucket"), false},
		{"400 InvalidBucketName", apiError(400, "InvalidBucketName"), false},
		{"404 NoSuchKey", apiError(404, "NoSuchKey"), false},
		{"400 unknown code", apiError(400, "SomethingElse"), false},
		{"ErrNotFound", fmt.Errorf("get k: %w", blob.ErrNotFound), false},
		{"ErrChecksum", fmt.Errorf("get verified k: %w", blob.ErrChecksum), false},
		{"400 BadDigest: the body was damaged on its way", apiError(400, "BadDigest"), true},
		{"400 XAmzContentSHA256Mismatch", apiError(400, "XAmzContentSHA256Mismatch"), true},
		{"ErrDamagedUpload", fmt.Errorf("put verified k: %w", blob.ErrDamagedUpload), true},
		{"plain error", errors.New("bad input"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, blob.IsRetryable(tc.err), "error: %v", tc.err)
		})
	}
}

// TestIsOutage: only S3's own failures that a retry may fix name S3 as
// the dependency that is out; the same kind of error from elsewhere does
// not.
func TestIsOutage(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"503 from S3", apiError(503, "ServiceUnavailable"), true},
		{"400 BadDigest from S3", apiError(400, "BadDigest"), true},
		{"S3 connection refused", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: refused}, true},
		{"upload read back damaged", fmt.Errorf("store conversation: put verified k: %w", blob.ErrDamagedUpload), true},
		{"403 AccessDenied from S3", apiError(403, "AccessDenied"), false},
		{"missing object", fmt.Errorf("get k: %w", blob.ErrNotFound), false},
		{"connection refused elsewhere", refused, false},
		{"deadline elsewhere", fmt.Errorf("wait: %w", context.DeadlineExceeded), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, blob.IsOutage(tc.err), "error: %v", tc.err)
		})
	}
}
