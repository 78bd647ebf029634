package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Application error types the workflows know. Retryable vs non-retryable
// is decided here, once per dependency: store.IsRetryable for Postgres,
// blob.IsRetryable for S3, llm.Error.Retryable for the summarizer.
const (
	// ErrBadInput: the conversation or the request cannot be used; no
	// retry will change that.
	ErrBadInput = "bad_input"
	// ErrConfig: a preset or the deployment is misconfigured.
	ErrConfig = "config"
	// ErrLLMRejected: the summarizer refused the request for good
	// (authentication, a bad request).
	ErrLLMRejected = "llm_rejected"
	// ErrDependency: S3 or Postgres failed in a way retries will not fix.
	ErrDependency = "dependency"
)

func badInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrBadInput, err)
}

func config(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrConfig, err)
}

// blobErr keeps retryable S3 errors retryable and stops the others.
func blobErr(err error) error {
	if err == nil || blob.IsRetryable(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrDependency, err)
}

// storeErr keeps retryable Postgres errors retryable and stops the others.
func storeErr(err error) error {
	if err == nil || store.IsRetryable(err) {
		return err
	}
	if errors.Is(err, store.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrBadInput, err)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrDependency, err)
}

// llmErr maps a summarizer error onto Temporal's retry: a 429 retries after
// the server's Retry-After (NextRetryDelay), 5xx and timeouts retry with the
// policy's backoff, authentication and bad requests stop at once.
func llmErr(err error) error {
	var le *llm.Error
	if !errors.As(err, &le) {
		return err
	}
	if !le.Retryable() {
		return temporal.NewNonRetryableApplicationError(le.Message, ErrLLMRejected, err)
	}
	return temporal.NewApplicationErrorWithOptions(le.Message, string(le.Kind), temporal.ApplicationErrorOptions{
		Cause:          err,
		NextRetryDelay: le.RetryAfter,
	})
}
