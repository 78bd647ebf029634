package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The references a compaction leaves (offloads, cut results, the archived
// middle) name the recover_context tool. A host that only changed its
// base URL has no such tool, and a reference it cannot follow is a
// permanent loss. So when a spliced request holds references and the
// host has no tool of that name, the proxy offers the tool itself and
// answers the model's calls to it: the call and its answer go upstream
// in a follow-up request the proxy makes, and the host sees only the
// model's answer after it, never a tool it does not know. The follow-up
// requests are the proxy's own: they never reach a line, so a recovery
// answer is never compacted again.

// RecoverTool is the tool the proxy offers and answers.
const RecoverTool = strategy.RecoverTool

// maxRecoverRounds bounds the follow-ups of one request: a model that
// keeps asking gets its host's answer with the calls left out.
const maxRecoverRounds = 4

// maxRecoverChars bounds one recovery answer; a longer text is answered
// in part, with the line range to ask for next.
const maxRecoverChars = 24_000

// recoverDescription tells the model what the tool reads.
const recoverDescription = "Reads back content that context compaction cut from this conversation. " +
	"Where content was cut, the conversation names this tool and an id: call it with that id " +
	"(and, for a long text, a line range such as 1-200) to get the content verbatim."

// recoverSchema is the tool's input, as JSON Schema.
const recoverSchema = `{"type":"object","properties":{` +
	`"id":{"type":"string","description":"the id named where the content was cut"},` +
	`"lines":{"type":"string","description":"optional line range such as 1-200"}},` +
	`"required":["id"]}`

// recoverDefinition is the tool's definition as counted in a request's
// tools (the Messages shape; the chat one differs by a few tokens).
var recoverDefinition = `{"name":"` + RecoverTool + `","description":` + string(errorJSON(recoverDescription)) +
	`,"input_schema":` + recoverSchema + `}`

// Recover reads what a recover id names, for tenant's session only
// (audit.Service.RecoverContext): the text (lines "A-B" of it, when
// lines is set) and the whole text's line count. An error's message is
// what the model reads; it must say what is wrong without internals.
type Recover func(ctx context.Context, tenant, session, id, lines string) (text []byte, totalLines int, err error)

// recoverCall is one call of the model to the recover tool.
type recoverCall struct {
	id    string // the call's id, which its answer names
	input json.RawMessage
}

// recoverAnswer is the text answering a call.
type recoverAnswer struct {
	callID string
	text   string
	isErr  bool
}

// reply reads the model's answers for the recover flow, in a protocol's
// shape.
type reply interface {
	// offer returns body with the recover tool added to its tools; ok is
	// false when the host has a tool of that name already (its own
	// recovery, through the MCP server) or body does not read.
	offer(body []byte) (out []byte, ok bool)
	// calls reads a whole (not streamed) answer: the recover calls and
	// how many calls of the host's own tools it makes.
	calls(resp []byte) (recover []recoverCall, host int, err error)
	// message is a whole answer as what it appends to the request: the
	// assistant message (Messages, chat), or the answer's output items
	// as the model produced them (Responses).
	message(resp []byte) ([]json.RawMessage, error)
	// strip is a whole answer without its recover calls.
	strip(resp []byte) ([]byte, error)
	// withoutOffer is a whole answer without a recover call as the host
	// gets it: as it came, but for what the provider echoes of the tool
	// it was offered (the Responses API lists the request's tools in
	// its answer).
	withoutOffer(resp []byte) []byte
	// answers are the messages (or input items) that answer the calls.
	answers(as []recoverAnswer) []json.RawMessage
	// extend is body with msgs appended to its conversation: its
	// messages, or its input items (Responses).
	extend(body []byte, msgs []json.RawMessage) ([]byte, error)
	// stream starts reading a streamed answer.
	stream() streamReply
}

// streamReply reads a streamed answer event by event, across the
// rounds of one request: what the host has been sent of it, and what is
// held back since the model began a recover call.
type streamReply interface {
	// event returns what of ev goes to the host now (nil: nothing, held
	// or dropped).
	event(ev sseEvent) []byte
	// calls are this round's recover calls, and host how many calls of
	// the host's own tools it made.
	calls() (recover []recoverCall, host int)
	// message is this round's answer as what it appends to the request
	// (reply.message).
	message() ([]json.RawMessage, error)
	// release is what was held back, without the recover calls: the
	// host's own calls that came after one, and the answer's end.
	release() []byte
	// next starts the round of the follow-up request.
	next()
}

// sseEvent is one server-sent event: its raw bytes (the blank line
// included), its event name and its data.
type sseEvent struct {
	raw  []byte
	name string
	data []byte
}

// readEvents calls fn with each event of an SSE body until it ends or fn
// returns false. A last event without its blank line still counts.
func readEvents(body io.Reader, fn func(sseEvent) bool) error {
	rd := bufio.NewReaderSize(body, 64<<10)
	var ev sseEvent
	var data [][]byte
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			ev.raw = append(ev.raw, line...)
			text := bytes.TrimRight(line, "\r\n")
			switch {
			case len(text) == 0:
				ev.data = bytes.Join(data, []byte("\n"))
				if !fn(ev) {
					return nil
				}
				ev, data = sseEvent{}, nil
				continue
			case bytes.HasPrefix(text, []byte("event:")):
				ev.name = strings.TrimSpace(string(text[len("event:"):]))
			case bytes.HasPrefix(text, []byte("data:")):
				d := text[len("data:"):]
				if len(d) > 0 && d[0] == ' ' {
					d = d[1:]
				}
				data = append(data, d)
			}
		}
		if err != nil {
			if len(ev.raw) > 0 {
				ev.data = bytes.Join(data, []byte("\n"))
				fn(ev)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// answer reads each call's id back for t's session, into the room body
// (the follow-up so far) leaves under t's limit: a text past that room,
// or past maxRecoverChars, is cut at a line end, naming the range to ask
// for next.
func (p *Proxy) answer(ctx context.Context, t turn, body []byte, calls []recoverCall) []recoverAnswer {
	// A follow-up that cannot be counted still gets an answer: a
	// quarter of the window, as if the conversation held the rest.
	room := t.limit / 4 / max(1, len(calls))
	counter, err := p.counter(t.req.model)
	if n, cerr := p.count(t, body); err == nil && cerr == nil {
		// Each answer's framing (its role, ids, a line-range note) takes
		// a few dozen tokens.
		room = (t.limit - n - 64*len(calls)) / max(1, len(calls))
	}
	out := make([]recoverAnswer, 0, len(calls))
	for _, c := range calls {
		var in struct {
			ID    string `json:"id"`
			Lines string `json:"lines"`
		}
		if err := json.Unmarshal(c.input, &in); err != nil || strings.TrimSpace(in.ID) == "" {
			out = append(out, recoverAnswer{callID: c.id, isErr: true,
				text: RecoverTool + ": the input must be an object with an id, the one named where the content was cut"})
			continue
		}
		text, total, err := p.deps.Recover(ctx, t.tenant, t.session, strings.TrimSpace(in.ID), strings.TrimSpace(in.Lines))
		if err != nil {
			out = append(out, recoverAnswer{callID: c.id, isErr: true, text: RecoverTool + ": " + err.Error()})
			continue
		}
		limit := maxRecoverChars
		if counter != nil {
			if n := counter.Count(string(text)); n > room {
				// Characters in proportion to the tokens that fit, a
				// little under.
				limit = min(limit, int(float64(len(text))*float64(max(room, 0))/float64(n)*0.9))
			}
		}
		if limit < 200 {
			out = append(out, recoverAnswer{callID: c.id, isErr: true, text: fmt.Sprintf(
				"%s: the conversation is at its context limit (%d tokens); there is no room for this text now", RecoverTool, t.limit)})
			continue
		}
		out = append(out, recoverAnswer{callID: c.id, text: cutAnswer(string(text), in.Lines, total, limit)})
	}
	return out
}

// cutAnswer is text, or its first lines within limit characters and the
// range that follows them.
func cutAnswer(text, lines string, total, limit int) string {
	if len(text) <= limit {
		return text
	}
	first := 1
	if lines != "" {
		if _, err := fmt.Sscanf(lines, "%d", &first); err != nil || first < 1 {
			first = 1
		}
	}
	cut := strings.LastIndexByte(text[:limit], '\n')
	if cut <= 0 {
		// One long line: cut within it, on a rune boundary.
		cut = limit
		for cut > 0 && !utf8RuneStart(text[cut]) {
			cut--
		}
		return text[:cut] + fmt.Sprintf("\n[… the rest of line %d is longer than one answer holds]", first)
	}
	// text[:cut] is whole lines, the last one's newline cut off.
	shown := strings.Count(text[:cut], "\n") + 1
	next := first + shown
	return text[:cut] + fmt.Sprintf("\n[… lines %d-%d follow: call %s with lines, e.g. %d-%d]",
		next, total, RecoverTool, next, min(total, next+shown-1))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// withTool returns body with def added at the end of its tools, so that
// the host's own definitions keep their bytes and their cache; ok is
// false when body or one of its tools does not read, or the host has a
// tool named RecoverTool already (its own recovery, through the MCP
// server). name reads a tool definition's name in the protocol's shape.
func withTool(body []byte, def string, name func(json.RawMessage) (string, error)) (out []byte, ok bool) {
	var v struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &v) != nil {
		return body, false
	}
	for _, t := range v.Tools {
		if n, err := name(t); err != nil || n == RecoverTool {
			return body, false
		}
	}
	out, err := setFields(body, map[string]json.RawMessage{"tools": array(append(v.Tools, json.RawMessage(def)))})
	if err != nil {
		return body, false
	}
	return out, true
}

// withRecovery appends msgs to body's messages: the follow-up request
// that carries the model's calls and their answers (reply.extend of the
// Messages and chat shapes).
func withRecovery(body []byte, msgs []json.RawMessage) ([]byte, error) {
	var v struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("read the request's messages: %w", err)
	}
	return setFields(body, map[string]json.RawMessage{"messages": array(append(v.Messages, msgs...))})
}

// followUp is body with the model's answer msgs and the answers to its
// recover calls appended.
func (p *Proxy) followUp(ctx context.Context, t turn, rp reply, body []byte, msgs []json.RawMessage, calls []recoverCall) ([]byte, error) {
	asked, err := rp.extend(body, msgs)
	if err != nil {
		return nil, err
	}
	return rp.extend(asked, rp.answers(p.answer(ctx, t, asked, calls)))
}

// offersRecovery reports whether the body going upstream holds a
// reference a compaction left, so that the model may need the tool.
func offersRecovery(body []byte) bool {
	return bytes.Contains(body, []byte(RecoverTool+" tool"))
}

// sendRecovering sends body upstream for t with the recover tool offered
// (reply.offer), answering the model's calls to it with follow-up
// requests until the model answers without one; the host gets that
// answer (streamed: the events of every round, as one answer). held says
// the stream's headers have left already (keepAlive).
func (p *Proxy) sendRecovering(w http.ResponseWriter, r *http.Request, u *upstream, t turn, body []byte, state string, held bool) {
	rp := t.proto.reply()
	body, ok := rp.offer(body)
	if !ok {
		if held {
			p.sendHeld(w, r, u, t.proto, body, state)
		} else {
			p.send(w, r, u, body, state)
		}
		return
	}
	if t.req.stream {
		p.recoverStream(w, r, u, t, rp, body, state, held)
		return
	}
	p.recoverWhole(w, r, u, t, rp, body, state)
}

// recoverWhole is sendRecovering for a request answered whole. A
// follow-up that fails gives the host the answer before it, the recover
// calls left out: the host asked for one answer, and has a good one.
func (p *Proxy) recoverWhole(w http.ResponseWriter, r *http.Request, u *upstream, t turn, rp reply, body []byte, state string) {
	recovered := 0
	var prev *http.Response // the answer before a follow-up, stripped
	var prevOut []byte
	for round := 0; ; round++ {
		resp, err := p.roundTrip(r, u, body)
		var out []byte
		if err == nil {
			out, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if prev != nil && (err != nil || resp.StatusCode != http.StatusOK) {
			writeAnswer(w, prev, prevOut, recoveredState(state, recovered)+"; "+RecoverTool+" follow-up failed, calls left out")
			return
		}
		if err != nil {
			t.proto.fail(w, http.StatusBadGateway, "refused; upstream unreachable", err.Error())
			return
		}
		calls, host, cerr := rp.calls(out)
		if resp.StatusCode != http.StatusOK || cerr != nil || len(calls) == 0 {
			if resp.StatusCode == http.StatusOK {
				out = rp.withoutOffer(out)
			}
			writeAnswer(w, resp, out, recoveredState(state, recovered))
			return
		}
		stripped, serr := rp.strip(out)
		if serr != nil {
			// An answer that names the call but cannot be read without
			// it: the provider's answer as it is.
			writeAnswer(w, resp, out, recoveredState(state, recovered)+"; "+RecoverTool+" not answered: "+serr.Error())
			return
		}
		if host > 0 || round == maxRecoverRounds-1 {
			writeAnswer(w, resp, stripped, recoveredState(state, recovered)+"; "+RecoverTool+" calls left out")
			return
		}
		msg, err := rp.message(out)
		if err == nil {
			body, err = p.followUp(r.Context(), t, rp, body, msg, calls)
		}
		if err != nil {
			writeAnswer(w, resp, stripped, recoveredState(state, recovered)+"; "+RecoverTool+" not answered: "+err.Error())
			return
		}
		recovered += len(calls)
		prev, prevOut = resp, stripped
	}
}

// recoverStream is sendRecovering for a streamed request: every event
// goes to the host as it arrives until the model begins a recover call;
// from there the round is held, and when it ends the call is answered
// and the follow-up's events follow on the same stream. A follow-up that
// fails releases the held round without the call instead; a stream that
// breaks off is ended with the provider's error event.
func (p *Proxy) recoverStream(w http.ResponseWriter, r *http.Request, u *upstream, t turn, rp reply, body []byte, state string, held bool) {
	sr := rp.stream()
	rc := http.NewResponseController(w)
	recovered := 0
	if held {
		defer func() { w.Header().Set(HeaderState, recoveredState(state, recovered)) }()
	}
	var pending []byte // the held round before a follow-up, without its calls
	for round := 0; ; round++ {
		resp, err := p.roundTrip(r, u, body)
		if pending != nil && (err != nil || resp.StatusCode != http.StatusOK) {
			if resp != nil {
				resp.Body.Close()
			}
			_, _ = w.Write(pending)
			return
		}
		if err != nil {
			if !held {
				t.proto.fail(w, http.StatusBadGateway, "refused; upstream unreachable", err.Error())
				return
			}
			_, _ = io.WriteString(w, t.proto.streamError([]byte(err.Error())))
			return
		}
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if !held {
				writeAnswer(w, resp, msg, state)
				return
			}
			_, _ = io.WriteString(w, t.proto.streamError(msg))
			return
		}
		if !held {
			copyHeaders(w.Header(), resp.Header)
			w.Header().Set(HeaderState, state+"; "+RecoverTool+" offered")
			w.WriteHeader(resp.StatusCode)
			held = true
		}
		gone := false
		err = readEvents(resp.Body, func(ev sseEvent) bool {
			if out := sr.event(ev); out != nil {
				if _, werr := w.Write(out); werr != nil {
					gone = true
					return false
				}
				_ = rc.Flush()
			}
			return true
		})
		resp.Body.Close()
		if gone || r.Context().Err() != nil {
			return
		}
		if err != nil {
			_, _ = w.Write(sr.release())
			_, _ = io.WriteString(w, t.proto.streamError([]byte("the upstream's stream broke off: "+err.Error())))
			return
		}
		calls, host := sr.calls()
		if len(calls) == 0 || host > 0 || round == maxRecoverRounds-1 {
			_, _ = w.Write(sr.release())
			return
		}
		// The host waits while the store is read and the follow-up
		// starts: a ping keeps its stream alive.
		_, _ = io.WriteString(w, t.proto.ping())
		_ = rc.Flush()
		msg, err := sr.message()
		if err == nil {
			body, err = p.followUp(r.Context(), t, rp, body, msg, calls)
		}
		pending = sr.release()
		if err != nil {
			_, _ = w.Write(pending)
			return
		}
		recovered += len(calls)
		sr.next()
	}
}

// below is how many of a round's recover calls (by index) come before
// index i: what a later block or call moves down by once they are left
// out of what the host gets.
func below(recover map[int]bool, i int) int {
	n := 0
	for r := range recover {
		if r < i {
			n++
		}
	}
	return n
}

// recoveredState is state with how many recover calls were answered.
func recoveredState(state string, n int) string {
	if n == 0 {
		return state
	}
	return fmt.Sprintf("%s; recovered %d", state, n)
}

// roundTrip sends body upstream as r's request, with r's headers but the
// compactor's own.
func (p *Proxy) roundTrip(r *http.Request, u *upstream, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.upstreamURL(r.URL).String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		ck := http.CanonicalHeaderKey(k)
		// The compactor's headers stay here; the transport asks for and
		// undoes its own compression, since what the proxy reads or
		// re-sends must be plain.
		if compactorHeader(ck) || ck == "Accept-Encoding" || ck == "Content-Length" || ck == "Connection" {
			continue
		}
		out.Header[ck] = vs
	}
	resp, err := p.deps.Transport.RoundTrip(out)
	if err != nil {
		if r.Context().Err() == nil {
			p.log.Warn("proxy: upstream unreachable", "upstream", u.name, "error", err)
		}
		return nil, fmt.Errorf("the compactor's proxy could not reach the %s upstream (%s)", u.name, u.target.Host)
	}
	return resp, nil
}

// copyHeaders copies an upstream answer's headers but the ones that
// describe its bytes on the wire, which the proxy's answer sets itself.
func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Content-Encoding", "Transfer-Encoding", "Connection", "Keep-Alive", "Trailer":
			continue
		}
		dst[k] = vs
	}
}

// writeAnswer writes an upstream answer (status and headers as it came)
// with body.
func writeAnswer(w http.ResponseWriter, resp *http.Response, body []byte, state string) {
	copyHeaders(w.Header(), resp.Header)
	w.Header().Set(HeaderState, state)
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}
