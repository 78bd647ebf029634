package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// compactRequest is the body of POST /v1/sessions/{session}/compact, a
// manual compaction: an event without a kind.
type compactRequest struct {
	EventID      string `json:"event_id"`
	Model        string `json:"model"`
	ContextLimit int    `json:"context_limit"`
	// Conversation is the conversation inline, in any supported format;
	// ConversationKey names one already stored under the tenant's prefix.
	Conversation    json.RawMessage `json:"conversation"`
	ConversationKey string          `json:"conversation_key"`
	// Base and Messages make an incremental event: the session's latest
	// output continued with the messages appended since.
	Base      *gateway.Base     `json:"base"`
	Messages  []json.RawMessage `json:"messages"`
	Preset    string            `json:"preset"`
	Overrides json.RawMessage   `json:"overrides"`
	// WaitSeconds > 0 waits up to that long for the run and answers with
	// its result; 0 answers at once with the run id.
	WaitSeconds int `json:"wait_seconds"`
}

// eventRequest is the body of POST /v1/sessions/{session}/events: a
// compactRequest with a kind. The fields are spelled out rather than
// embedded so that decode errors name the JSON field alone.
type eventRequest struct {
	Kind            string            `json:"kind"`
	EventID         string            `json:"event_id"`
	Model           string            `json:"model"`
	ContextLimit    int               `json:"context_limit"`
	Conversation    json.RawMessage   `json:"conversation"`
	ConversationKey string            `json:"conversation_key"`
	Base            *gateway.Base     `json:"base"`
	Messages        []json.RawMessage `json:"messages"`
	Preset          string            `json:"preset"`
	Overrides       json.RawMessage   `json:"overrides"`
	WaitSeconds     int               `json:"wait_seconds"`
}

// accepted is the answer while a run is not finished (202).
type accepted struct {
	RunID     string `json:"run_id"`
	Existing  bool   `json:"existing"`
	Status    string `json:"status"`
	StatusURL string `json:"status_url"`
	InputKey  string `json:"input_key,omitempty"`
	sessionGeneration
}

// sessionGeneration tells a caller which life of the session name its
// event belongs to: 1 for a name never erased; above 1, the name was
// erased (PreviousErasure) and this generation started after it.
type sessionGeneration struct {
	SessionGeneration int              `json:"session_generation,omitempty"`
	PreviousErasure   *previousErasure `json:"previous_erasure,omitempty"`
}

// previousErasure is the erasure a session generation follows.
type previousErasure struct {
	ID       string    `json:"id"`
	ErasedAt time.Time `json:"erased_at"`
}

func generationOf(sub gateway.Submitted) sessionGeneration {
	g := sessionGeneration{SessionGeneration: sub.Generation}
	if e := sub.PreviousErasure; e != nil {
		g.PreviousErasure = &previousErasure{ID: e.ID, ErasedAt: e.FinishedAt.UTC()}
	}
	return g
}

// runResponse is the answer once a run is finished (200): its outcome
// (the same type `starter compact` prints), and the compacted
// conversation in the caller's own format.
type runResponse struct {
	contract.Outcome
	Existing bool `json:"existing"`
	// Handoff is the fresh-session conversation made when the run ended
	// CRITICAL (or over its limit) or on a checkpoint event.
	Handoff      json.RawMessage `json:"handoff,omitempty"`
	Conversation json.RawMessage `json:"conversation,omitempty"`
}

// eventResult is the 200 of an event: the run's answer and the session
// generation it belongs to.
type eventResult struct {
	runResponse
	sessionGeneration
}

func (a *api) postEvent(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req eventRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return a.submit(w, r, tenant, req.Kind, compactRequest{EventID: req.EventID, Model: req.Model, ContextLimit: req.ContextLimit,
		Conversation: req.Conversation, ConversationKey: req.ConversationKey, Base: req.Base, Messages: req.Messages,
		Preset: req.Preset, Overrides: req.Overrides, WaitSeconds: req.WaitSeconds})
}

func (a *api) postCompact(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req compactRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.EventID == "" {
		// A manual compact is a person's request: without an id each
		// one is new.
		req.EventID = "compact-" + newRequestID()
	}
	return a.submit(w, r, tenant, gateway.KindManual, req)
}

// submit hands an event to the gateway and answers with the run id, or
// with its result when the caller waits.
func (a *api) submit(w http.ResponseWriter, r *http.Request, tenant, kind string, req compactRequest) error {
	wait, err := a.waitFor(req.WaitSeconds)
	if err != nil {
		return err
	}
	sub, err := a.deps.Gateway.Submit(r.Context(), gateway.Event{
		Tenant: tenant, Session: r.PathValue("session"), EventID: req.EventID, Kind: kind,
		Model: req.Model, ContextLimit: req.ContextLimit, Preset: req.Preset, Overrides: nullIsEmpty(req.Overrides),
		Conversation: nullIsEmpty(req.Conversation), ConversationKey: req.ConversationKey,
		Base: req.Base, Messages: messagesArg(req.Messages),
	})
	if err != nil {
		return err
	}
	return a.answerRun(w, r, tenant, sub, wait)
}

// messagesArg is an incremental event's messages as the gateway takes
// them: absent stays absent, an empty list is an empty list (which the
// gateway refuses, naming the field).
func messagesArg(msgs []json.RawMessage) json.RawMessage {
	if msgs == nil {
		return nil
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		// Each item was decoded as JSON; encoding it again cannot fail.
		return nil
	}
	return data
}

// waitFor checks wait_seconds against the limit.
func (a *api) waitFor(seconds int) (time.Duration, error) {
	limit := int(a.deps.MaxWait / time.Second)
	if seconds < 0 || seconds > limit {
		return 0, badRequest("wait_seconds", "wait_seconds: must be between 0 and %d", limit)
	}
	return time.Duration(seconds) * time.Second, nil
}

// answerRun answers 202 with the run id when not waiting or when the wait
// ends first, else 200 with the result.
func (a *api) answerRun(w http.ResponseWriter, r *http.Request, tenant string, sub gateway.Submitted, wait time.Duration) error {
	if wait > 0 {
		res, done, err := a.waitRun(r.Context(), tenant, sub.RunID, wait)
		if err != nil {
			return err
		}
		if done {
			res.Existing = sub.Existing
			writeJSON(w, http.StatusOK, eventResult{runResponse: res, sessionGeneration: generationOf(sub)})
			return nil
		}
	}
	a.accept(w, r, tenant, sub)
	return nil
}

// accept answers 202 with the run id, its status URL and its current
// status.
func (a *api) accept(w http.ResponseWriter, r *http.Request, tenant string, sub gateway.Submitted) {
	ack := accepted{RunID: sub.RunID, Existing: sub.Existing, Status: string(store.RunPending),
		StatusURL: "/v1/runs/" + sub.RunID, InputKey: sub.InputKey, sessionGeneration: generationOf(sub)}
	// Best effort: the caller may have gone, and the id is the answer.
	if run, err := a.runs.Run(r.Context(), tenant, sub.RunID); err == nil {
		ack.Status = string(run.Status)
	}
	w.Header().Set("Location", ack.StatusURL)
	writeJSON(w, http.StatusAccepted, ack)
}

// waitRun waits up to wait for a run of tenant (runview.Reader.Wait) and
// answers its result once it is final; done is false when the wait ended
// first.
func (a *api) waitRun(ctx context.Context, tenant, runID string, wait time.Duration) (runResponse, bool, error) {
	run, err := a.runs.Wait(ctx, tenant, runID, wait)
	if err != nil || !run.Status.Final() {
		return runResponse{}, false, notFoundAs(err, "run")
	}
	out, err := a.fromStore(ctx, run)
	return out, err == nil, err
}

// fromStore builds the answer from the run's row and stats (its outcome)
// and, for a committed run, its output and handoff from S3.
func (a *api) fromStore(ctx context.Context, run store.Run) (runResponse, error) {
	res, err := a.runs.Result(ctx, run, true)
	if err != nil {
		return runResponse{}, err
	}
	return runResponse{Outcome: res.Outcome, Handoff: res.Handoff, Conversation: res.Conversation}, nil
}

// auditService is the audit service the API was given, or one over its store
// and blob store (handlers built without one, in tests).
func (a *api) auditService() *audit.Service {
	if a.deps.Audit != nil {
		return a.deps.Audit
	}
	return &audit.Service{Store: a.deps.Store, Blob: a.deps.Blob}
}

func (a *api) getStatus(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := a.deps.Audit.Status(r.Context(), tenant, r.PathValue("session"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// nullIsEmpty treats an explicit JSON null like an absent field.
func nullIsEmpty(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}
