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
func (g *Gateway) continued(ctx context.Context, ev Event) ([]byte, error) {
	base, err := g.baseOutput(ctx, ev)
	if err != nil {
		return nil, err
	}
	data, err := g.Blob.GetVerified(ctx, base.Key, base.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read the base output: %w", err)
	}
	return appendMessages(data, ev.Messages)
}

// checkContinued checks the conversation an incremental event rebuilt,
// as Submit parsed it: what does not parse or breaks tool pairing came
// with the messages (the base is an output this service wrote).
func checkContinued(conv conversation.Conversation, parseErr error) error {
	if parseErr != nil {
		return &InputError{Field: "messages", Err: parseErr}
	}
	if err := conversation.CheckPairing(conv); err != nil {
		return &InputError{Field: "messages", Err: err}
	}
	return nil
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
	holder, err := g.Store.BaseExtension(ctx, ev.Base.RunID)
	if err != nil {
		return store.Output{}, err
	}
	if holder != "" {
		return store.Output{}, &BaseHeldError{Base: ev.Base.RunID, RunID: holder}
	}
	latest, err := g.Store.LatestOutput(ctx, ev.Tenant, ev.Session)
	if errors.Is(err, store.ErrNotFound) {
		return store.Output{}, &InputError{Field: "base.run_id", Err: fmt.Errorf("session %s has no output to continue yet: send the whole conversation", ev.Session)}
	}
	if err != nil {
		return store.Output{}, fmt.Errorf("read the session's latest output: %w", err)
	}
	if ev.Base.RunID != latest.RunID {
		return store.Output{}, &InputError{Field: "base.run_id", Err: fmt.Errorf("%s is not the session's latest output (that is run %s)", ev.Base.RunID, latest.RunID)}
	}
	if ev.Base.SHA256 != latest.SHA256 {
		return store.Output{}, &InputError{Field: "base.sha256", Err: fmt.Errorf("does not match run %s's output", latest.RunID)}
	}
	return latest, nil
}

// appendMessages appends the JSON array messages to the message list of
// the conversation document base: a bare array, or an object's
// "messages". The document's other fields stay as they were.
func appendMessages(base, messages []byte) ([]byte, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(messages, &items); err != nil {
		return nil, &InputError{Field: "messages", Err: errors.New("must be a JSON array of messages")}
	}
	trimmed := bytes.TrimSpace(base)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, fmt.Errorf("read the base output: %w", err)
		}
		return json.Marshal(append(list, items...))
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &doc); err != nil {
		return nil, fmt.Errorf("read the base output: %w", err)
	}
	var list []json.RawMessage
	if raw, ok := doc["messages"]; ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("read the base output's messages: %w", err)
		}
	} else {
		return nil, &InputError{Field: "base", Err: errors.New("the base's format has no message list to continue (a ReAct trajectory is sent whole)")}
	}
	joined, err := json.Marshal(append(list, items...))
	if err != nil {
		return nil, fmt.Errorf("append messages: %w", err)
	}
	doc["messages"] = joined
	return json.Marshal(doc)
}
