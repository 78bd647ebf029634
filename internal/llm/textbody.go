package llm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// The text to summarize is most of a request, megabytes for a history
// summary. go-openai encodes a request whole, with encoding/json, in
// buffers that grow as they go: about ten times the text allocated and
// four copies of it held at once, per call. So the request carries a
// placeholder in its place, and the transport (captureTransport) sends
// the text itself, encoded as it is sent, straight from the caller's
// string. Everything else (the request's fields and headers, the answer,
// the errors) is still go-openai's.

// streamedText is the text of one call and the placeholder that stands
// for it in the request go-openai encodes.
type streamedText struct {
	placeholder string
	text        string
}

type streamedTextKey struct{}

// withStreamedText returns the request's user text as the placeholder to
// put in the request, and a context that tells the transport what to send
// in its place.
func withStreamedText(ctx context.Context, text string) (context.Context, string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return ctx, "", fmt.Errorf("placeholder for the text: %w", err)
	}
	st := &streamedText{placeholder: "ctxcompact-text-" + hex.EncodeToString(nonce[:]), text: text}
	return context.WithValue(ctx, streamedTextKey{}, st), st.placeholder, nil
}

// errPlaceholder is a request whose body does not hold its text's
// placeholder exactly once; it is never sent.
var errPlaceholder = errors.New("llm: the request body does not hold the text's placeholder exactly once")

// withText returns req with the text its context names in place of the
// placeholder in its body, or req itself when its context names none.
func withText(req *http.Request) (*http.Request, error) {
	st, ok := req.Context().Value(streamedTextKey{}).(*streamedText)
	if !ok || req.Body == nil {
		return req, nil
	}
	// go-openai's encoding of the request without the text: small.
	small, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("llm: read request body: %w", err)
	}
	quoted := []byte(`"` + st.placeholder + `"`)
	at := bytes.Index(small, quoted)
	if at < 0 || bytes.Count(small, quoted) != 1 {
		return nil, errPlaceholder
	}
	head, tail := small[:at+1], small[at+len(quoted)-1:] // each keeps its quote
	body := func() io.ReadCloser {
		return io.NopCloser(io.MultiReader(bytes.NewReader(head), &jsonTextReader{s: st.text}, bytes.NewReader(tail)))
	}
	out := req.Clone(req.Context())
	out.Body, out.GetBody = body(), func() (io.ReadCloser, error) { return body(), nil }
	out.ContentLength = int64(len(head) + jsonTextLen(st.text) + len(tail))
	return out, nil
}

// jsonTextReader reads s encoded as the inside of a JSON string, exactly
// as encoding/json encodes a string (HTML characters escaped, as
// json.Marshal does), a piece at a time.
type jsonTextReader struct {
	s   string
	i   int    // what of s is encoded
	buf []byte // encoded, not yet read
	out int    // what of buf is read
}

// jsonTextChunk is about how much is encoded at a time.
const jsonTextChunk = 32 << 10

func (r *jsonTextReader) Read(p []byte) (int, error) {
	if r.out == len(r.buf) {
		if r.i == len(r.s) {
			return 0, io.EOF
		}
		r.buf, r.i = appendJSONText(r.buf[:0], r.s, r.i, jsonTextChunk)
		r.out = 0
	}
	n := copy(p, r.buf[r.out:])
	r.out += n
	return n, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONText appends to dst the encoding of s from i on, as
// encoding/json's appendString writes it with HTML escaping (json.Marshal),
// until dst has grown by at least limit bytes or s ends, and returns dst
// and where in s it stopped (always between two characters as s decodes
// from its start, so that the pieces make the whole encoding).
func appendJSONText(dst []byte, s string, i, limit int) ([]byte, int) {
	stop := len(dst) + limit
	start := i
	for i < len(s) && len(dst)+(i-start) < stop {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				// Other control characters, and <, > and &.
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			start = i + size
		}
		i += size
	}
	return append(dst, s[start:i]...), i
}

// jsonTextLen is the length of appendJSONText's encoding of all of s.
func jsonTextLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			switch {
			case b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&':
				n++
			case b == '\\', b == '"', b == '\b', b == '\f', b == '\n', b == '\r', b == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if (c == utf8.RuneError && size == 1) || c == '\u2028' || c == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}
