package conversation

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"unicode/utf8"
)

// JSON value types as named in error messages.
const (
	jsonObject  = "object"
	jsonArray   = "array"
	jsonString  = "string"
	jsonNumber  = "number"
	jsonBoolean = "boolean"
	jsonNull    = "null"
)

// jsonKind names the type of a raw JSON value from its first byte. The value
// must come from a document already known to be valid JSON.
func jsonKind(raw []byte) string {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return jsonObject
		case '[':
			return jsonArray
		case '"':
			return jsonString
		case 't', 'f':
			return jsonBoolean
		case 'n':
			return jsonNull
		default:
			return jsonNumber
		}
	}
	return "nothing"
}

// decodeObject decodes a raw JSON object into its fields. It checks the
// kind first because encoding/json turns null into a nil map without error.
func decodeObject(raw []byte) (map[string]json.RawMessage, bool) {
	if jsonKind(raw) != jsonObject {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, true
}

// decodeArray decodes a raw JSON array into its elements.
func decodeArray(raw []byte) ([]json.RawMessage, bool) {
	if jsonKind(raw) != jsonArray {
		return nil, false
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, false
	}
	return a, true
}

// decodeString decodes a raw JSON string.
func decodeString(raw []byte) (string, bool) {
	if jsonKind(raw) != jsonString {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// decodeObjects decodes an array whose elements should all be objects (a
// message list, a turn list). Large conversations are decoded in one pass
// when every element is an object; otherwise bad is the index of the first
// element that is not, and kind its type. A syntax error in raw is returned
// as err.
func decodeObjects(raw []byte) (objs []map[string]json.RawMessage, bad int, kind string, err error) {
	err = json.Unmarshal(raw, &objs)
	if err == nil {
		for i, m := range objs {
			if m == nil {
				return nil, i, jsonNull, nil
			}
		}
		return objs, -1, "", nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil, -1, "", err
	}
	items, ok := decodeArray(raw)
	if !ok {
		return nil, -1, "", err
	}
	for i, it := range items {
		if k := jsonKind(it); k != jsonObject {
			return nil, i, k, nil
		}
	}
	return nil, -1, "", err
}

// take removes a key from a field map and reports whether it was there.
func take(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := m[key]
	if ok {
		delete(m, key)
	}
	return v, ok
}

// nilIfEmpty keeps Extra nil when no unknown field was left, so that a
// conversation built in code and one parsed from JSON compare equal.
func nilIfEmpty(m map[string]json.RawMessage) map[string]json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

// marshalFields encodes leftover fields back into one raw object. Keys come
// out sorted, so the result is deterministic.
func marshalFields(m map[string]json.RawMessage) json.RawMessage {
	w := newWriter(0)
	o := w.object()
	// Values came out of a valid document; raw cannot fail on them.
	_ = o.extra(m)
	o.end()
	return json.RawMessage(w.bytes())
}

// writer renders JSON by hand: known fields in a fixed order, then unknown
// fields verbatim in sorted key order. Building the output ourselves (rather
// than marshalling maps) keeps raw values exactly as the source had them,
// makes the output deterministic, and avoids a second copy of large texts.
type writer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newWriter(sizeHint int) *writer {
	w := &writer{}
	w.buf.Grow(sizeHint)
	w.enc = json.NewEncoder(&w.buf)
	// Agent transcripts are full of <, > and &: escaping them would triple
	// their size for no benefit outside HTML.
	w.enc.SetEscapeHTML(false)
	return w
}

func (w *writer) bytes() []byte { return w.buf.Bytes() }

// str writes a JSON string. Callers check UTF-8 validity first, because the
// encoder would silently replace bad bytes.
func (w *writer) str(s string) {
	// Encoding a string cannot fail.
	_ = w.enc.Encode(s)
	w.buf.Truncate(w.buf.Len() - 1) // Encode appends a newline.
}

// raw writes a raw JSON value, compacted. It fails on invalid JSON or
// invalid UTF-8, which only happens when code (not a parser) filled the
// value.
func (w *writer) raw(v []byte) error {
	if !utf8.Valid(v) {
		return errInvalidUTF8
	}
	n := w.buf.Len()
	if err := json.Compact(&w.buf, v); err != nil {
		w.buf.Truncate(n)
		return errInvalidJSON
	}
	return nil
}

// rawError is a sentinel-like reason for writer.raw failures, wrapped by
// callers into an *Error that names the place.
type rawError string

func (e rawError) Error() string { return string(e) }

const (
	errInvalidUTF8 = rawError("holds invalid UTF-8")
	errInvalidJSON = rawError("is not valid JSON")
)

// object is a JSON object being written.
type object struct {
	w       *writer
	written []string
}

func (w *writer) object() *object {
	w.buf.WriteByte('{')
	return &object{w: w}
}

// key writes the next key (and the comma before it).
func (o *object) key(k string) {
	if len(o.written) > 0 {
		o.w.buf.WriteByte(',')
	}
	o.w.str(k)
	o.w.buf.WriteByte(':')
	o.written = append(o.written, k)
}

func (o *object) has(k string) bool {
	for _, w := range o.written {
		if w == k {
			return true
		}
	}
	return false
}

// extra writes unknown fields in sorted key order, skipping keys already
// written (a known field rendered from the model wins over a stale copy in
// Extra) and reserved keys (Extra entries that describe a known field rather
// than being one).
func (o *object) extra(m map[string]json.RawMessage, reserved ...string) error {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
next:
	for _, k := range keys {
		if o.has(k) {
			continue
		}
		for _, r := range reserved {
			if k == r {
				continue next
			}
		}
		if !utf8.ValidString(k) {
			return &Error{Index: -1, Field: "", Reason: "extra field name " + errInvalidUTF8.Error()}
		}
		o.key(k)
		if err := o.w.raw(m[k]); err != nil {
			return errAt(-1, k, "extra field value %s", err.Error())
		}
	}
	return nil
}

func (o *object) end() { o.w.buf.WriteByte('}') }

// relocate moves an *Error produced without a message context (Index -1,
// Field relative) under a message index and parent field.
func relocate(err error, index int, parent string) error {
	if e, ok := err.(*Error); ok && e.Index < 0 {
		return &Error{Index: index, Field: field(parent, e.Field), Reason: e.Reason}
	}
	return err
}
