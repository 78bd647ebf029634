package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The audit and operator routes: runs listed and exported, a run's diff,
// a session's watermarks, a dry-run inspection, one tool result
// compressed, failed runs replayed in bulk.

// RunFilter selects runs for ListRuns and Export; zero fields select
// everything.
type RunFilter struct {
	Session string
	Status  string
	// From and To bound when the runs started: [From, To).
	From, To time.Time
	// Limit is the page size (the server's default when 0); After the
	// NextAfter of the previous page.
	Limit int
	After string
	// Degraded keeps only the runs that reached their result through a
	// fallback.
	Degraded bool
}

func (f RunFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"session": f.Session, "status": f.Status, "after": f.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.From.IsZero() {
		q.Set("from", f.From.UTC().Format(time.RFC3339Nano))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Degraded {
		q.Set("degraded", "true")
	}
	return q
}

// RunList is one page of runs, newest first; NextAfter is "" on the last.
type RunList struct {
	Runs      []Run  `json:"runs"`
	NextAfter string `json:"next_after,omitempty"`
}

// Change is what a run did to one message: kept, replaced, removed,
// summarized or added; Index and OutIndex are positions in the original
// and the output (-1 for none).
type Change struct {
	Index    int    `json:"index"`
	OutIndex int    `json:"out_index"`
	At       string `json:"at,omitempty"`
	OutAt    string `json:"out_at,omitempty"`
	Role     string `json:"role,omitempty"`
	Action   string `json:"action"`
	Before   int    `json:"before"`
	After    int    `json:"after"`
	Note     string `json:"note,omitempty"`
}

// Diff is what a run kept, removed, replaced, summarized or added, message
// by message, with the counts of each.
type Diff struct {
	RunID      string   `json:"run_id"`
	Changes    []Change `json:"changes"`
	Removed    int      `json:"removed"`
	Summarized int      `json:"summarized"`
	Replaced   int      `json:"replaced"`
	Kept       int      `json:"kept"`
	Added      int      `json:"added"`
}

// Watermark is one watermark a session had and the run that moved it.
type Watermark struct {
	ToolUseID string    `json:"tool_use_id"`
	RunID     string    `json:"run_id"`
	At        time.Time `json:"at"`
}

// WatermarkList is a session's watermark history, oldest first, and its
// current watermark ("" none).
type WatermarkList struct {
	Current    string      `json:"current"`
	Watermarks []Watermark `json:"watermarks"`
}

// Inspection asks what a conversation's status is and what the preset's
// deterministic passes would reach; nothing is run or stored.
type Inspection struct {
	Model        string          `json:"model,omitempty"`
	ContextLimit int             `json:"context_limit,omitempty"`
	Preset       string          `json:"preset,omitempty"`
	Conversation json.RawMessage `json:"conversation,omitempty"`
	// Base and Messages measure the session's latest output with the
	// messages appended since, as an incremental event carries them,
	// instead of Conversation.
	Base     *Base           `json:"base,omitempty"`
	Messages json.RawMessage `json:"messages,omitempty"`
}

// InspectResult is the three-tier design's status report of the
// conversation sent.
type InspectResult struct {
	Format   string        `json:"format"`
	Messages int           `json:"messages"`
	Report   InspectReport `json:"report"`
	// Tokens is the conversation's size; TriggerReached says whether its
	// usage reaches TriggerUsage, where the preset starts compacting.
	Tokens         int     `json:"tokens"`
	TriggerUsage   float64 `json:"trigger_usage"`
	TriggerReached bool    `json:"trigger_reached"`
}

// InspectReport is an inspection's report: the level now, and what the
// deterministic passes and the budget ladder would reach.
type InspectReport struct {
	Preset                  string     `json:"preset"`
	Encoding                string     `json:"encoding"`
	ContextLimit            int        `json:"context_limit"`
	SizeBefore              int        `json:"size_before"`
	Usage                   float64    `json:"usage"`
	Level                   string     `json:"level"`
	Passes                  []PassStat `json:"passes"`
	SizeAfterDeterministic  int        `json:"size_after_deterministic"`
	UsageAfterDeterministic float64    `json:"usage_after_deterministic"`
	LargeResults            int        `json:"large_results"`
	GlobalResults           int        `json:"global_results"`
	History                 bool       `json:"history"`
	HistoryNote             string     `json:"history_note,omitempty"`
	SummarizedMessages      int        `json:"summarized_messages"`
	Recommendation          string     `json:"recommendation"`
	Budget                  string     `json:"budget,omitempty"`
	Error                   string     `json:"error,omitempty"`
}

// Compression asks for one large tool result to be offloaded (stored, a
// reference answered) or summarized (the ReAct two-layer design's layer
// 1, audited as a run).
type Compression struct {
	Text     string `json:"text"`
	Mode     string `json:"mode"` // offload or summarize
	ToolName string `json:"tool_name,omitempty"`
	Model    string `json:"model,omitempty"`
	// Session defaults to "results".
	Session     string          `json:"session,omitempty"`
	Overrides   json.RawMessage `json:"overrides,omitempty"`
	WaitSeconds int             `json:"wait_seconds,omitempty"`
}

// Compressed is a tool result offloaded (Reference, ID, SHA256, Tokens) or
// summarized (RunID, Text and the sizes).
type Compressed struct {
	Mode        string `json:"mode"`
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
	ErrorClass  string `json:"error_class,omitempty"`
	Reference   string `json:"reference,omitempty"`
	ID          string `json:"id,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	Tokens      int    `json:"tokens,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Text        string `json:"text,omitempty"`
	CharsBefore int    `json:"chars_before,omitempty"`
	CharsAfter  int    `json:"chars_after,omitempty"`
	Drift       string `json:"drift,omitempty"`
}

// Replays asks for every failed run (and, with Statuses, over-limit run)
// that started in [From, To) to be replayed.
type Replays struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// RequestID makes the request idempotent; empty gets a random one,
	// fixed before the first attempt.
	RequestID    string          `json:"request_id"`
	Preset       string          `json:"preset,omitempty"`
	Overrides    json.RawMessage `json:"overrides,omitempty"`
	Model        string          `json:"model,omitempty"`
	ContextLimit int             `json:"context_limit,omitempty"`
	// Statuses: "failed" (the default), "over_limit" or both.
	Statuses []string `json:"statuses,omitempty"`
}

// ListRuns lists the tenant's runs, newest first, one page at a time.
//
// op: GET /v1/runs
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (*RunList, error) {
	var l RunList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/runs", f.query(), nil, true, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Export returns the tenant's runs as JSON lines (format "jsonl", with
// steps a line per step after each run) or CSV ("csv").
//
// op: GET /v1/export
func (c *Client) Export(ctx context.Context, format string, f RunFilter, steps bool) ([]byte, error) {
	q := f.query()
	if format != "" {
		q.Set("format", format)
	}
	if steps {
		q.Set("steps", "true")
	}
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/export", q, nil, true)
	return data, err
}

// Diff returns what a run did to each message.
//
// op: GET /v1/runs/{run}/diff
func (c *Client) Diff(ctx context.Context, runID string) (*Diff, error) {
	var d Diff
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/diff", nil, nil, true, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Watermarks returns the session's watermark history and current
// watermark.
//
// op: GET /v1/sessions/{session}/watermarks
func (c *Client) Watermarks(ctx context.Context, session string) (*WatermarkList, error) {
	var w WatermarkList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/watermarks", nil, nil, true, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Inspect returns the status report of the conversation sent, and what
// the preset's deterministic passes and the budget ladder would reach;
// nothing is run or stored.
//
// op: POST /v1/sessions/{session}/inspect
func (c *Client) Inspect(ctx context.Context, session string, in Inspection) (*InspectResult, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode inspection: %w", err)
	}
	var r InspectResult
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(session)+"/inspect", nil, body, true, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CompressResult offloads or summarizes one tool result. A summarize run
// that outlasts WaitSeconds answers Accepted (202): WaitRun gets it.
//
// op: POST /v1/results:compress
func (c *Client) CompressResult(ctx context.Context, req Compression) (*Compressed, *Accepted, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode compression: %w", err)
	}
	// A summarize without an event id is a new run each time: not retried
	// after a connection error.
	status, data, _, err := c.do(ctx, http.MethodPost, "/v1/results:compress", nil, body, req.Mode == "offload")
	if err != nil {
		return nil, nil, err
	}
	return finishedOrAccepted[Compressed](status, data, "compression")
}

// ReplayFailed replays every failed (and, with Statuses, over-limit) run
// that started in [From, To); the same RequestID never runs twice.
//
// op: POST /v1/replays
func (c *Client) ReplayFailed(ctx context.Context, r Replays) ([]Submitted, error) {
	if r.RequestID == "" {
		r.RequestID = newID("rpl-")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode replays: %w", err)
	}
	var out struct {
		Runs []Submitted `json:"runs"`
	}
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/replays", nil, body, true, &out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}
