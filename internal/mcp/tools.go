package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// CheckpointInput are the arguments of compress_to_checkpoint: the fields
// of POST /v1/sessions/{session}/events with kind "checkpoint".
type CheckpointInput struct {
	Session      string          `json:"session" jsonschema:"the agent's session: its runs, offloads and watermark are kept per session"`
	Conversation json.RawMessage `json:"conversation,omitempty" jsonschema:"the whole conversation as a JSON value (an OpenAI chat request or messages array, an Anthropic Messages request, or a ReAct trajectory; a JSON string holding one is accepted too); omit it to compact the session's stored state"`
	Messages     json.RawMessage `json:"messages,omitempty" jsonschema:"the messages appended since the session's last compaction, as a JSON array in its format: compacted with the session's stored state (instead of conversation)"`
	EventID      string          `json:"event_id,omitempty" jsonschema:"idempotency key: the same id and arguments give the same run; default: derived from the arguments"`
	Model        string          `json:"model,omitempty" jsonschema:"the agent's model (picks the token counter and the default context limit)"`
	ContextLimit int             `json:"context_limit,omitempty" jsonschema:"the model's context limit in tokens (default: the preset's, else the model's)"`
	Preset       string          `json:"preset,omitempty" jsonschema:"compaction preset (default: the deployment's)"`
	WaitSeconds  *int            `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the run, 0 to the server's maximum (default 30)"`
	// IncludeHandoff asks for the handoff in the answer: true by default
	// in this release (the old answer), false from the next one.
	IncludeHandoff *bool `json:"include_handoff,omitempty" jsonschema:"whether the answer holds the fresh-session handoff (about 11 KB); default true in this release, false from the next: pass false to keep it out of the model's context"`
}

// CheckpointResult is the answer of compress_to_checkpoint: the finished
// run's outcome (ids and figures) and the fresh-session handoff, or the
// run id and status of a run still going. The compacted conversation is
// not repeated here: an agent host reads it from OutputURI (or continues
// with incremental messages), rather than the model receiving its whole
// context again as a tool result.
type CheckpointResult struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	// Existing: the event had been submitted before; this is its run.
	Existing bool `json:"existing"`
	// Final: the run ended; Outcome says how.
	Final   bool              `json:"final"`
	Outcome *contract.Outcome `json:"outcome,omitempty"`
	// Handoff is the fresh-session conversation a checkpoint makes.
	Handoff json.RawMessage `json:"handoff,omitempty" jsonschema:"the fresh-session conversation the checkpoint made, in the same format"`
	// OutputURI and OriginalURI are the run's resources.
	OutputURI   string `json:"output_uri"`
	OriginalURI string `json:"original_uri"`
}

// RecoverInput are the arguments of recover_context.
type RecoverInput struct {
	Session string `json:"session" jsonschema:"the session whose conversation was compacted"`
	ID      string `json:"id" jsonschema:"the id named where the content was cut: an offload id (64 hex characters), or an archive id such as <64 hex>.m3-57 (messages 3 to 57 of the original conversation, as a transcript) or <64 hex>.m12b1 (one tool result or input, verbatim)"`
	Lines   string `json:"lines,omitempty" jsonschema:"optional line range such as 1-200; a range past the end is refused with the text's line count"`
}

// RecoverResult is the text an id names, or the asked lines of it.
type RecoverResult struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	TotalLines int    `json:"total_lines"`
	// Lines is the range answered ("A-B"); absent for the whole text.
	Lines string `json:"lines,omitempty"`
}

// SearchInput are the arguments of search_context.
type SearchInput struct {
	Session string `json:"session" jsonschema:"the session to search"`
	Query   string `json:"query" jsonschema:"what to look for (case-insensitive)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"most hits to return, 1 to 1000 (default 50)"`
}

// SearchResult lists the hits, each with the id that reads it back.
type SearchResult struct {
	Hits []audit.Hit `json:"hits"`
	// Truncated: the search read its byte budget before every offload and
	// archive of the session.
	Truncated bool `json:"truncated"`
}

// StatusInput are the arguments of context_status.
type StatusInput struct {
	Session string `json:"session" jsonschema:"the session to report on"`
}

// StatusResult is the session's status report (GET
// /v1/sessions/{session}/status) with its recent runs.
type StatusResult struct {
	audit.SessionStatus
	// BreakerOpen: the loop breaker refuses the session's automatic
	// events (Breaker says why and until when).
	BreakerOpen bool `json:"breaker_open"`
	// RecentRuns are the session's latest runs, newest first.
	RecentRuns []RunSummary `json:"recent_runs"`
}

// RunSummary is one run in a status report.
type RunSummary struct {
	RunID        string     `json:"run_id"`
	Trigger      string     `json:"trigger"`
	Preset       string     `json:"preset"`
	Status       string     `json:"status"`
	Level        string     `json:"level,omitempty"`
	TokensBefore int64      `json:"tokens_before"`
	TokensAfter  int64      `json:"tokens_after"`
	Ratio        float64    `json:"ratio"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	Error        string     `json:"error,omitempty"`
	ReplayOf     string     `json:"replay_of,omitempty"`
}

// recentRuns is how many runs context_status lists.
const recentRuns = 10

// tenantTools are the tool and resource handlers of one tenant.
type tenantTools struct {
	svc    *Service
	tenant string
}

// fieldError is a tool error naming the argument at fault.
func fieldError(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
}

func (t *tenantTools) checkpoint(ctx context.Context, _ *sdk.CallToolRequest, in CheckpointInput) (*sdk.CallToolResult, CheckpointResult, error) {
	if err := idcheck.Session(in.Session); err != nil {
		return nil, CheckpointResult{}, err
	}
	ev, key, err := t.checkpointEvent(ctx, in)
	if err != nil {
		return nil, CheckpointResult{}, err
	}
	wait := DefaultWait
	if in.WaitSeconds != nil {
		limit := int(t.svc.deps.MaxWait / time.Second)
		if *in.WaitSeconds < 0 || *in.WaitSeconds > limit {
			return nil, CheckpointResult{}, fieldError("wait_seconds", "must be between 0 and %d", limit)
		}
		wait = time.Duration(*in.WaitSeconds) * time.Second
	}
	wait = min(wait, t.svc.deps.MaxWait)
	if in.EventID == "" {
		// The same checkpoint asked again (same session, settings and
		// conversation) joins its first run and keeps waiting for it,
		// instead of compacting twice; another session's is its own.
		sum := sha256.Sum256(append([]byte(in.Session+"\x00"+in.Model+"\x00"+strconv.Itoa(in.ContextLimit)+"\x00"+in.Preset+"\x00"), key...))
		in.EventID = "mcp-checkpoint-" + hex.EncodeToString(sum[:16])
	}
	ev.Tenant, ev.Session, ev.EventID, ev.Kind = t.tenant, in.Session, in.EventID, gateway.KindCheckpoint
	ev.Model, ev.ContextLimit, ev.Preset = in.Model, in.ContextLimit, in.Preset
	sub, err := t.svc.deps.Gateway.Submit(ctx, ev)
	if err != nil {
		return nil, CheckpointResult{}, t.toolError(ToolCheckpoint, err)
	}
	res, err := t.waitRun(ctx, sub, wait)
	if err != nil {
		return nil, CheckpointResult{}, t.toolError(ToolCheckpoint, err)
	}
	if in.IncludeHandoff != nil && !*in.IncludeHandoff {
		res.Handoff = nil
	}
	return nil, res, nil
}

// checkpointEvent is what a checkpoint compacts: the conversation it was
// given, or the session's stored state (its latest output) with the
// messages appended since, or that state alone. key identifies it for
// the derived event id.
func (t *tenantTools) checkpointEvent(ctx context.Context, in CheckpointInput) (gateway.Event, []byte, error) {
	hasMessages := given(in.Messages)
	if given(in.Conversation) {
		if hasMessages {
			return gateway.Event{}, nil, fieldError("messages", "give the whole conversation or the messages appended since the last compaction, not both")
		}
		conv, err := conversationArg(in.Conversation)
		return gateway.Event{Conversation: conv}, conv, err
	}
	var msgs json.RawMessage
	if hasMessages {
		var err error
		if msgs, err = conversationArg(in.Messages); err != nil || msgs[0] != '[' {
			return gateway.Event{}, nil, fieldError("messages", "must be a JSON array of messages")
		}
	}
	latest, err := t.svc.deps.Audit.Store.LatestOutput(ctx, t.tenant, in.Session)
	if errors.Is(err, store.ErrNotFound) {
		return gateway.Event{}, nil, fieldError("conversation", "required: session %s has no compacted state yet to continue", in.Session)
	}
	if err != nil {
		return gateway.Event{}, nil, t.toolError(ToolCheckpoint, err)
	}
	if !hasMessages {
		return gateway.Event{ConversationKey: latest.Key}, []byte(latest.SHA256), nil
	}
	return gateway.Event{Base: &gateway.Base{RunID: latest.RunID, SHA256: latest.SHA256}, Messages: msgs},
		append([]byte(latest.SHA256), msgs...), nil
}

// given reports whether an optional JSON argument was given: present and
// not null.
func given(raw json.RawMessage) bool {
	trimmed := strings.TrimSpace(string(raw))
	return trimmed != "" && trimmed != "null"
}

// conversationArg is the conversation argument as the gateway takes it:
// a JSON object or array, or a JSON string holding one (clients that
// stringify nested JSON).
func conversationArg(raw json.RawMessage) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(string(raw))
	if !given(raw) {
		return nil, fieldError("conversation", "required: the conversation as a JSON object or array")
	}
	if trimmed[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, fieldError("conversation", "not a JSON string: %v", err)
		}
		inner = strings.TrimSpace(inner)
		if !json.Valid([]byte(inner)) {
			return nil, fieldError("conversation", "a string must hold the conversation as JSON")
		}
		trimmed = inner
	}
	if trimmed[0] != '{' && trimmed[0] != '[' {
		return nil, fieldError("conversation", "must be a JSON object or array (OpenAI, Anthropic or ReAct format)")
	}
	return json.RawMessage(trimmed), nil
}

// waitRun waits up to wait for a submitted run and answers its result
// once it is final, else its id and status: runview.Reader.Wait, the
// HTTP API's wait.
func (t *tenantTools) waitRun(ctx context.Context, sub gateway.Submitted, wait time.Duration) (CheckpointResult, error) {
	res := CheckpointResult{RunID: sub.RunID, Existing: sub.Existing,
		OutputURI: runsPrefix + sub.RunID + "/output", OriginalURI: runsPrefix + sub.RunID + "/original"}
	run, err := t.svc.runs.Wait(ctx, t.tenant, sub.RunID, wait)
	if err != nil {
		return res, err
	}
	res.Status = string(run.Status)
	if !run.Status.Final() {
		return res, nil
	}
	r, err := t.svc.runs.Result(ctx, run, false)
	if err != nil {
		return res, err
	}
	res.Final, res.Outcome, res.Handoff = true, &r.Outcome, r.Handoff
	return res, nil
}

func (t *tenantTools) recover(ctx context.Context, _ *sdk.CallToolRequest, in RecoverInput) (*sdk.CallToolResult, RecoverResult, error) {
	if err := idcheck.Session(in.Session); err != nil {
		return nil, RecoverResult{}, err
	}
	if err := idcheck.Check("id", in.ID); err != nil {
		return nil, RecoverResult{}, err
	}
	rec, err := t.svc.deps.Audit.RecoverContext(ctx, t.tenant, in.Session, in.ID, in.Lines)
	if err != nil {
		return nil, RecoverResult{}, t.toolError(ToolRecover, err)
	}
	out := RecoverResult{ID: in.ID, Text: string(rec.Data), TotalLines: rec.TotalLines}
	if rec.From > 0 {
		out.Lines = fmt.Sprintf("%d-%d", rec.From, rec.To)
	}
	return nil, out, nil
}

func (t *tenantTools) search(ctx context.Context, _ *sdk.CallToolRequest, in SearchInput) (*sdk.CallToolResult, SearchResult, error) {
	if err := idcheck.Session(in.Session); err != nil {
		return nil, SearchResult{}, err
	}
	query := strings.TrimSpace(in.Query)
	if query == "" {
		return nil, SearchResult{}, fieldError("query", "required search text")
	}
	limit := audit.DefaultSearchLimit
	if in.Limit != 0 {
		if in.Limit < 1 || in.Limit > audit.MaxSearchLimit {
			return nil, SearchResult{}, fieldError("limit", "must be an integer from 1 to %d", audit.MaxSearchLimit)
		}
		limit = in.Limit
	}
	res, err := t.svc.deps.Audit.SearchSession(ctx, t.tenant, in.Session, query, limit)
	if err != nil {
		return nil, SearchResult{}, t.toolError(ToolSearch, err)
	}
	return nil, SearchResult{Hits: res.Hits, Truncated: res.Truncated}, nil
}

func (t *tenantTools) status(ctx context.Context, _ *sdk.CallToolRequest, in StatusInput) (*sdk.CallToolResult, StatusResult, error) {
	if err := idcheck.Session(in.Session); err != nil {
		return nil, StatusResult{}, err
	}
	a := t.svc.deps.Audit
	st, err := a.Status(ctx, t.tenant, in.Session)
	if errors.Is(err, store.ErrNotFound) {
		// A session not compacted yet has a status too: nothing so far.
		return nil, StatusResult{SessionStatus: audit.SessionStatus{Tenant: t.tenant, Session: in.Session, Runs: map[string]int{},
			Promotions: []store.Promotion{}, History: []audit.HistoryRow{}, Level: "GREEN"}, RecentRuns: []RunSummary{}}, nil
	}
	if err != nil {
		return nil, StatusResult{}, t.toolError(ToolStatus, err)
	}
	runs, err := a.Runs(ctx, t.tenant, store.RunFilter{Session: in.Session, Limit: recentRuns})
	if err != nil {
		return nil, StatusResult{}, t.toolError(ToolStatus, err)
	}
	out := StatusResult{SessionStatus: st, BreakerOpen: st.Breaker != nil && st.Breaker.Open, RecentRuns: []RunSummary{}}
	for _, r := range runs {
		s := RunSummary{RunID: r.ID, Trigger: r.Trigger, Preset: r.Preset, Status: string(r.Status), Level: r.Level,
			TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter, Ratio: r.Ratio, StartedAt: r.StartedAt,
			Error: r.Error, ReplayOf: r.ReplayOf}
		if !r.FinishedAt.IsZero() {
			f := r.FinishedAt
			s.FinishedAt = &f
		}
		out.RecentRuns = append(out.RecentRuns, s)
	}
	return nil, out, nil
}

// toolError turns a failure into the tool error the client sees: bad
// arguments name the field; unknown sessions, runs and ids are "not
// found" alike (another tenant's included); an unavailable dependency
// says so; anything else is logged (never with conversation text) and
// answered as an internal error.
func (t *tenantTools) toolError(tool string, err error) error {
	var ie *gateway.InputError
	var re *audit.RecoverError
	var breaker *gateway.BreakerOpenError
	var ide *idcheck.Error
	var gone *store.SessionGoneError
	status := runview.Status(err)
	switch {
	case errors.As(err, &ie):
		return ie
	case errors.As(err, &ide):
		return ide
	case errors.As(err, &re):
		if re.Field == "" {
			return fieldError("id", "%s", re.Message)
		}
		return re
	case errors.As(err, &breaker):
		return fieldError("session", "%s; a manual compaction probes it (retry after %s)", breaker.Error(),
			breaker.Until.UTC().Format(time.RFC3339))
	case errors.Is(err, gateway.ErrConflict):
		return fieldError("event_id", "%v", err)
	case status == http.StatusGone && errors.As(err, &gone):
		// As HTTP's 410: the erasure's id and time, never "not found".
		return fieldError("session", "gone: %s", gone.Error())
	case errors.Is(err, gateway.ErrSessionErasing):
		// As HTTP's 409.
		return fieldError("session", "conflict: the session is being erased; nothing new is accepted until the erasure ends")
	case status == http.StatusNotFound:
		return fieldError("session", "not found: this tenant has no runs or offloads in this session")
	case errors.Is(err, context.Canceled):
		return errors.New("canceled")
	}
	if what := httpapi.Outage(err); what != "" {
		return fmt.Errorf("unavailable: %s is unavailable; retry later", what)
	}
	t.svc.log.Error("mcp tool failed", "tool", tool, "tenant", t.tenant, "error", err)
	return errors.New("internal error (the operator's logs have the detail)")
}
