package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// An incremental event sends only what the agent appended since the
// session's latest output: the gateway reads that output back (checked
// against what the store recorded for this tenant and session, never
// taken from the caller as a key), appends the messages and goes on as
// for a whole conversation. The upload is then the new turns alone.

// BaseHeldError refuses an incremental event whose base another live run
// already continues (409, naming that run).
type BaseHeldError = store.BaseHeldError

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkBase checks an incremental event's fields before anything is read.
func checkBase(b Base, messages json.RawMessage) error {
	if b.RunID == "" {
		return &InputError{Field: "base.run_id", Err: errors.New("is required")}
	}
	if !hexSHA256.MatchString(b.SHA256) {
		return &InputError{Field: "base.sha256", Err: errors.New("must be the output's SHA-256 in lowercase hex")}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(messages, &items); err != nil || len(bytes.TrimSpace(messages)) == 0 {
		return &InputError{Field: "messages", Err: errors.New("must be a JSON array of messages in the base's format")}
	}
	if len(items) == 0 {
		return &InputError{Field: "messages", Err: errors.New("is empty: nothing was appended since the base")}
	}
	return nil
}

// continued rebuilds an incremental event's conversation: the session's
// latest output, which the base must name, with the messages appended
// (Submit checks it with checkContinued).
func (g *Gateway) continued(ctx context.Context, ev Event) (data, base []byte, err error) {
	// A session being erased refuses every event (409 naming the
	// session), a delta too; an erased one has no output to continue.
	var gone *store.SessionGoneError
	switch err := g.Store.CheckSessionGone(ctx, ev.Tenant, ev.Session); {
	case errors.As(err, &gone) && gone.Erasure.FinishedAt.IsZero():
		return nil, nil, ErrSessionErasing
	case errors.As(err, &gone):
		return nil, nil, &InputError{Field: "base.run_id", Err: fmt.Errorf("session %s was erased (erasure %s): send the whole conversation", ev.Session, gone.Erasure.ID)}
	case err != nil:
		return nil, nil, err
	}
	out, err := g.baseOutput(ctx, ev)
	if err != nil {
		return nil, nil, err
	}
	base, err = g.Blob.GetVerified(ctx, out.Key, out.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("read the base output: %w", err)
	}
	data, err = appendMessages(base, ev.Messages)
	return data, base, err
}

// checkContinued checks the conversation an incremental event rebuilt,
// as Submit parsed it: what does not parse or breaks tool pairing came
// with the messages (the base, whose bytes are base, is an output this
// service wrote). An error's message index is counted in the messages
// the caller sent, not in the rebuilt conversation.
func checkContinued(conv conversation.Conversation, parseErr error, base []byte) error {
	if parseErr != nil {
		var ce *conversation.Error
		if errors.As(parseErr, &ce) && ce.Index >= 0 {
			shifted := *ce
			shifted.Index = max(ce.Index-baseItems(base), 0)
			parseErr = &shifted
		}
		return &InputError{Field: "messages", Err: parseErr}
	}
	if err := conversation.CheckPairing(conv); err != nil {
		var pe *conversation.PairingError
		if errors.As(err, &pe) {
			shifted := *pe
			shifted.Index = max(pe.Index-baseMessages(base), 0)
			err = &shifted
		}
		return &InputError{Field: "messages", Err: err}
	}
	return nil
}

// baseItems is the number of items of base's message list, as JSON.
func baseItems(base []byte) int {
	start, end, err := messageList(base)
	if err != nil {
		return 0
	}
	var items []json.RawMessage
	if json.Unmarshal(base[start:end], &items) != nil {
		return 0
	}
	return len(items)
}

// observedTurns counts the agent's calls an incremental event shows: the
// assistant messages it appends to its base (a ReAct turn, which has no
// role, is one call), read from the appended messages alone. 0 for a
// whole conversation, whose last compaction is not known. They price the
// run's net saving over the session's own pace (contract.Run.ObservedTurns).
func observedTurns(ev Event) int {
	if ev.Base == nil {
		return 0
	}
	var items []struct {
		Role *string `json:"role"`
	}
	if json.Unmarshal(ev.Messages, &items) != nil {
		return 0
	}
	n := 0
	for _, it := range items {
		if it.Role == nil || *it.Role == "assistant" {
			n++
		}
	}
	return n
}

// baseMessages is the number of messages of base as parsed (an
// Anthropic system field is a message of its own there).
func baseMessages(base []byte) int {
	conv, err := conversation.ParseAny(base)
	if err != nil {
		return 0
	}
	return len(conv.Messages)
}

// baseOutput is the output an incremental event continues: the session's
// latest, which its base must name. A retry of an event already claimed
// rebuilds from the base it named then (the session has moved on since,
// with that very event), so that it answers its run as any retry does.
func (g *Gateway) baseOutput(ctx context.Context, ev Event) (store.Output, error) {
	claimed, err := g.Store.EventRun(ctx, ev.Tenant, ev.Session, ev.EventID)
	if err != nil {
		return store.Output{}, fmt.Errorf("read event %s: %w", ev.EventID, err)
	}
	if claimed != "" {
		r, err := g.Store.GetRun(ctx, ev.Base.RunID)
		if err != nil || r.Tenant != ev.Tenant || r.Session != ev.Session || r.OutputSHA256 != ev.Base.SHA256 || r.OutputKey == "" {
			return store.Output{}, &InputError{Field: "base.run_id", Err: fmt.Errorf("%s is not an output of session %s", ev.Base.RunID, ev.Session)}
		}
		return store.Output{RunID: r.ID, Key: r.OutputKey, SHA256: r.OutputSHA256}, nil
	}
	// One live run extends a base: a second event on it would make a
	// second output, each with one delta. The claim's unique index
	// decides a race; this names the holder before anything is stored.
	holder, err := g.Store.BaseExtension(ctx, ev.Tenant, ev.Session, ev.Base.RunID)
	if err != nil {
		return store.Output{}, err
	}
	if holder != "" {
		return store.Output{}, &BaseHeldError{Base: ev.Base.RunID, RunID: holder}
	}
	return g.latestIs(ctx, ev.Tenant, ev.Session, *ev.Base)
}

// latestIs returns tenant's session's latest output when base names it,
// by run and by digest; else an error naming the field that differs.
func (g *Gateway) latestIs(ctx context.Context, tenant, session string, base Base) (store.Output, error) {
	latest, err := g.Store.LatestOutput(ctx, tenant, session)
	if errors.Is(err, store.ErrNotFound) {
		return store.Output{}, &InputError{Field: "base.run_id", Err: fmt.Errorf("session %s has no output to continue yet: send the whole conversation", session)}
	}
	if err != nil {
		return store.Output{}, fmt.Errorf("read the session's latest output: %w", err)
	}
	if base.RunID != latest.RunID {
		return store.Output{}, &InputError{Field: "base.run_id", Err: fmt.Errorf("%s is not the session's latest output (that is run %s)", base.RunID, latest.RunID)}
	}
	if base.SHA256 != latest.SHA256 {
		return store.Output{}, &InputError{Field: "base.sha256", Err: fmt.Errorf("does not match run %s's output", latest.RunID)}
	}
	return latest, nil
}

// Rebuild is the conversation an incremental event on base with messages
// would compact (the session's latest output, which base must name, with
// the messages appended), without claiming or storing anything: what an
// inspection of "base + messages" measures. A base that a run in flight
// already continues is still the latest output, and measured as such.
func (g *Gateway) Rebuild(ctx context.Context, tenant, session string, base Base, messages json.RawMessage) ([]byte, error) {
	if err := checkBase(base, messages); err != nil {
		return nil, err
	}
	var gone *store.SessionGoneError
	switch err := g.Store.CheckSessionGone(ctx, tenant, session); {
	case errors.As(err, &gone) && gone.Erasure.FinishedAt.IsZero():
		return nil, ErrSessionErasing
	case errors.As(err, &gone):
		return nil, &InputError{Field: "base.run_id", Err: fmt.Errorf("session %s was erased (erasure %s): send the whole conversation", session, gone.Erasure.ID)}
	case err != nil:
		return nil, err
	}
	out, err := g.latestIs(ctx, tenant, session, base)
	if err != nil {
		return nil, err
	}
	data, err := g.Blob.GetVerified(ctx, out.Key, out.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read the base output: %w", err)
	}
	return appendMessages(data, messages)
}

// appendMessages appends the JSON array messages to the message list of
// the conversation document base: a bare array, or an object's
// "messages". It splices bytes: the result is base's bytes up to its
// list's closing bracket, then the messages as the caller sent them,
// then the rest of base, so that the archived rebuild is byte for byte
// the base output followed by the delta (re-encoding would sort keys
// and escape '<' as \u003c, unlike every other path).
func appendMessages(base, messages []byte) ([]byte, error) {
	items := bytes.TrimSpace(messages)
	if len(items) < 2 || items[0] != '[' || items[len(items)-1] != ']' || !json.Valid(items) {
		return nil, &InputError{Field: "messages", Err: errors.New("must be a JSON array of messages")}
	}
	inner := bytes.TrimSpace(items[1 : len(items)-1])
	start, end, err := messageList(base)
	if err != nil {
		return nil, err
	}
	list := base[start:end]
	closing := end - 1 // the list's ']'
	out := make([]byte, 0, len(base)+len(inner)+1)
	if len(bytes.TrimSpace(list[1:len(list)-1])) > 0 && len(inner) > 0 {
		// After the last item, before any whitespace the list ended with.
		last := bytes.TrimRight(base[:closing], " \t\r\n")
		out = append(out, last...)
		out = append(out, ',')
		out = append(out, inner...)
		return append(out, base[len(last):]...), nil
	}
	out = append(out, base[:closing]...)
	out = append(out, inner...)
	return append(out, base[closing:]...), nil
}

// messageList finds the message list of the conversation document base:
// the byte range of the bare array, or of the object's "messages" value.
func messageList(base []byte) (start, end int, err error) {
	trimmed := bytes.TrimSpace(base)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return 0, 0, fmt.Errorf("read the base output: not valid JSON")
		}
		start = bytes.IndexByte(base, '[')
		return start, start + len(trimmed), nil
	}
	dec := json.NewDecoder(bytes.NewReader(base))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, 0, fmt.Errorf("read the base output: not a JSON object or array")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("read the base output: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, fmt.Errorf("read the base output: %w", err)
		}
		if tok == "messages" {
			end = int(dec.InputOffset())
			start = end - len(raw)
			if len(raw) < 2 || raw[0] != '[' {
				return 0, 0, fmt.Errorf("read the base output's messages: not a JSON array")
			}
			return start, end, nil
		}
	}
	return 0, 0, &InputError{Field: "base", Err: errors.New("the base's format has no message list to continue (a ReAct trajectory is sent whole)")}
}
