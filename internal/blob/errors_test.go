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

// TestIsRetryable pins both classifications of each error: retryable (a
// retry may fix it) and outage (a retry may fix it and S3 itself said so,
// so that S3 is named as the dependency that is out).
func TestIsRetryable(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name      string
		err       error
		retryable bool
		outage    bool
	}{
		{"nil", nil, false, false},
		{"connection refused elsewhere", refused, true, false},
		{"S3 connection refused", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: refused}, true, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, false},
		{"cut mid-body", fmt.Errorf("get k: read body: %w", io.ErrUnexpectedEOF), true, false},
		{"deadline", fmt.Errorf("get k: %w", context.DeadlineExceeded), true, false},
		{"canceled", fmt.Errorf("get k: %w", context.Canceled), false, false},
		{"500 InternalError", apiError(500, "InternalError"), true, true},
		{"503 ServiceUnavailable", apiError(503, "ServiceUnavailable"), true, true},
		{"507 odd 5xx", apiError(507, "InsufficientStorage"), true, true},
		{"503 SlowDown", apiError(503, "SlowDown"), true, true},
		{"429 no code", apiError(429, ""), true, true},
		{"400 RequestTimeout", apiError(400, "RequestTimeout"), true, true},
		{"403 AccessDenied", apiError(403, "AccessDenied"), false, false},
		{"403 SignatureDoesNotMatch", apiError(403, "SignatureDoesNotMatch"), false, false},
		{"404 NoSuchBucket", apiError(404, "NoSuchBucket"), false, false},
		{"400 InvalidBucketName", apiError(400, "InvalidBucketName"), false, false},
		{"404 NoSuchKey", apiError(404, "NoSuchKey"), false, false},
		{"400 unknown code", apiError(400, "SomethingElse"), false, false},
		{"ErrNotFound", fmt.Errorf("get k: %w", blob.ErrNotFound), false, false},
		{"ErrChecksum", fmt.Errorf("get verified k: %w", blob.ErrChecksum), false, false},
		{"400 BadDigest: the body was damaged on its way", apiError(400, "BadDigest"), true, true},
		{"409 ExistingObjectIsDirectory: a put crossed the removal of an empty folder", apiError(409, "ExistingObjectIsDirectory"), true, true},
		{"400 XAmzContentSHA256Mismatch", apiError(400, "XAmzContentSHA256Mismatch"), true, true},
		// Found by reading an upload back: S3 stored other bytes.
		{"ErrDamagedUpload", fmt.Errorf("put verified k: %w", blob.ErrDamagedUpload), true, true},
		{"plain error", errors.New("bad input"), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.retryable, blob.IsRetryable(tc.err), "IsRetryable: %v", tc.err)
			require.Equal(t, tc.outage, blob.IsOutage(tc.err), "IsOutage: %v", tc.err)
		})
	}
}
