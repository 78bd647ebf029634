package conversation

import (
	"bytes"
	"encoding/json"
	"github.com/ctxcompact/orchestrator/internal/jsonscan"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"
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

// decodeString decodes a raw JSON string. Strings are most of a
// conversation, so the common case is unquoted here rather than by
// json.Unmarshal, which would check and scan the string once more.
func decodeString(raw []byte) (string, bool) {
	if jsonKind(raw) != jsonString {
		return "", false
	}
	if s, ok := unquote(raw); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// unquote decodes a JSON string literal exactly as json.Unmarshal does,
// without its separate validity scan. ok is false when s is not a valid
// literal, and also for one holding invalid UTF-8 (which json.Unmarshal
// replaces with U+FFFD): the caller then leaves it to json.Unmarshal.
func unquote(s []byte) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	s = s[1 : len(s)-1]
	// The decoded text, once there is an escape, in a buffer of the
	// literal's length (a decoded text is never longer) that becomes the
	// string without another copy.
	var b strings.Builder
	for i := 0; ; {
		// A run of characters that stand for themselves.
		j := i
		for j < len(s) && s[j] >= ' ' && s[j] != '"' && s[j] != '\\' {
			j++
		}
		if !utf8.Valid(s[i:j]) {
			return "", false
		}
		if j == len(s) && b.Cap() == 0 {
			return string(s), true
		}
		if b.Cap() == 0 {
			b.Grow(len(s))
		}
		b.Write(s[i:j])
		if j == len(s) {
			return b.String(), true
		}
		// An escape; a quote or a control character is invalid here.
		if s[j] != '\\' || j+1 == len(s) {
			return "", false
		}
		i = j + 2
		switch c := s[j+1]; c {
		case '"', '\\', '/':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(s[j:])
			if r < 0 {
				return "", false
			}
			i = j + 6
			if utf16.IsSurrogate(r) {
				// A valid pair makes one rune; anything else stands for
				// U+FFFD, and what follows is decoded on its own.
				if pair := utf16.DecodeRune(r, hex4(s[i:])); pair != unicode.ReplacementChar {
					r = pair
					i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
	}
}

// hex4 decodes the \uXXXX escape at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Taking a valid document apart.
//
// The parsers take a document apart level by level: the top level, the
// message list, each message, a tool call, its function. json.Unmarshal
// would check and scan every level again, a dozen passes over the text of
// a tool call. Parse checks the whole document once (checkSyntax); below
// that, the split functions find the parts of a value with a plain byte
// loop. They give what json.Unmarshal into map[string]json.RawMessage or
// []json.RawMessage gives (keys decoded, the last of repeated keys
// winning, values verbatim), but raw must be part of a valid JSON
// document: for other values (Extra filled by code) use decodeObject and
// decodeArray.
//
// The values share raw's bytes instead of copying them: most of them are
// strings that are decoded at once and dropped, and copies would hold the
// document a second time while it is parsed (megabytes). Their capacity
// ends where they do, so an append cannot write into the document; parse
// copies what the conversation keeps (Extra) before it returns, so a
// parsed conversation never holds the document's bytes.

// splitObject is decodeObject for a value of a valid document.
func splitObject(raw []byte) (map[string]json.RawMessage, bool) {
	if jsonKind(raw) != jsonObject {
		return nil, false
	}
	m := map[string]json.RawMessage{}
	i := jsonscan.SkipSpace(raw, 0) + 1 // past {
	for {
		i = jsonscan.SkipSpace(raw, i)
		if raw[i] == '}' {
			return m, true
		}
		end := jsonscan.StringEnd(raw, i)
		key, _ := decodeString(raw[i:end])
		i = jsonscan.SkipSpace(raw, jsonscan.SkipSpace(raw, end)+1) // past :
		end = jsonscan.ValueEnd(raw, i)
		m[key] = raw[i:end:end]
		i = jsonscan.SkipSpace(raw, end)
		if raw[i] == ',' {
			i++
		}
	}
}

// splitArray is decodeArray for a value of a valid document.
func splitArray(raw []byte) ([]json.RawMessage, bool) {
	if jsonKind(raw) != jsonArray {
		return nil, false
	}
	elems := elements(raw)
	a := make([]json.RawMessage, len(elems))
	for k, e := range elems {
		a[k] = e[:len(e):len(e)]
	}
	return a, true
}

// splitObjects takes apart an array of a valid document whose elements
// should all be objects (a message list, a turn list). When one is not, bad
// is its index and kind its type.
func splitObjects(raw []byte) (objs []map[string]json.RawMessage, bad int, kind string) {
	elems := elements(raw)
	for k, e := range elems {
		if kind := jsonKind(e); kind != jsonObject {
			return nil, k, kind
		}
	}
	objs = make([]map[string]json.RawMessage, len(elems))
	for k, e := range elems {
		objs[k], _ = splitObject(e)
	}
	return objs, -1, ""
}

// elements returns the elements of an array of a valid document, sharing
// raw's bytes.
func elements(raw []byte) [][]byte {
	var elems [][]byte
	i := jsonscan.SkipSpace(raw, 0) + 1 // past [
	for {
		i = jsonscan.SkipSpace(raw, i)
		if raw[i] == ']' {
			return elems
		}
		end := jsonscan.ValueEnd(raw, i)
		elems = append(elems, raw[i:end])
		i = jsonscan.SkipSpace(raw, end)
		if raw[i] == ',' {
			i++
		}
	}
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
