package activities

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Application error types the workflows know: the Type of the Temporal
// application errors the activities return (not Go errors: a workflow
// reads them from the failure, by name). They are named here only, beside
// their classification (describeApp maps each onto the run's
// store.ErrorClass). Retryable vs non-retryable is decided here, once per
// dependency: store.IsRetryable for Postgres, blob.IsRetryable for S3,
// llm.Error.Retryable for the summarizer. A type that is a run's error
// class as it stands is spelled by that class, so the two cannot drift.
const (
	// TypeBadInput: the conversation or the request cannot be used; no
	// retry will change that.
	TypeBadInput = string(store.ErrorBadInput)
	// TypeConfig: a preset or the deployment is misconfigured.
	TypeConfig = string(store.ErrorConfig)
	// TypeLLMRejected: the summarizer refused the request for good
	// (authentication, a bad request).
	TypeLLMRejected = "llm_rejected"
	// TypeDependency: S3 or Postgres failed in a way retries will not fix.
	TypeDependency = string(store.ErrorDependency)
	// TypeUnavailable: S3 or Postgres is down or timed out; retried under
	// the step's policy, so an outage delays a run instead of failing it.
	TypeUnavailable = "dependency_unavailable"
	// TypeInternal: an error no dependency classified: a bug or input the
	// code did not foresee. Retrying cannot fix it, so the run fails at
	// once instead of retrying for an hour.
	TypeInternal = string(store.ErrorInternal)
	// TypeWebhookRejected: a webhook endpoint did not accept a delivery
	// (no answer, or not a 2xx); retried with backoff for up to a day.
	TypeWebhookRejected = "webhook_rejected"
	// TypeTenantBusy: the delivery's tenant has its
	// DELIVERY_TENANT_CONCURRENT deliveries in flight in this worker; the
	// delivery is not sent now and comes back in a few seconds.
	TypeTenantBusy = "tenant_busy"
)

func badInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeBadInput, err)
}

func config(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeConfig, err)
}

// blobErr keeps retryable S3 errors retryable and stops the others.
func blobErr(err error) error {
	if err == nil {
		return nil
	}
	if blob.IsRetryable(err) || interrupted(err) {
		return temporal.NewApplicationErrorWithCause(err.Error(), TypeUnavailable, err)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeDependency, err)
}

// interrupted reports a call cut short by the activity's own context
// being canceled: its worker shutting down (a rolling deploy stops
// workers gracefully, which cancels the steps in flight). The store and
// S3 treat a canceled call as the caller giving up, not to be retried;
// for a step the caller is Temporal, which must run it again, here or on
// another worker. Stopping it for good would fail the run, or leave an
// erasure unfinished, because a worker restarted. (A deadline is already
// retryable for both stores.)
func interrupted(err error) bool {
	return errors.Is(err, context.Canceled)
}

// storeErr keeps retryable Postgres errors retryable and stops the others.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	if store.IsRetryable(err) || interrupted(err) {
		return temporal.NewApplicationErrorWithCause(err.Error(), TypeUnavailable, err)
	}
	if errors.Is(err, store.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), TypeBadInput, err)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeDependency, err)
}

// llmErr maps a summarizer error onto Temporal's retry: a 429 retries after
// the server's Retry-After (NextRetryDelay), 5xx and timeouts retry with the
// policy's backoff, authentication and bad requests stop at once.
func llmErr(err error) error {
	var le *llm.Error
	if !errors.As(err, &le) {
		return err
	}
	// The cause is the scrubbed error only: the provider's own error
	// (its body may echo the prompt) must not reach Temporal's history.
	// Its netcause word travels as the error's one detail (see Cause).
	if !le.Retryable() {
		return temporal.NewApplicationErrorWithOptions(le.Message, TypeLLMRejected, temporal.ApplicationErrorOptions{
			NonRetryable: true, Cause: errors.New(le.Error()), Details: []any{causeDetail{Cause: le.Cause}},
		})
	}
	return temporal.NewApplicationErrorWithOptions(le.Message, string(le.Kind), temporal.ApplicationErrorOptions{
		Cause:          errors.New(le.Error()),
		NextRetryDelay: le.RetryAfter,
		Details:        []any{causeDetail{Cause: le.Cause}},
	})
}

// causeDetail is the detail of a summarizer's application error: why its
// call failed, in netcause's words.
type causeDetail struct {
	Cause string `json:"cause"`
}

// Cause is why the dependency call behind a run's or a step's error
// failed, as the summarizer's client named it (llm.Error.Cause: "refused",
// "timeout", "http 503"), or "" when the error carries none (any other
// error, or one recorded before causes were). Like Describe, it is a pure
// function of err, so workflow code may call it.
func Cause(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		var app *temporal.ApplicationError
		if !errors.As(e, &app) {
			return ""
		}
		var d causeDetail
		if app.HasDetails() && app.Details(&d) == nil && d.Cause != "" {
			return d.Cause
		}
		e = app
	}
	return ""
}

// classify is the last word on an activity's error, applied to every
// activity in record: errors already classified above (application errors
// of any type) and cancellations keep their retry decision; anything else
// was classified by nobody and is a bug or unforeseen input, so it stops
// the run now with TypeInternal rather than retrying for an hour.
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
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeInternal, err)
}

// maxPublicMessage bounds the message a failed run or step shows its
// caller.
const maxPublicMessage = 300

// Describe turns a run's or a step's error into what its caller may see:
// a class (store.ErrorClass) and a message that names the step and what
// went wrong, without SQLSTATEs, Temporal's error chains (activity ids,
// worker identities) or a dependency's own words. Only bad input and the
// summarizer's (already scrubbed) refusal keep their text, because the
// caller needs it to act. The detail is the caller of Describe's to log.
// It is a pure function of err, so workflow code may call it.
func Describe(err error) (store.ErrorClass, string) {
	if err == nil {
		return "", ""
	}
	var (
		class    store.ErrorClass
		msg      string
		app      *temporal.ApplicationError
		timeout  *temporal.TimeoutError
		canceled *temporal.CanceledError
	)
	switch {
	case errors.As(err, &canceled) || errors.Is(err, context.Canceled):
		class, msg = store.ErrorCanceled, "the run was canceled"
	case errors.As(err, &timeout):
		class, msg = store.ErrorTimeout, "ran out of time"
	case errors.As(err, &app):
		class, msg = describeApp(app)
	case errors.Is(err, context.DeadlineExceeded):
		class, msg = store.ErrorTimeout, "ran out of time"
	default:
		class, msg = store.ErrorInternal, "internal error; the operator's logs have the detail"
	}
	if step := stepOf(err.Error()); step != "" {
		msg = step + ": " + msg
	}
	return class, publicText(msg)
}

// describeApp classifies an application error by the types above and the
// summarizer's error kinds.
func describeApp(app *temporal.ApplicationError) (store.ErrorClass, string) {
	// llmErr's cause is the scrubbed summarizer error, with its status
	// and Retry-After: the caller may see it.
	said := app.Message()
	if cause := errors.Unwrap(app); cause != nil {
		said = cause.Error()
		// Through Temporal the cause is an application error itself,
		// whose Error() adds its Go type.
		var c *temporal.ApplicationError
		if errors.As(cause, &c) {
			said = c.Message()
		}
	}
	// The summarizer's words name no endpoint of the operator's: the
	// wrapped error was scrubbed, but the product's own prefix ("call to
	// http://… failed") was not.
	said = llm.Scrub(said)
	switch app.Type() {
	case TypeBadInput:
		return store.ErrorBadInput, app.Message()
	case TypeConfig:
		return store.ErrorConfig, "the deployment's configuration refused the run; the operator's logs have the detail"
	case TypeLLMRejected:
		return store.ErrorSummarizer, "the summarizer refused the request: " + said
	case string(llm.RateLimited), string(llm.ServerError), string(llm.Timeout), string(llm.ContextLength),
		string(llm.Auth), string(llm.BadRequest), string(llm.Unknown), string(llm.Canceled):
		return store.ErrorSummarizer, "the summarizer failed: " + said
	case TypeUnavailable:
		return store.ErrorDependency, "Postgres or S3 was unavailable"
	case TypeDependency:
		return store.ErrorDependency, "Postgres or S3 failed; the operator's logs have the detail"
	}
	return store.ErrorInternal, "internal error; the operator's logs have the detail"
}

// stepOf is the step a workflow error names first ("plan: …"), or "".
func stepOf(s string) string {
	step, _, ok := strings.Cut(s, ": ")
	if !ok || step == "" || len(step) > 40 {
		return ""
	}
	for _, r := range step {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ' ' || r == '-' || r == '_' || r == '/') {
			return ""
		}
	}
	return step
}

// sqlState matches pgx's "(SQLSTATE 23505)" suffixes.
var sqlState = regexp.MustCompile(`\s*\(SQLSTATE [0-9A-Z]{5}\)`)

// publicText removes SQLSTATEs and control characters and cuts s to
// maxPublicMessage bytes at a rune boundary.
func publicText(s string) string {
	s = sqlState.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, " "))
	if len(s) <= maxPublicMessage {
		return s
	}
	cut := maxPublicMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
