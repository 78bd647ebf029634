package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"github.com/ctxcompact/orchestrator/internal/jsonscan"
	"slices"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// canonicalSum is sha256(canonicalJSON(data)), computed as the canonical
// form is written instead of from a copy of it. canonicalJSON decodes the
// whole value into a tree of maps and interfaces and encodes it again: for
// a conversation of megabytes that tree and the encoder's buffers held
// several times the conversation at once, per request, and allocated
// about nine times it. Here each string goes from the document to the
// hash as it is read: what is held at once is one object's keys.
//
// It writes what encoding/json would, byte for byte: object keys decoded,
// the last of repeated keys winning, sorted; each string decoded as
// encoding/json decodes it (U+FFFD for invalid UTF-8 and for a lone
// surrogate) and encoded again as it encodes it (its short escapes,
// \u00XX, \u2028 and \u2029, HTML characters as they are); numbers, true,
// false and null as written; no whitespace. A document that is not
// exactly one valid JSON value, or is nested deeper than
// maxCanonicalDepth, takes canonicalJSON's own path, so its answer (an
// error, or the first value) stays the same.
func canonicalSum(data []byte) ([sha256.Size]byte, error) {
	if !json.Valid(data) || nestedDeeper(data, maxCanonicalDepth) {
		canon, err := canonicalJSON(data)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		return sha256.Sum256(canon), nil
	}
	h := sha256.New()
	w := bufio.NewWriterSize(h, 32<<10)
	c := canonicalWriter{data: data, w: w}
	if i := jsonscan.SkipSpace(data, 0); i < len(data) {
		c.value(i)
	}
	if err := w.Flush(); err != nil {
		return [sha256.Size]byte{}, err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}

// maxCanonicalDepth bounds canonicalWriter's recursion; encoding/json
// refuses documents nested deeper than 10000.
const maxCanonicalDepth = 1000

// canonicalWriter writes the canonical form of a valid JSON document.
// Its writer is a bufio.Writer over a hash, whose errors Flush reports.
type canonicalWriter struct {
	data []byte
	w    *bufio.Writer
	// members holds the keys of the objects being written, innermost
	// last, so that each object does not allocate its own list.
	members []member
}

// member is one key of an object and where its value is: lit is the
// key's literal without its quotes, key what it decodes to (lit itself
// when it has nothing to decode).
type member struct {
	lit, key   []byte
	start, end int
}

// value writes the value starting at i and returns the index after it.
func (c *canonicalWriter) value(i int) int {
	d := c.data
	switch d[i] {
	case '{':
		return c.object(i)
	case '[':
		c.w.WriteByte('[')
		i = jsonscan.SkipSpace(d, i+1)
		for first := true; d[i] != ']'; first = false {
			if !first {
				c.w.WriteByte(',')
			}
			i = jsonscan.SkipSpace(d, c.value(i))
			if d[i] == ',' {
				i = jsonscan.SkipSpace(d, i+1)
			}
		}
		c.w.WriteByte(']')
		return i + 1
	case '"':
		end := jsonscan.StringEnd(d, i)
		c.str(d[i+1 : end-1])
		return end
	default:
		// A number (kept as written, as json.Number), true, false or
		// null.
		end := jsonscan.ValueEnd(d, i)
		c.w.Write(d[i:end])
		return end
	}
}

// object writes the object at d[i] with its keys sorted and returns the
// offset past it.
func (c *canonicalWriter) object(i int) int {
	d := c.data
	base := len(c.members)
	i = jsonscan.SkipSpace(d, i+1)
	for d[i] != '}' {
		kEnd := jsonscan.StringEnd(d, i)
		lit := d[i+1 : kEnd-1]
		vStart := jsonscan.SkipSpace(d, jsonscan.SkipSpace(d, kEnd)+1) // past :
		vEnd := jsonscan.ValueEnd(d, vStart)
		c.members = append(c.members, member{lit: lit, key: decodeLiteral(lit), start: vStart, end: vEnd})
		i = jsonscan.SkipSpace(d, vEnd)
		if d[i] == ',' {
			i = jsonscan.SkipSpace(d, i+1)
		}
	}
	// The last of repeated keys wins, as in a decoded map; the stable
	// sort keeps equal keys in order.
	n := len(c.members) - base
	slices.SortStableFunc(c.members[base:], func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.w.WriteByte('{')
	first := true
	// The values' objects add their keys after these and take them off
	// again; c.members may move meanwhile, so it is indexed.
	for k := range n {
		m := c.members[base+k]
		if k+1 < n && bytes.Equal(c.members[base+k+1].key, m.key) {
			continue
		}
		if !first {
			c.w.WriteByte(',')
		}
		first = false
		c.str(m.lit)
		c.w.WriteByte(':')
		c.value(m.start)
	}
	c.w.WriteByte('}')
	c.members = c.members[:base]
	return i + 1
}

// str writes the string whose literal (without its quotes) is lit as
// encoding/json writes the text it decodes to.
func (c *canonicalWriter) str(lit []byte) {
	c.w.WriteByte('"')
	if plainString(lit) {
		// Decoding and encoding again would give the same bytes.
		c.w.Write(lit)
	} else {
		eachRune(lit, c)
	}
	c.w.WriteByte('"')
}

// plainString reports whether the content of a string literal is what
// encoding/json writes for the text it decodes to: no escape, no byte
// that encoding/json escapes (a control character, a quote, invalid
// UTF-8, U+2028, U+2029).
func plainString(lit []byte) bool {
	for i := 0; i < len(lit); {
		b := lit[i]
		if b < utf8.RuneSelf {
			if b < ' ' || b == '"' || b == '\\' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(lit[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}

// runeSink takes the characters of a decoded string one by one.
type runeSink interface{ put(r rune) }

// put writes one character of a decoded string as encoding/json's
// appendString does without HTML escaping (a decoded string is valid
// UTF-8: invalid bytes became U+FFFD).
func (c *canonicalWriter) put(r rune) {
	switch {
	case r == '"' || r == '\\':
		c.w.WriteByte('\\')
		c.w.WriteByte(byte(r))
	case r < ' ':
		switch r {
		case '\b':
			c.w.WriteString(`\b`)
		case '\f':
			c.w.WriteString(`\f`)
		case '\n':
			c.w.WriteString(`\n`)
		case '\r':
			c.w.WriteString(`\r`)
		case '\t':
			c.w.WriteString(`\t`)
		default:
			c.w.WriteString(`\u00`)
			c.w.WriteByte(hexDigits[r>>4])
			c.w.WriteByte(hexDigits[r&0xF])
		}
	case r == '\u2028' || r == '\u2029':
		c.w.WriteString(`\u202`)
		c.w.WriteByte(hexDigits[r&0xF])
	default:
		c.w.WriteRune(r)
	}
}

const hexDigits = "0123456789abcdef"

// eachRune puts into sink each character that the literal lit (a string
// literal of a valid document, without its quotes) decodes to, as
// encoding/json decodes it: escapes undone, a surrogate pair joined, a
// lone surrogate and each byte of invalid UTF-8 U+FFFD.
func eachRune(lit []byte, sink runeSink) {
	fn := sink.put
	for i := 0; i < len(lit); {
		c := lit[i]
		switch {
		case c == '\\':
			i += 2
			switch lit[i-1] {
			case 'b':
				fn('\b')
			case 'f':
				fn('\f')
			case 'n':
				fn('\n')
			case 'r':
				fn('\r')
			case 't':
				fn('\t')
			case 'u':
				r := hex4(lit[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					if i+6 <= len(lit) && lit[i] == '\\' && lit[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(lit[i+2:])); pair != unicode.ReplacementChar {
							r = pair
							i += 6
						} else {
							r = unicode.ReplacementChar
						}
					} else {
						r = unicode.ReplacementChar
					}
				}
				fn(r)
			default: // " \ /
				fn(rune(lit[i-1]))
			}
		case c < utf8.RuneSelf:
			fn(rune(c))
			i++
		default:
			r, size := utf8.DecodeRune(lit[i:])
			fn(r) // U+FFFD for an invalid byte, as encoding/json decodes it
			i += size
		}
	}
}

// hex4 is the value of the four hex digits at the start of b (a \u
// escape of a valid document has them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// decodeLiteral is what the literal lit decodes to: lit itself when it
// has no escape and is valid UTF-8, which is what object keys are.
func decodeLiteral(lit []byte) []byte {
	if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
		return lit
	}
	out := &runeBytes{b: make([]byte, 0, len(lit))}
	eachRune(lit, out)
	return out.b
}

// runeBytes gathers decoded characters as UTF-8.
type runeBytes struct{ b []byte }

func (o *runeBytes) put(r rune) { o.b = utf8.AppendRune(o.b, r) }

// nestedDeeper reports whether a valid document nests objects and arrays
// more than max deep.
func nestedDeeper(d []byte, max int) bool {
	depth := 0
	for j := 0; j < len(d); j++ {
		switch d[j] {
		case '"':
			j = jsonscan.StringEnd(d, j) - 1
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}
