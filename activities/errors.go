package activities

import (
	"context"
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
	// ErrUnavailable: S3 or Postgres is down or timed out; retried under
	// the step's policy, so an outage delays a run instead of failing it.
	ErrUnavailable = "dependency_unavailable"
	// ErrInternal: an error no dependency classified: a bug or input the
	// code did not foresee. Retrying cannot fix it, so the run fails at
	// once instead of retrying for an hour.
	ErrInternal = "internal"
)

func badInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrBadInput, err)
}

func config(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrConfig, err)
}

// blobErr keeps retryable S3 errors retryable and stops the others.
func blobErr(err error) error {
	if err == nil {
		return nil
	}
	if blob.IsRetryable(err) {
		return temporal.NewApplicationErrorWithCause(err.Error(), ErrUnavailable, err)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrDependency, err)
}

// storeErr keeps retryable Postgres errors retryable and stops the others.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	if store.IsRetryable(err) {
		return temporal.NewApplicationErrorWithCause(err.Error(), ErrUnavailable, err)
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
		return temporal.NewNonRetryableApplicationError(le.Message, ErrLLMRejected, errors.New(le.Error()))
	}
	// The cause is the scrubbed error only: the provider's own error
	// (its body may echo the prompt) must not reach Temporal's history.
	return temporal.NewApplicationErrorWithOptions(le.Message, string(le.Kind), temporal.ApplicationErrorOptions{
		Cause:          errors.New(le.Error()),
		NextRetryDelay: le.RetryAfter,
	})
}

// classify is the last word on an activity's error, applied to every
// activity in record: errors already classified above (application errors
// of any type) and cancellations keep their retry decision; anything else
// was classified by nobody and is a bug or unforeseen input, so it stops
// the run now with ErrInternal rather than retrying for an hour.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if top, ok := err.(*temporal.ApplicationError); ok {
			return top
		}
		// Temporal reads only the outermost error: a classified error
		// wrapped with more context keeps its class on the outside.
		return temporal.NewApplicationErrorWithOptions(err.Error(), app.Type(), temporal.ApplicationErrorOptions{
			NonRetryable: app.NonRetryable(), Cause: err, NextRetryDelay: app.NextRetryDelay(),
		})
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInternal, err)
}
