package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Error codes of the common error body. They are part of the API: callers
// switch on them, so they never change meaning.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeInternal         = "internal"
	// CodeBreakerOpen: the session's loop breaker refuses automatic
	// events; a manual compaction probes it.
	CodeBreakerOpen = "breaker_open"
	// CodeUnavailable: a dependency (Temporal, Postgres, S3) is down or
	// too slow; retry after the Retry-After header's seconds.
	CodeUnavailable = "unavailable"
	// CodeRateLimited: the tenant sent more requests, or more at once,
	// than its limits allow, or the client address failed to
	// authenticate too often; retry after the Retry-After header's
	// seconds.
	CodeRateLimited = "rate_limited"
	// CodeGone: the session was erased (or is being erased); the body
	// names the erasure (erasure_id) and when it finished (erased_at,
	// absent while it runs).
	CodeGone = "gone"
	// CodeRangeNotSatisfiable: a line range (?lines=) that starts past
	// the end of the text; the message and X-Total-Lines give its count.
	CodeRangeNotSatisfiable = "range_not_satisfiable"
)

// retryAfterSeconds is the Retry-After of a 503: long enough for a
// restarting dependency, short enough for an agent waiting on it.
const retryAfterSeconds = 5

// apiError is an answer other than success. Field names the request field
// that is wrong; Index and Path locate the problem inside a conversation
// (the message index and the field inside that message) when the field is
// a conversation.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Index   *int   `json:"index,omitempty"`
	Path    string `json:"path,omitempty"`
	// RunID is the run that holds a conflicting event id.
	RunID string `json:"run_id,omitempty"`
	// ErasureID and ErasedAt answer a read of an erased session (410).
	ErasureID string     `json:"erasure_id,omitempty"`
	ErasedAt  *time.Time `json:"erased_at,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header.
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

// unavailable is the answer while a dependency is down.
func unavailable(what string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: retryAfterSeconds,
		Message: what + " is unavailable; retry later"}
}

// Outage names the dependency an error says is down or too slow, or "":
// the API's 503 and the MCP tools' "unavailable". Postgres and S3 are
// classified by their own packages (one place per dependency); Temporal
// by its service errors.
func Outage(err error) string {
	switch {
	case gateway.TemporalOutage(err):
		return "the workflow service (Temporal)"
	case blob.IsOutage(err):
		return "the object store (S3)"
	case store.IsRetryable(err):
		return "the database (Postgres)"
	case errors.Is(err, context.DeadlineExceeded):
		return "a dependency"
	}
	return ""
}

// errorBody is the one shape of every error answer.
type errorBody struct {
	Error *apiError `json:"error"`
}

// badRequest names the wrong field.
func badRequest(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// notFound is the answer for anything unknown or owned by another tenant:
// the two must be indistinguishable.
func notFound(what string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// classify maps an error to its answer. Anything not recognised is a 500.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var refused *ratelimit.Refusal
	if errors.As(err, &refused) {
		return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Message: refused.Reason,
			RetryAfter: refused.RetryAfterSeconds()}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
			Message: fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit)}
	}
	var ie *gateway.InputError
	if errors.As(err, &ie) {
		out := badRequest(ie.Field, "%s", ie.Error())
		var ce *conversation.Error
		var pe *conversation.PairingError
		switch {
		case errors.As(err, &ce):
			if ce.Index >= 0 {
				out.Index = &ce.Index
			}
			out.Path = ce.Field
		case errors.As(err, &pe):
			out.Index = &pe.Index
			out.Path = "block " + strconv.Itoa(pe.Block)
		}
		return out
	}
	switch runview.Status(err) {
	case http.StatusGone:
		var gone *store.SessionGoneError
		errors.As(err, &gone)
		out := &apiError{Status: http.StatusGone, Code: CodeGone, Field: "session", Message: gone.Error(), ErasureID: gone.Erasure.ID}
		if !gone.Erasure.FinishedAt.IsZero() {
			t := gone.Erasure.FinishedAt.UTC()
			out.ErasedAt = &t
		}
		return out
	case http.StatusNotFound:
		if missing := runview.Missing(err); missing != "" {
			return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: missing}
		}
		return notFound("resource")
	}
	var conflict *gateway.ConflictError
	if errors.As(err, &conflict) {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "event_id", Message: err.Error(), RunID: conflict.RunID}
	}
	var held *gateway.BaseHeldError
	if errors.As(err, &held) {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "base.run_id", Message: held.Error(), RunID: held.RunID}
	}
	var breaker *gateway.BreakerOpenError
	if errors.As(err, &breaker) {
		return &apiError{Status: http.StatusConflict, Code: CodeBreakerOpen, Message: breaker.Reason,
			RetryAfter: max(1, int(time.Until(breaker.Until).Seconds()+0.999))}
	}
	switch {
	case errors.Is(err, gateway.ErrSessionErasing):
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "session", Message: err.Error()}
	case errors.Is(err, gateway.ErrConflict):
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "event_id", Message: err.Error()}
	}
	if what := Outage(err); what != "" {
		return unavailable(what)
	}
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

// writeError writes the common error body.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, errorBody{Error: e})
}

// writeJSON writes v as the JSON answer with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a programming error gets here (an unencodable type).
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error: cannot encode the answer"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decode reads a JSON request body into dst. Unknown fields, trailing data
// and wrong types are 400s naming the field; a body over the limit is a
// 413 (the limit itself is set by ServeHTTP).
func decode(r *http.Request, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return badRequest("", "Content-Type must be application/json, got %q", ct)
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			var tooLarge *http.MaxBytesError
			if errors.As(terr, &tooLarge) {
				return terr
			}
			return badRequest("", "request body holds more than one JSON value")
		}
		return nil
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("", "request body is empty: a JSON object is expected")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "request body is truncated JSON")
	case errors.As(err, &syntax):
		return badRequest("", "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return badRequest("", "request body must be a JSON object, got %s", typeErr.Value)
		}
		return badRequest(field, "%s: must be %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(field, "unknown field %q", field)
	}
	return badRequest("", "cannot read request body: %s", err.Error())
}

// jsonTypeName names a Go kind in JSON terms for error messages.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int64", "int32", "uint", "uint64", "float64", "float32":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a " + kind
}
