// Package idcheck validates the identifiers callers choose (session names,
// event ids, replay request ids) at the edge, before anything is stored:
// they become Postgres keys, Temporal workflow ids and lines in operators'
// terminals, so they must be plain text.
package idcheck

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds an identifier, in bytes.
const MaxLen = 200

// Error names the identifier that is wrong and why.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// Unnamed is the error without its field name, for callers that name the
// field themselves.
func (e *Error) Unnamed() error { return errors.New(e.Reason) }

// Session validates a session name: an identifier without '/', which
// separates the parts of the session's workflow id.
func Session(v string) error {
	if err := check("session", v); err != nil {
		return err
	}
	if strings.ContainsRune(v, '/') {
		return &Error{Field: "session", Reason: "must not contain '/'"}
	}
	return nil
}

// EventID validates an event id.
func EventID(v string) error { return check("event_id", v) }

// RequestID validates a replay's request id.
func RequestID(v string) error { return check("request_id", v) }

// Check validates any identifier under the field name given.
func Check(field, v string) error { return check(field, v) }

// refused reports whether r may not appear in an identifier: the whole
// Unicode categories Cc (controls), Cf (format: zero-width, byte-order
// mark, bidi overrides), Zl and Zp (line and paragraph separators, which
// break a terminal's or a log's line like a newline does), so that no
// member of a category passes while its neighbours are refused.
func refused(r rune) bool {
	return r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// check: 1 to MaxLen bytes of valid UTF-8, no control, format or
// line/paragraph separator characters, no surrounding whitespace, not "."
// or "..".
func check(field, v string) error {
	switch {
	case v == "":
		return &Error{Field: field, Reason: "must not be empty"}
	case len(v) > MaxLen:
		return &Error{Field: field, Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(v), MaxLen)}
	case !utf8.ValidString(v):
		return &Error{Field: field, Reason: "is not valid UTF-8"}
	case v == "." || v == "..":
		return &Error{Field: field, Reason: fmt.Sprintf("must not be %q", v)}
	}
	if r, _ := utf8.DecodeRuneInString(v); unicode.IsSpace(r) {
		return &Error{Field: field, Reason: "must not start with whitespace"}
	}
	if r, _ := utf8.DecodeLastRuneInString(v); unicode.IsSpace(r) {
		return &Error{Field: field, Reason: "must not end with whitespace"}
	}
	for i, r := range v {
		if refused(r) {
			return &Error{Field: field, Reason: fmt.Sprintf("control, format or separator character %U at byte %d not allowed", r, i)}
		}
	}
	return nil
}
