package proxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/internal/metrics"
)

// Snapshot is one record of a session's latest state between
// compactions: the lasting messages From..To (counted from 1, as
// request.lasting counts them) of the host's conversation, in the host's
// own encoding, and its system prompt when From is 1. A record that does
// not start at 1 extends the record of the same session whose Digest is
// its Base: a session's snapshots are a chain, each holding only what is
// new since the one before, and a new chain starts where the host's
// conversation stopped extending the last one (a rewind, the host's own
// compaction, a side call).
type Snapshot struct {
	Tenant, Session string
	// Wire is the host's API ("anthropic-messages", "openai-chat",
	// "openai-responses"), which says how Body's messages read.
	Wire     string
	From, To int
	// Base is the digest of the conversation up to message From-1 (""
	// when From is 1), Digest of the conversation up to To: the SHA-256
	// chain of request.prefix, white space and cache breakpoints aside.
	Base, Digest string
	// Body is {"system": …, "messages": […]}.
	Body []byte
}

// ErrSnapshotBase is what Snapshots.Record answers for a record whose
// base the store does not hold (the session was erased, or its chain went
// under retention): the writer then starts a new chain.
var ErrSnapshotBase = errors.New("snapshot base not recorded")

// Snapshots records a session's snapshots: the store and S3 through an
// adapter (httpapi). Latest is where the session's newest record ended
// (0 and "" when it has none), so that a process that starts goes on
// with the chain rather than starting one.
type Snapshots interface {
	Record(ctx context.Context, s Snapshot) error
	Latest(ctx context.Context, tenant, session string) (to int, digest string, err error)
}

// maxPendingSnapshots bounds the sessions whose snapshot waits to be
// written; past it a new session's snapshot is dropped (and counted),
// never the request.
const maxPendingSnapshots = 1000

// snapshotWriter writes snapshots off the hot path: a request only notes
// itself as its line's latest (a newer one replaces it before it is
// written), and one goroutine writes what is new since the line's last
// record. A record that fails is not retried: the next one of the line
// starts from what was written, so the chain never has a gap.
type snapshotWriter struct {
	store   Snapshots
	log     *slog.Logger
	metrics *metrics.Metrics

	mu      sync.Mutex
	pending map[*line]turn
	order   []*line
	wake    chan struct{}
}

func newSnapshotWriter(store Snapshots, log *slog.Logger, m *metrics.Metrics) *snapshotWriter {
	w := &snapshotWriter{store: store, log: log, metrics: m, pending: map[*line]turn{}, wake: make(chan struct{}, 1)}
	go w.run()
	return w
}

// note makes t its line's latest state, to be written.
func (w *snapshotWriter) note(l *line, t turn) {
	t.hold = nil
	w.mu.Lock()
	_, queued := w.pending[l]
	switch {
	case queued:
	case len(w.pending) >= maxPendingSnapshots:
		w.mu.Unlock()
		w.count("dropped")
		return
	default:
		w.order = append(w.order, l)
	}
	w.pending[l] = t
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *snapshotWriter) run() {
	for range w.wake {
		for {
			w.mu.Lock()
			if len(w.order) == 0 {
				w.mu.Unlock()
				break
			}
			l := w.order[0]
			w.order = w.order[1:]
			t := w.pending[l]
			delete(w.pending, l)
			w.mu.Unlock()
			w.write(l, t)
		}
	}
}

// write records what t adds to l's chain. Only this goroutine reads and
// writes a line's snap fields.
func (w *snapshotWriter) write(l *line, t turn) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !l.snap.known {
		to, digest, err := w.store.Latest(ctx, t.tenant, t.session)
		if err != nil {
			w.count("failed")
			w.log.Warn("proxy: the session's latest snapshot could not be read; trying again on its next request",
				"tenant", t.tenant, "session", t.session, "error", err)
			return
		}
		l.snap.known, l.snap.to, l.snap.digest = true, to, digest
	}
	s, ok, err := snapshotOf(t, l.snap.to, l.snap.digest)
	if err != nil {
		w.count("failed")
		w.log.Warn("proxy: a snapshot could not be built", "tenant", t.tenant, "session", t.session, "error", err)
		return
	}
	if !ok {
		return // nothing new since the last record
	}
	err = w.store.Record(ctx, s)
	if errors.Is(err, ErrSnapshotBase) {
		// The chain this line knew is gone (the session was erased, or
		// its records went under retention): a new one, whole.
		if s, ok, err = snapshotOf(t, 0, ""); err == nil && ok {
			err = w.store.Record(ctx, s)
		}
	}
	if err != nil {
		// What the store holds is read again before the next record.
		l.snap.known = false
		w.count("failed")
		w.log.Warn("proxy: a snapshot could not be recorded; the next one of the session carries what it held",
			"tenant", t.tenant, "session", t.session, "error", err)
		return
	}
	l.snap.to, l.snap.digest = s.To, s.Digest
	w.count("recorded")
}

func (w *snapshotWriter) count(outcome string) { w.metrics.ProxySnapshot(outcome) }

// snapshotOf is the record of t's conversation after the chain's last
// record, which ended at lasting message to with digest: only the
// messages after it when t extends it, else the whole conversation (a
// new chain). ok is false when t adds nothing.
func snapshotOf(t turn, to int, digest string) (Snapshot, bool, error) {
	r := t.req
	n := 0
	if len(r.lasting) > 0 {
		n = r.lasting[len(r.lasting)-1]
	}
	if n == 0 {
		return Snapshot{}, false, nil
	}
	from := 1
	if to > 0 {
		if end, ok := r.at(to); ok && hex.EncodeToString(r.prefix[end][:]) == digest {
			if n == to {
				return Snapshot{}, false, nil
			}
			from = to + 1
		}
	}
	var msgs []json.RawMessage
	for i, m := range r.msgs {
		if r.lasting[i] >= from && (i == 0 || r.lasting[i-1] < r.lasting[i]) {
			msgs = append(msgs, m)
		}
	}
	rec := struct {
		System   json.RawMessage   `json:"system,omitempty"`
		Messages []json.RawMessage `json:"messages"`
	}{Messages: msgs}
	s := Snapshot{Tenant: t.tenant, Session: t.session, Wire: wireOf(t.proto), From: from, To: n}
	if from == 1 {
		rec.System = r.system
	} else {
		s.Base = digest
	}
	end, _ := r.at(n)
	s.Digest = hex.EncodeToString(r.prefix[end][:])
	body, err := json.Marshal(rec)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("encode snapshot: %w", err)
	}
	s.Body = body
	return s, true, nil
}

// wireOf names a protocol's API for a snapshot's reader.
func wireOf(p protocol) string {
	switch p.(type) {
	case anthropicProtocol:
		return "anthropic-messages"
	case responsesProtocol:
		return "openai-responses"
	default:
		return "openai-chat"
	}
}
