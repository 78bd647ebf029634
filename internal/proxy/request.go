package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/jsonscan"
)

// routeKind is what the proxy does with a POST to a route.
type routeKind int

const (
	routePass     routeKind = iota // forwarded as it came
	routeMessages                  // a turn: spliced, may start a compaction
	routeCount                     // a token count: spliced, never starts one
)

// protocol is one provider's wire format, as far as the proxy reads it.
type protocol interface {
	// route says what a POST to rest (the path after the route's
	// prefix, such as /v1/messages) is.
	route(rest string) routeKind
	// parse reads a request's conversation; an error means the request
	// goes upstream as it came.
	parse(body []byte, kind routeKind) (request, error)
	// format is the conversation format of the requests.
	format() conversation.Format
	// splice returns body with its conversation replaced by system
	// (nil: unchanged) and msgs, every other byte as it was.
	splice(body []byte, system json.RawMessage, msgs []json.RawMessage) ([]byte, error)
	// lasting says whether a message is one of the conversation's turns,
	// which a later request repeats, rather than a transient one a host
	// inserts for one request (Claude Code's system reminders).
	lasting(m json.RawMessage) bool
	// document is body as a conversation the gateway reads in this
	// protocol's format.
	document(body []byte) ([]byte, error)
	// counted is body as conversation.Parse reads it in format: the
	// request itself where it is one, so that counting, on every
	// request, parses it once.
	counted(body []byte) ([]byte, error)
	// messages are msgs (a request's own) as the messages of an
	// incremental event in that format.
	messages(msgs []json.RawMessage) (json.RawMessage, error)
	// output reads a run's output document.
	output(doc []byte) (system json.RawMessage, msgs []json.RawMessage, err error)
	// fail answers an error of the proxy's own in the provider's shape.
	fail(w http.ResponseWriter, status int, state, message string)
	// ping is what keeps a stream alive in this protocol while nothing
	// else is sent, and streamError an upstream error inside a stream
	// whose headers already left (body is the provider's answer).
	ping() string
	streamError(body []byte) string
	// reply reads the model's answers, for the recover tool the proxy
	// offers and answers (recover.go).
	reply() reply
}

// request is what the proxy read of a request.
type request struct {
	model  string
	system json.RawMessage
	msgs   []json.RawMessage
	// tools are the request's tool definitions, counted beside the
	// conversation, and beside is anything else so counted (a Responses
	// request's instructions).
	tools, beside json.RawMessage
	// stream says the host asked for a streamed answer.
	stream bool
	// prefix[i] is the digest of the system and the lasting messages of
	// msgs[:i+1], in order, and lasting[i] how many of them there are: a
	// later request extends this one's first K lasting messages when its
	// own digest after its K-th lasting message is the same. A transient
	// message (protocol.lasting) changes neither: a host that inserts and
	// removes reminders among its turns still extends its conversation.
	prefix  [][32]byte
	lasting []int
	// thread identifies the request's thread (hex), for a session the
	// host does not name; shape identifies its start (the system and
	// first message), which a token count shares with its turns.
	thread, shape string
	// pass, when set, says why the request goes upstream as it came.
	pass string
}

// digests fills prefix and shape from system and msgs.
func (r *request) digests(lasting func(json.RawMessage) bool) {
	sys := compact(r.system)
	h := sha256.Sum256(sys)
	r.prefix = make([][32]byte, len(r.msgs))
	r.lasting = make([]int, len(r.msgs))
	n := 0
	for i, m := range r.msgs {
		if lasting(m) {
			// A host moves its cache breakpoints to its newest messages
			// from one request to the next: a message is the same
			// message with or without one.
			if bare, err := withoutCacheControl(m); err == nil {
				m = bare
			}
			mh := sha256.Sum256(compact(m))
			h = sha256.Sum256(append(h[:], mh[:]...))
			n++
		}
		r.prefix[i], r.lasting[i] = h, n
	}
	// The start is the system prompt and the first message that is not
	// one: hosts that run one agent share their system prompt across
	// all of its sessions, and a chat request carries it as its first
	// message.
	var start [][]byte
	for _, m := range r.msgs {
		if bare, err := withoutCacheControl(m); err == nil {
			m = bare // a host moves its breakpoints from request to request
		}
		start = append(start, compact(m))
		if !isSystem(m) {
			break
		}
	}
	r.shape = hexSum(append([][]byte{sys}, start...)...)
	if r.thread == "" {
		r.thread = r.shape
	}
}

// isSystem says whether m is a system or developer message.
func isSystem(m json.RawMessage) bool {
	var v struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(m, &v) == nil && (v.Role == "system" || v.Role == "developer")
}

// at is the index of the request's k-th lasting message (k ≥ 1).
func (r *request) at(k int) (int, bool) {
	for i, n := range r.lasting {
		if n == k && (i == 0 || r.lasting[i-1] < k) {
			return i, true
		}
	}
	return 0, false
}

// hexSum is the hex SHA-256 of parts, each ended by a NUL.
func hexSum(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compact is v without insignificant white space, so that a host that
// indents differently from one request to the next still extends its
// conversation.
func compact(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return v
	}
	return b.Bytes()
}

// setFields returns the JSON object body with the top-level fields named
// in set given their new values (raw JSON), every other byte as it was;
// a field body lacks is added at its end, and a nil value leaves the
// field as it is.
func setFields(body []byte, set map[string]json.RawMessage) ([]byte, error) {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, errors.New("the request is not a JSON object")
	}
	var out bytes.Buffer
	out.Grow(len(body))
	done := map[string]bool{}
	fields := 0
	last := 0 // bytes before last are written
	i = jsonscan.SkipSpace(body, i+1)
	for i < len(body) && body[i] != '}' {
		if body[i] == ',' {
			i = jsonscan.SkipSpace(body, i+1)
			continue
		}
		if body[i] != '"' {
			return nil, fmt.Errorf("unexpected %q at byte %d", body[i], i)
		}
		kEnd := jsonscan.StringEnd(body, i)
		var key string
		if err := json.Unmarshal(body[i:kEnd], &key); err != nil {
			return nil, fmt.Errorf("field name at byte %d: %w", i, err)
		}
		j := jsonscan.SkipSpace(body, kEnd)
		if j >= len(body) || body[j] != ':' {
			return nil, fmt.Errorf("missing ':' after field %q", key)
		}
		fields++
		vStart := jsonscan.SkipSpace(body, j+1)
		vEnd := jsonscan.ValueEnd(body, vStart)
		if v, ok := set[key]; ok && v != nil {
			out.Write(body[last:vStart])
			out.Write(v)
			last = vEnd
			done[key] = true
		}
		i = jsonscan.SkipSpace(body, vEnd)
	}
	if i >= len(body) {
		return nil, errors.New("the request's JSON object is not closed")
	}
	out.Write(body[last:i])
	// Fields the body lacks, in a fixed order.
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if done[k] || set[k] == nil {
			continue
		}
		if fields > 0 {
			out.WriteByte(',')
		}
		fields++
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(set[k])
	}
	out.Write(body[i:])
	return out.Bytes(), nil
}

// array is msgs as one JSON array, each element's bytes as they are.
func array(msgs []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// withoutCacheControl is message m without its cache_control
// breakpoints, every other byte as it was. A host moves its breakpoints
// to its newest messages from one request to the next, so a message is
// the same message with or without one (request.digests); and the
// output's messages carry the breakpoints the host had put on the
// messages a compaction kept, which, spliced before the messages the host
// appended since, would add up past the four the Messages API allows
// ("Found 5") and no longer mark where the host's cache is. The field is
// cut out of the bytes rather than the message re-encoded, so that its
// other bytes, key order and escapes included, stay the host's.
func withoutCacheControl(m json.RawMessage) (json.RawMessage, error) {
	const key = `"cache_control"`
	if !bytes.Contains(m, []byte(key)) {
		return m, nil
	}
	out := make([]byte, 0, len(m))
	rest := []byte(m)
	for {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			out = append(out, rest...)
			break
		}
		// A key: an unescaped quote cannot sit inside a string, so the
		// name followed by a colon is the field, wherever it is.
		j := jsonscan.SkipSpace(rest, i+len(key))
		if j >= len(rest) || rest[j] != ':' {
			out = append(out, rest[:i+len(key)]...)
			rest = rest[i+len(key):]
			continue
		}
		end := jsonscan.ValueEnd(rest, jsonscan.SkipSpace(rest, j+1))
		if end > len(rest) {
			return nil, fmt.Errorf("cache_control at byte %d: value not closed", len(out)+i)
		}
		before := bytes.TrimRight(rest[:i], " \t\r\n")
		after := rest[jsonscan.SkipSpace(rest, end):]
		switch {
		case len(before) > 0 && before[len(before)-1] == ',':
			// "a":1, "cache_control":{…} → "a":1
			out = append(out, before[:len(before)-1]...)
		case len(after) > 0 && after[0] == ',':
			// {"cache_control":{…}, "b":2 → {"b":2
			out = append(out, before...)
			after = after[jsonscan.SkipSpace(after, 1):]
		default:
			out = append(out, before...)
		}
		rest = after
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("cache_control: the message does not read without it")
	}
	return out, nil
}
