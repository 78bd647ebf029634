package proxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// maxLines and maxLineBytes bound the sessions one proxy process
// remembers, by count and by the bytes of the outputs they hold; the
// least recently used is forgotten first, and its next request rebuilds
// it from the store (restoreLocked).
const (
	maxLines     = 10000
	maxLineBytes = 256 << 20
)

// retryAfterFailure is how long a session whose compaction failed waits
// before the proxy starts another: its requests go upstream whole
// meanwhile.
const retryAfterFailure = 30 * time.Second

// runDeadline bounds the proxy's wait for one compaction run.
const runDeadline = 30 * time.Minute

// lines are the sessions the proxy knows, by tenant and session, and by
// the start of their conversation (for a token count, which carries no
// thread id).
type lines struct {
	mu      sync.Mutex
	bySess  *lru.Cache[string, *line]
	byShape *lru.Cache[string, *line]
	// bytes are what the lines of bySess hold of their outputs.
	bytes int64
}

func newLines() *lines {
	ls := &lines{}
	// The callback runs under ls.mu (every Add and RemoveOldest does).
	ls.bySess, _ = lru.NewWithEvict(maxLines, func(_ string, l *line) { ls.bytes -= l.size.Load() })
	ls.byShape, _ = lru.New[string, *line](maxLines)
	return ls
}

// hold records that l now holds size bytes of output, and forgets the
// least recently used lines while all hold more than maxLineBytes. A line
// already forgotten (a compaction that ended after it was) is not
// counted: it is gone with its last request.
func (ls *lines) hold(l *line, size int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if cached, ok := ls.bySess.Peek(l.tenant + "\x00" + l.session); !ok || cached != l {
		l.size.Store(size)
		return
	}
	ls.bytes += size - l.size.Swap(size)
	for ls.bytes > maxLineBytes && ls.bySess.Len() > 1 {
		ls.bySess.RemoveOldest()
	}
}

// get is the line of tenant's session, made when new. A token count
// names no thread, so a count whose session the host did not name
// (byShape) is found by the conversation's start, which its turns share;
// a turn's session, named or derived from its thread, is its own.
func (ls *lines) get(tenant, session, shape string, byShape bool) *line {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	key := tenant + "\x00" + session
	if l, ok := ls.bySess.Get(key); ok {
		ls.byShape.Add(tenant+"\x00"+shape, l)
		return l
	}
	if l, ok := ls.byShape.Get(tenant + "\x00" + shape); ok && byShape {
		return l
	}
	l := &line{tenant: tenant, session: session}
	ls.bySess.Add(key, l)
	ls.byShape.Add(tenant+"\x00"+shape, l)
	return l
}

// line is one session as the proxy splices it: the output of its latest
// compaction and how many of the host's messages it replaces, and the
// compaction in flight.
type line struct {
	tenant, session string

	mu sync.Mutex
	// The committed splice: run baseRun's output (its system and
	// messages) replaces the host's messages up to its covered-th lasting
	// one (request.lasting), whose digest starts with prefix (prefixID,
	// as the run's event id says it).
	baseRun, baseSHA string
	outSystem        json.RawMessage
	outMsgs          []json.RawMessage
	covered          int
	prefix           string
	// restored says the line has looked up what the store recorded of
	// the session (its latest output, if a proxy run made it), once per
	// process: a restarted API process, or another one behind the same
	// balancer, splices where the session was.
	restored bool
	// syncedAt is when the line last checked its output against the
	// store (Config.SyncEvery).
	syncedAt time.Time
	// size is how many bytes of output the line holds (lines.hold).
	size atomic.Int64
	// The compaction in flight: done closes when it ends.
	running bool
	runID   string
	done    chan struct{}
	// After a failed compaction, none starts before retryAt.
	retryAt time.Time
	lastErr string
	// The session's latest request and when it came (Config.ColdAfter):
	// last is kept only when it is past the cold trigger, for the
	// compaction idle arms.
	last   *turn
	lastAt time.Time
	idle   *time.Timer
	// snap is where the session's snapshot chain ended (snapshot.go):
	// read and written by the snapshot writer's goroutine only.
	snap struct {
		known  bool // looked up in the store once
		to     int
		digest string
	}
}

// turn is one request on a line.
type turn struct {
	proto           protocol
	tenant, session string
	body            []byte
	req             request
	limit           int
	preset          string
	presetNamed     bool // the host named the preset (X-Compactor-Preset)
	counting        bool
	// hold, when set, is called before a wait and its result after it:
	// a streaming request keeps its stream alive meanwhile.
	hold func() (release func())
}

// serve returns the body to send upstream for t (nil: t's own) and the
// state header, starting a compaction when the conversation crosses the
// trigger and waiting for one in flight when it would not fit.
func (l *line) serve(ctx context.Context, p *Proxy, t turn) ([]byte, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var waitedFor time.Duration
	if !l.restored || (l.baseRun != "" && time.Since(l.syncedAt) > p.cfg.SyncEvery) {
		l.restoreLocked(ctx, p, t.proto)
	}
	up, spliced := l.spliceLocked(t)
	n, err := p.count(t, up)
	if err != nil {
		return nil, "forwarded; not compacted: " + err.Error()
	}
	l.noteLocked(p, t, n)
	if p.snapshots != nil && !t.counting {
		p.snapshots.note(l, t)
	}
	trigger := int(p.cfg.Trigger * float64(t.limit))
	if !t.counting && n >= trigger && !l.running && time.Now().After(l.retryAt) {
		l.startLocked(p, t, up, spliced)
	}
	if n > t.limit && l.running && !t.counting {
		// The one case that waits: the request would not fit, and the
		// compaction that makes it fit is on its way. When it ends and
		// the request still does not fit (the host appended more than
		// that compaction covered, a large tool result), one of the
		// request itself is started and waited for, within the same
		// bound.
		release := func() {}
		if t.hold != nil {
			release = t.hold()
		}
		waited := time.Now()
		deadline := time.NewTimer(p.cfg.WaitFor)
		runID := l.runID
		for n > t.limit && l.running {
			done := l.done
			runID = l.runID
			l.mu.Unlock()
			expired := false
			select {
			case <-done:
			case <-deadline.C:
				expired = true
			case <-ctx.Done():
				expired = true
			}
			l.mu.Lock()
			up, spliced = l.spliceLocked(t)
			if n, err = p.count(t, up); err != nil {
				deadline.Stop()
				release()
				return nil, "forwarded; not compacted: " + err.Error()
			}
			if expired {
				break
			}
			if n > t.limit && !l.running && time.Now().After(l.retryAt) {
				l.startLocked(p, t, up, spliced)
			}
		}
		deadline.Stop()
		release()
		if n > t.limit {
			state := fmt.Sprintf("degraded; over the limit (%d of %d tokens) after waiting %s for run %s", n, t.limit,
				time.Since(waited).Round(time.Millisecond), runID)
			if l.lastErr != "" {
				state += " (" + l.lastErr + ")"
			}
			return up, state
		}
		waitedFor = time.Since(waited).Round(time.Millisecond)
	}
	state := "forwarded"
	if spliced {
		state = "spliced; run=" + l.baseRun
	}
	switch {
	case l.running && l.runID != "":
		state += "; compacting run=" + l.runID
	case l.running:
		state += "; compacting"
	case l.lastErr != "" && !spliced:
		state = "degraded; " + l.lastErr
	}
	if waitedFor > 0 {
		state += fmt.Sprintf("; waited %s", waitedFor)
	}
	return up, state
}

// noteLocked keeps t as the session's latest request, n tokens as it
// goes upstream, and arms the idle timer: a session that then gets no
// request for Config.ColdAfter compacts its latest request in the
// background (idle), when it is past the cold trigger.
func (l *line) noteLocked(p *Proxy, t turn, n int) {
	if p.cfg.ColdAfter <= 0 || t.counting {
		return
	}
	l.lastAt, l.last = time.Now(), nil
	if float64(n) >= p.cfg.ColdTrigger*float64(t.limit) {
		t.hold = nil
		l.last = &t
	}
	p.lines.hold(l, outputSize(l.outSystem, l.outMsgs)+l.lastBytes())
	if l.idle == nil {
		l.idle = time.AfterFunc(p.cfg.ColdAfter, func() { l.coldStart(p) })
		return
	}
	l.idle.Reset(p.cfg.ColdAfter)
}

// lastBytes is the size of the latest request the line keeps.
func (l *line) lastBytes() int64 {
	if l.last == nil {
		return 0
	}
	return int64(len(l.last.body))
}

// coldStart compacts the session's latest request once the session has
// been idle for Config.ColdAfter, past which the provider's prompt cache
// of it has expired: the host's next request is written to the cache
// whole whatever it is, so a compaction now costs no cache it would
// have kept, and makes that write the smaller conversation's. A session
// under the trigger is compacted then rather than in the middle of a
// later hot streak.
func (l *line) coldStart(p *Proxy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A request that came meanwhile re-armed the timer and is the latest
	// now; one that is running compacts already.
	if l.last == nil || l.running || time.Since(l.lastAt) < p.cfg.ColdAfter || time.Now().Before(l.retryAt) {
		return
	}
	last := *l.last
	l.last = nil
	p.lines.hold(l, outputSize(l.outSystem, l.outMsgs))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l.baseRun != "" && time.Since(l.syncedAt) > p.cfg.SyncEvery {
		// Idle for minutes: the session may have been erased or
		// compacted elsewhere since.
		l.restoreLocked(ctx, p, last.proto)
	}
	up, spliced := l.spliceLocked(last)
	l.startLocked(p, last, up, spliced)
}

// spliceLocked is what goes upstream for t: the line's output followed by
// the messages the host appended since, when t extends what the output
// replaced; else t's own body (a new line of the session: a rewind, the
// host's own compaction, a side call).
func (l *line) spliceLocked(t turn) ([]byte, bool) {
	if l.baseRun == "" || l.covered == 0 {
		return t.body, false
	}
	end, ok := t.req.at(l.covered)
	if !ok || prefixID(t.req.prefix[end]) != l.prefix {
		return t.body, false
	}
	msgs := make([]json.RawMessage, 0, len(l.outMsgs)+len(t.req.msgs)-end-1)
	msgs = append(msgs, l.outMsgs...)
	msgs = append(msgs, t.req.msgs[end+1:]...)
	body, err := t.proto.splice(t.body, l.outSystem, msgs)
	if err != nil {
		return t.body, false
	}
	return body, true
}

// count is the size of body (t's conversation, spliced or not) in tokens
// of t's model, with the model's safety factor: its system prompt and
// messages, and its tool definitions, which take their room in the
// model's window too.
func (p *Proxy) count(t turn, body []byte) (int, error) {
	doc, err := t.proto.counted(body)
	if err != nil {
		return 0, fmt.Errorf("the conversation does not read: %w", err)
	}
	conv, err := conversation.Parse(doc, t.proto.format())
	if err != nil {
		return 0, fmt.Errorf("the conversation does not parse: %w", err)
	}
	counter, err := p.counter(t.req.model)
	if err != nil {
		return 0, err
	}
	return tokens.Conversation(counter, conv) + p.toolTokens(t, offersRecovery(body)), nil
}

// toolTokens is the size of t's tool definitions, and of the recover
// tool's when the proxy offers it (recover.go): offered says the body
// names it.
func (p *Proxy) toolTokens(t turn, offered bool) int {
	defs := slices.Concat(compact(t.req.tools), compact(t.req.beside))
	if offered && p.deps.Recover != nil {
		defs = append(defs, recoverDefinition...)
	}
	if len(defs) == 0 {
		return 0
	}
	counter, err := p.counter(t.req.model)
	if err != nil {
		return 0
	}
	return counter.Count(string(defs))
}

// counter counts model's tokens with its safety factor, as a run does.
func (p *Proxy) counter(model string) (tokens.Counter, error) {
	counter, err := tokens.New(tokens.EncodingForModel(model))
	if err != nil {
		return nil, err
	}
	factor, prefix := 1.0, ""
	if counter.Name() != tokens.Chars {
		factor, prefix = p.cfg.Limits.Factor(model)
	}
	return tokens.Scale(tokens.Shared(counter), factor, prefix)
}

// startLocked starts a compaction of t's conversation in the background:
// an incremental event on the line's output when t is spliced (the
// upload is then what the host appended), else the whole conversation.
func (l *line) startLocked(p *Proxy, t turn, up []byte, spliced bool) {
	last := len(t.req.msgs) - 1
	covered := t.req.lasting[last]
	if covered == 0 {
		return // nothing but transient messages
	}
	prefix := prefixID(t.req.prefix[last])
	// The run sizes the conversation; the tool definitions go with every
	// request beside it, so the conversation has the rest of the window.
	// The output will name the recover tool, which the proxy then
	// offers beside them.
	room := t.limit - p.toolTokens(t, true)
	if room < t.limit/10 {
		l.lastErr, l.retryAt = fmt.Sprintf("the tool definitions alone take %d of the %d-token limit", t.limit-room, t.limit),
			time.Now().Add(retryAfterFailure)
		return
	}
	ev := gateway.Event{Tenant: t.tenant, Session: t.session, Kind: gateway.KindProxy, Model: t.req.model,
		ContextLimit: room, Preset: t.preset,
		EventID: proxyEventID(covered, prefix)}
	if !t.presetNamed && p.cfg.Target > 0 {
		// Deeper than the trigger, so that a compaction frees enough to
		// be worth the prompt cache it rewrites (docs/proxy.md).
		ev.Overrides = json.RawMessage(fmt.Sprintf(`{"target_usage":%g,"history":{"trigger_usage":%g}}`, p.cfg.Target, p.cfg.Target))
	}
	whole, err := t.proto.document(up)
	if err != nil {
		l.lastErr, l.retryAt = "the conversation cannot be sent for compaction: "+err.Error(), time.Now().Add(retryAfterFailure)
		return
	}
	if spliced {
		if covered == l.covered {
			// Nothing appended since the output: compacting it again
			// would only repeat its run.
			return
		}
		end, _ := t.req.at(l.covered) // spliced: it is there
		ev.Base = &gateway.Base{RunID: l.baseRun, SHA256: l.baseSHA}
		if ev.Messages, err = t.proto.messages(t.req.msgs[end+1:]); err != nil {
			l.lastErr, l.retryAt = "the conversation cannot be sent for compaction: "+err.Error(), time.Now().Add(retryAfterFailure)
			return
		}
	} else {
		ev.Conversation = whole
	}
	l.running, l.runID, l.done = true, "", make(chan struct{})
	go l.compact(p, t.proto, ev, whole, covered, prefix)
}

// compact runs one compaction of the line to its end and splices its
// output in.
func (l *line) compact(p *Proxy, proto protocol, ev gateway.Event, whole []byte, covered int, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), runDeadline)
	defer cancel()
	runID, err := l.submit(ctx, p, ev, whole)
	if err == nil {
		l.mu.Lock()
		l.runID = runID
		l.mu.Unlock()
		err = l.await(ctx, p, proto, runID, covered, prefix)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.lastErr = err.Error()
		l.retryAt = time.Now().Add(retryAfterFailure)
		p.log.Warn("proxy: compaction not spliced; requests go upstream whole meanwhile", "tenant", l.tenant, "session", l.session,
			"run", runID, "error", err)
	} else {
		l.lastErr = ""
	}
	l.running = false
	close(l.done)
}

// submit starts the run of ev: an incremental event the gateway refuses
// (its base is no longer the session's latest output: another client
// compacted the session) is sent again whole; an event id already taken
// by this very conversation is that run.
func (l *line) submit(ctx context.Context, p *Proxy, ev gateway.Event, whole []byte) (string, error) {
	sub, err := p.deps.Compactor.Submit(ctx, ev)
	var in *gateway.InputError
	if ev.Base != nil && errors.As(err, &in) && strings.HasPrefix(in.Field, "base") {
		ev.Base, ev.Messages, ev.Conversation = nil, nil, whole
		ev.EventID += "-whole"
		sub, err = p.deps.Compactor.Submit(ctx, ev)
	}
	var conflict *gateway.ConflictError
	var held *gateway.BaseHeldError
	switch {
	case errors.As(err, &conflict):
		return conflict.RunID, nil
	case errors.As(err, &held):
		return held.RunID, nil
	case err != nil:
		return "", fmt.Errorf("start a compaction: %w", err)
	}
	return sub.RunID, nil
}

// await waits for run runID and splices its output in.
func (l *line) await(ctx context.Context, p *Proxy, proto protocol, runID string, covered int, prefix string) error {
	out, err := p.deps.Compactor.Wait(ctx, runID)
	if err != nil {
		return fmt.Errorf("wait for run %s: %w", runID, err)
	}
	if out.OutputSHA256 == "" {
		return fmt.Errorf("run %s ended %s without an output", runID, out.Status)
	}
	doc, err := p.deps.Outputs(ctx, l.tenant, runID)
	if err != nil {
		return fmt.Errorf("read run %s's output: %w", runID, err)
	}
	system, msgs, err := proto.output(doc)
	if err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.baseRun, l.baseSHA, l.outSystem, l.outMsgs, l.covered, l.prefix = runID, out.OutputSHA256, system, msgs, covered, prefix
	l.syncedAt = time.Now()
	p.lines.hold(l, outputSize(system, msgs)+l.lastBytes())
	return nil
}

// prefixID names the digest of the host's messages a compaction covers in
// its event id: its first 8 bytes in hex, within one session's line.
func prefixID(d [32]byte) string { return hex.EncodeToString(d[:8]) }

// proxyEventID is the event id of a compaction of the host's first
// covered messages, whose digest's id is prefix: the same conversation
// gives the same event (a retried start joins its run), and the line is
// rebuilt from it after a restart (parseProxyEventID).
func proxyEventID(covered int, prefix string) string {
	return fmt.Sprintf("proxy-%d-%s", covered, prefix)
}

// parseProxyEventID reads proxyEventID's figures back ("-whole", the
// resend of an incremental event as a whole conversation, included).
func parseProxyEventID(id string) (covered int, prefix string, ok bool) {
	id = strings.TrimSuffix(id, "-whole")
	rest, found := strings.CutPrefix(id, "proxy-")
	if !found {
		return 0, "", false
	}
	n, hexID, found := strings.Cut(rest, "-")
	if !found || len(hexID) != 16 {
		return 0, "", false
	}
	if _, err := hex.DecodeString(hexID); err != nil {
		return 0, "", false
	}
	covered, err := strconv.Atoi(n)
	if err != nil || covered < 1 {
		return 0, "", false
	}
	return covered, hexID, true
}

// restoreLocked brings the line in line with what the store recorded:
// the session's latest output, when a proxy run made it (its event id
// says how many of the host's messages it covers). A session without an
// output (erased, or never compacted) splices nothing; one whose latest
// output another client made goes whole until the proxy compacts it. A
// store that cannot be read leaves the line as it is, to be tried again.
func (l *line) restoreLocked(ctx context.Context, p *Proxy, proto protocol) {
	if p.deps.Latest == nil {
		l.restored = true
		return
	}
	runID, eventID, sha, err := p.deps.Latest(ctx, l.tenant, l.session)
	if err != nil {
		p.log.Warn("proxy: the session's latest output could not be read; trying again on its next request",
			"tenant", l.tenant, "session", l.session, "error", err)
		return
	}
	l.restored, l.syncedAt = true, time.Now()
	if runID == l.baseRun && sha == l.baseSHA {
		return
	}
	// What the line held is no longer the session's state.
	l.baseRun, l.baseSHA, l.outSystem, l.outMsgs, l.covered, l.prefix = "", "", nil, nil, 0, ""
	p.lines.hold(l, 0)
	covered, prefix, ok := parseProxyEventID(eventID)
	if runID == "" || !ok {
		return
	}
	doc, err := p.deps.Outputs(ctx, l.tenant, runID)
	if err != nil {
		l.restored = false
		return
	}
	system, msgs, err := proto.output(doc)
	if err != nil {
		return
	}
	l.baseRun, l.baseSHA, l.outSystem, l.outMsgs, l.covered, l.prefix = runID, sha, system, msgs, covered, prefix
	p.lines.hold(l, outputSize(system, msgs)+l.lastBytes())
}

// outputSize is the bytes an output's system and messages hold.
func outputSize(system json.RawMessage, msgs []json.RawMessage) int64 {
	n := int64(len(system))
	for _, m := range msgs {
		n += int64(len(m))
	}
	return n
}
