package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// MaxRequestIDLen bounds a replay's request id, so that the event id it
// makes stays within the 200 characters an event id may have.
const MaxRequestIDLen = 128

// ReplayRequest asks for a run to be done again from its archived
// original. Empty fields take the original run's value.
type ReplayRequest struct {
	// RequestID makes the replay idempotent: the same run replayed with the
	// same request id is one replay, however often it is asked for.
	RequestID string          `json:"request_id"`
	Preset    string          `json:"preset,omitempty"`
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// Model is the agent's model (encoding and default limit).
	Model        string `json:"model,omitempty"`
	ContextLimit int    `json:"context_limit,omitempty"`
	// Statuses select the runs a bulk replay (ReplayFailed) takes:
	// "failed", "over_limit" or both; empty is "failed".
	Statuses []string `json:"statuses,omitempty"`
}

// ReplayEventID is the event id of a replay: one per run and request id.
func ReplayEventID(runID, requestID string) string {
	return "replay:" + runID + ":" + requestID
}

// Replay submits run runID of tenant again, as a new run of the same
// session that links to it (ReplayOf), reading the conversation from the
// run's original (see original). Settings the request leaves empty come
// from the original's row in Postgres, recorded at submit, never from
// Temporal: its preset, overrides, agent model and context limit.
func (g *Gateway) Replay(ctx context.Context, tenant, runID string, req ReplayRequest) (Submitted, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return Submitted{}, err
	}
	if tenant == "" {
		return Submitted{}, &InputError{Field: "tenant", Err: errors.New("empty")}
	}
	orig, err := g.Store.GetRunForTenant(ctx, tenant, runID)
	if errors.Is(err, store.ErrNotFound) {
		return Submitted{}, fmt.Errorf("run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return Submitted{}, fmt.Errorf("read run %s: %w", runID, err)
	}
	source, err := original(orig)
	if err != nil {
		return Submitted{}, err
	}

	ev := Event{
		Tenant: tenant, Session: orig.Session, EventID: ReplayEventID(orig.ID, req.RequestID), Kind: orig.Trigger,
		Preset: req.Preset, Overrides: req.Overrides, Model: req.Model, ContextLimit: req.ContextLimit,
		ConversationKey: source, ReplayOf: orig.ID,
	}
	samePreset := ev.Preset == "" || ev.Preset == orig.Preset
	if ev.Preset == "" {
		ev.Preset = orig.Preset
	}
	// The run row holds what the caller asked for: an empty model or a
	// zero limit is what it asked for too (the preset's defaults), never a
	// figure the run worked out.
	if samePreset && len(ev.Overrides) == 0 {
		ev.Overrides, ev.recordedOverrides = orig.Overrides, true
	}
	if ev.Model == "" {
		ev.Model = orig.AgentModel
	}
	if ev.ContextLimit == 0 {
		ev.ContextLimit = orig.ContextLimit
	}
	return g.Submit(ctx, ev)
}

// original is the key of run r's original conversation: its input. The
// gateway stored the caller's bytes once, as their content-addressed
// archive, before it recorded the run, and the plan step records that
// same object as the run's archive; a run that failed before its plan
// step ran (a bad preset, an outage through every retry, a workflow that
// never started) has no archive recorded, but has the original as its
// input all the same, and is replayed from it.
func original(r store.Run) (string, error) {
	if r.InputKey == "" {
		return "", &InputError{Field: "run", Err: fmt.Errorf("run %s has no stored original", r.ID)}
	}
	return r.InputKey, nil
}

// ReplayFailed replays every failed run of tenant that started in [from,
// to) (a zero bound is open) with the same request, so that asking again
// with the same request id replays nothing twice. The runs are listed
// first, so replays failing meanwhile are not replayed in turn. A run
// that cannot be replayed does not stop the others: the answer holds the
// replays submitted and an error joining each run's failure.
func (g *Gateway) ReplayFailed(ctx context.Context, tenant string, from, to time.Time, req ReplayRequest) ([]Submitted, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return nil, err
	}
	if tenant == "" {
		return nil, &InputError{Field: "tenant", Err: errors.New("empty")}
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		return nil, &InputError{Field: "to", Err: fmt.Errorf("%s is not after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))}
	}
	statuses := req.Statuses
	if len(statuses) == 0 {
		statuses = []string{string(store.RunFailed)}
	}
	var failed []store.Run
	for i, st := range statuses {
		if st != string(store.RunFailed) && st != string(store.RunOverLimit) {
			return nil, &InputError{Field: fmt.Sprintf("statuses[%d]", i), Err: fmt.Errorf("%q is not failed or over_limit", st)}
		}
		f := store.RunFilter{Tenant: tenant, Status: store.RunStatus(st), From: from, To: to, Limit: store.MaxListLimit}
		for {
			page, err := g.Store.ListRuns(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("list %s runs: %w", st, err)
			}
			failed = append(failed, page...)
			if len(page) < f.Limit {
				break
			}
			f.AfterID = page[len(page)-1].ID
		}
	}
	var out []Submitted
	var errs []error
	for _, r := range failed {
		if err := ctx.Err(); err != nil {
			return out, errors.Join(append(errs, err)...)
		}
		sub, err := g.Replay(ctx, tenant, r.ID, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("replay %s: %w", r.ID, err))
			continue
		}
		out = append(out, sub)
	}
	return out, errors.Join(errs...)
}

// checkRequestID validates a replay's request id (see idcheck) within
// MaxRequestIDLen, which leaves room for the event id made from it.
func checkRequestID(id string) error {
	if err := idcheck.RequestID(id); err != nil {
		return &InputError{Field: "request_id", Err: err.(*idcheck.Error).Unnamed()}
	}
	if len(id) > MaxRequestIDLen {
		return &InputError{Field: "request_id", Err: fmt.Errorf("%d bytes, at most %d allowed", len(id), MaxRequestIDLen)}
	}
	return nil
}
