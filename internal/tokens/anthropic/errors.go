package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a count that failed: a transport failure (Cause), an error
// answer (Status, Type), or a counter paused by an earlier answer
// (Paused). Its text names the status and Anthropic's error type only:
// the answer's message is left out, as it may quote the request.
type Error struct {
	// Status is the HTTP status (0 without an answer).
	Status int
	// Type is Anthropic's error type ("rate_limit_error",
	// "overloaded_error", "invalid_request_error", ...), or
	// "malformed_answer" for a 200 without input_tokens.
	Type string
	// RetryAfter is the wait the answer asked for (retry-after), or what
	// is left of the pause.
	RetryAfter time.Duration
	// Paused: no call was made, an earlier answer asked to wait.
	Paused bool
	// Cause is the transport error of a call without an answer.
	Cause error
}

// Error describes the failure.
func (e *Error) Error() string {
	switch {
	case e.Paused:
		return fmt.Sprintf("endpoint paused for %s after an earlier answer", e.RetryAfter.Round(time.Second))
	case e.Cause != nil && e.Status == 0:
		return fmt.Sprintf("no answer: %v", e.Cause)
	case e.Cause != nil:
		return fmt.Sprintf("HTTP %d: %v", e.Status, e.Cause)
	}
	s := fmt.Sprintf("HTTP %d", e.Status)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// Unwrap is the transport error, if any.
func (e *Error) Unwrap() error { return e.Cause }

// Retryable reports whether the same request may succeed later: the one
// place that decides. A transport failure (connection refused, reset,
// timeout), 408, 429 (rate_limit_error), 529 (overloaded_error) and
// any other 5xx are passing; 400 (invalid_request_error), 401, 403, 404,
// 413 and a malformed answer are not. A paused counter is passing but
// makes no call to retry.
func (e *Error) Retryable() bool {
	switch {
	case e.Paused:
		return false
	case e.Status == 0:
		return e.Cause != nil
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status >= 500:
		return true
	}
	switch e.Type {
	case "rate_limit_error", "overloaded_error", "api_error", "timeout_error":
		return true
	}
	return false
}

// Auth reports whether the key was refused (401, 403): every count fails
// the same way until an operator changes it.
func (e *Error) Auth() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Type == "authentication_error" || e.Type == "permission_error"
}

// errorOf reads an error answer: {"type":"error","error":{"type":...,
// "message":...}} and its retry-after header.
func errorOf(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now())}
	var answer struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &answer) == nil {
		e.Type = answer.Error.Type
	}
	return e
}

// retryAfter reads the retry-after header: seconds (possibly fractional)
// or an HTTP date; 0 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 24*3600 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
