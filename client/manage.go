package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The session, run and tenant management routes: a session's status and
// erasure, the tenant's retention and webhooks, replays and promotion.

// SessionStatus is the three-tier design's status report of a session,
// from its last succeeded run (or promoted replay).
type SessionStatus struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// LastRunID is the run whose output the figures describe and the
	// agent continues from; "" before the first succeeded run.
	LastRunID    string    `json:"last_run_id,omitempty"`
	Time         time.Time `json:"time"`
	Tokens       int       `json:"tokens"`
	ContextLimit int       `json:"context_limit"`
	// Usage is a fraction (0.5 is 50%).
	Usage           float64 `json:"usage"`
	Level           string  `json:"level"`
	Recommendation  string  `json:"recommendation"`
	Offloads        int     `json:"offloads"`
	OffloadTokens   int     `json:"offload_tokens"`
	Truncations     int     `json:"truncations"`
	TruncatedTokens int     `json:"truncated_tokens"`
	Summarisations  int     `json:"summarisations"`
	// Runs counts the session's runs by status, replays included; Replays
	// the replays not promoted (what-ifs), PromotedReplays the promoted
	// ones.
	Runs            map[string]int `json:"runs"`
	Replays         int            `json:"replays"`
	PromotedReplays int            `json:"promoted_replays"`
	Promotions      []Promotion    `json:"promotions"`
	// Breaker is the session's loop breaker, present while open.
	Breaker   *Breaker     `json:"breaker,omitempty"`
	History   []HistoryRow `json:"history"`
	Watermark string       `json:"watermark,omitempty"`
}

// Breaker is a session's open loop breaker.
type Breaker struct {
	Open   bool      `json:"open"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
}

// HistoryRow is one pass of a run of the session.
type HistoryRow struct {
	Time        time.Time `json:"time"`
	RunID       string    `json:"run_id"`
	Type        string    `json:"type"`
	Count       int       `json:"count"`
	TokensSaved int       `json:"tokens_saved"`
	// Replay: a pass of a replay not promoted (a what-if, audit data);
	// Promoted: of a promoted replay, the session's state; Superseded: of
	// a run a promoted replay repaired (the replay's passes count instead).
	Replay     bool `json:"replay,omitempty"`
	Promoted   bool `json:"promoted,omitempty"`
	Superseded bool `json:"superseded,omitempty"`
}

// Promotion is a replay made its session's state.
type Promotion struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// RunID is the replay promoted; ReplayOf the failed or over-limit run
	// it repairs.
	RunID    string `json:"run_id"`
	ReplayOf string `json:"replay_of"`
	// Watermark is the watermark the session moved to ("" none).
	Watermark  string    `json:"watermark,omitempty"`
	PromotedBy string    `json:"promoted_by,omitempty"`
	PromotedAt time.Time `json:"promoted_at"`
}

// PromoteResult is the answer of Promote: the promotion, and whether it
// existed already (the replay had been promoted before).
type PromoteResult struct {
	Promotion
	Existing bool `json:"existing"`
}

// Replay asks for a run's original to be run again, optionally with
// another preset, overrides, model or limit.
type Replay struct {
	// RequestID makes the replay idempotent; empty gets a random one,
	// fixed before the first attempt.
	RequestID    string          `json:"request_id"`
	Preset       string          `json:"preset,omitempty"`
	Overrides    json.RawMessage `json:"overrides,omitempty"`
	Model        string          `json:"model,omitempty"`
	ContextLimit int             `json:"context_limit,omitempty"`
}

// Submitted is a started (or joined, Existing) replay run.
type Submitted struct {
	RunID     string `json:"run_id"`
	Existing  bool   `json:"existing"`
	StatusURL string `json:"status_url"`
}

// Erasure is a session's erasure and, once Status is "erased", its
// tombstone: who asked, when, and the counts and digests of what went.
type Erasure struct {
	ID          string     `json:"id"`
	Session     string     `json:"session"`
	Status      string     `json:"status"`
	WorkflowID  string     `json:"workflow_id,omitempty"`
	RequestedBy string     `json:"requested_by"`
	RequestedAt time.Time  `json:"requested_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Runs        int        `json:"runs"`
	RowsDeleted int        `json:"rows_deleted"`
	// ObjectsKept are objects another session of the tenant still holds
	// (the same bytes, content-addressed).
	ObjectsDeleted int      `json:"objects_deleted"`
	ObjectsKept    int      `json:"objects_kept"`
	DeletedSHA256  []string `json:"deleted_sha256"`
}

// Retention is the tenant's retention: its final runs are deleted Days
// after they ended; Set false keeps them for good.
type Retention struct {
	Days float64 `json:"days"`
	Set  bool    `json:"set"`
}

// WebhookEndpoint is a completion webhook endpoint. Secret is only in the
// answers of a registration that created it and of a rotation.
type WebhookEndpoint struct {
	ID          string     `json:"id"`
	URL         string     `json:"url"`
	Description string     `json:"description,omitempty"`
	Secret      string     `json:"secret,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	RotatedAt   *time.Time `json:"rotated_at,omitempty"`
	// PreviousExpiresAt is when the secret rotated out stops signing.
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty"`
}

// Delivery is one webhook delivery of a run, with every attempt. ID is
// the webhook-id header, the same on every attempt and redelivery.
type Delivery struct {
	ID          string            `json:"id"`
	EndpointID  string            `json:"endpoint_id"`
	RunID       string            `json:"run_id"`
	EventType   string            `json:"event_type"`
	Status      string            `json:"status"`
	Attempts    int               `json:"attempts"`
	LastCode    int               `json:"last_code,omitempty"`
	LastError   string            `json:"last_error,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	DeliveredAt *time.Time        `json:"delivered_at,omitempty"`
	Log         []DeliveryAttempt `json:"log"`
}

// DeliveryAttempt is one POST of a delivery; Code is absent when there
// was no answer, ResponsePrefix the first 256 bytes of the answer.
type DeliveryAttempt struct {
	Attempt        int       `json:"attempt"`
	At             time.Time `json:"at"`
	Code           int       `json:"code,omitempty"`
	Error          string    `json:"error,omitempty"`
	ResponsePrefix string    `json:"response_prefix,omitempty"`
	DurationMS     int       `json:"duration_ms"`
}

// Redelivered is a started redelivery.
type Redelivered struct {
	DeliveryID string `json:"delivery_id"`
	WorkflowID string `json:"workflow_id"`
}

// Status returns the session's status report.
//
// op: GET /v1/sessions/{session}/status
func (c *Client) Status(ctx context.Context, session string) (*SessionStatus, error) {
	var s SessionStatus
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/status", nil, nil, true, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Original returns a run's original conversation byte for byte, checked
// against the SHA-256 the server sends.
//
// op: GET /v1/runs/{run}/original
func (c *Client) Original(ctx context.Context, runID string) ([]byte, error) {
	_, data, h, err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/original", nil, nil, true)
	if err != nil {
		return nil, err
	}
	return data, checkSHA(h, data)
}

// EraseSession starts (or joins) the erasure of a session: its
// conversations, outputs, offloads and history rows. The erasure runs
// on; Erasure reads it until its Status is "erased". Reads of the session
// then answer a *GoneError.
//
// op: DELETE /v1/sessions/{session}
func (c *Client) EraseSession(ctx context.Context, session string) (*Erasure, error) {
	var e Erasure
	if _, err := c.doJSON(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(session), nil, nil, true, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Erasure returns an erasure: "erasing", then "erased" with its
// tombstone.
//
// op: GET /v1/erasures/{id}
func (c *Client) Erasure(ctx context.Context, id string) (*Erasure, error) {
	var e Erasure
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/erasures/"+url.PathEscape(id), nil, nil, true, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Retention returns the tenant's retention.
//
// op: GET /v1/retention
func (c *Client) Retention(ctx context.Context) (Retention, error) {
	var r Retention
	_, err := c.doJSON(ctx, http.MethodGet, "/v1/retention", nil, nil, true, &r)
	return r, err
}

// SetRetention keeps the tenant's final runs for days (whole days, 1 to
// 36500) and returns the retention now in force.
//
// op: PUT /v1/retention
func (c *Client) SetRetention(ctx context.Context, days int) (Retention, error) {
	body, err := json.Marshal(map[string]int{"days": days})
	if err != nil {
		return Retention{}, fmt.Errorf("encode retention: %w", err)
	}
	var r Retention
	_, err = c.doJSON(ctx, http.MethodPut, "/v1/retention", nil, body, true, &r)
	return r, err
}

// UnsetRetention keeps the tenant's runs for good again and returns the
// retention now in force (Set false).
//
// op: DELETE /v1/retention
func (c *Client) UnsetRetention(ctx context.Context) (Retention, error) {
	var r Retention
	_, err := c.doJSON(ctx, http.MethodDelete, "/v1/retention", nil, nil, true, &r)
	return r, err
}

// AddWebhook registers a completion webhook endpoint. A new URL answers
// the endpoint with its Secret and created true; a URL already registered
// answers the existing endpoint, without a secret, and created false.
//
// op: POST /v1/webhooks
func (c *Client) AddWebhook(ctx context.Context, endpointURL, description string) (*WebhookEndpoint, bool, error) {
	body, err := json.Marshal(struct {
		URL         string `json:"url"`
		Description string `json:"description,omitempty"`
	}{endpointURL, description})
	if err != nil {
		return nil, false, fmt.Errorf("encode webhook: %w", err)
	}
	var w WebhookEndpoint
	status, err := c.doJSON(ctx, http.MethodPost, "/v1/webhooks", nil, body, true, &w)
	if err != nil {
		return nil, false, err
	}
	return &w, status == http.StatusCreated, nil
}

// Webhooks lists the tenant's live webhook endpoints, oldest first,
// without secrets.
//
// op: GET /v1/webhooks
func (c *Client) Webhooks(ctx context.Context) ([]WebhookEndpoint, error) {
	var l struct {
		Webhooks []WebhookEndpoint `json:"webhooks"`
	}
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/webhooks", nil, nil, true, &l); err != nil {
		return nil, err
	}
	return l.Webhooks, nil
}

// DeleteWebhook stops deliveries to an endpoint (its delivery log stays).
//
// op: DELETE /v1/webhooks/{id}
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, _, _, err := c.do(ctx, http.MethodDelete, "/v1/webhooks/"+url.PathEscape(id), nil, nil, true)
	return err
}

// RotateWebhook gives an endpoint a new secret (in the answer); the old
// one signs beside it until PreviousExpiresAt. Not retried after a
// connection error: a second rotation would retire the secret this one
// made.
//
// op: POST /v1/webhooks/{id}/rotate
func (c *Client) RotateWebhook(ctx context.Context, id string) (*WebhookEndpoint, error) {
	var w WebhookEndpoint
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(id)+"/rotate", nil, nil, false, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Deliveries lists a run's webhook deliveries with every attempt.
//
// op: GET /v1/runs/{run}/deliveries
func (c *Client) Deliveries(ctx context.Context, runID string) ([]Delivery, error) {
	var l struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/deliveries", nil, nil, true, &l); err != nil {
		return nil, err
	}
	return l.Deliveries, nil
}

// Redeliver sends a delivery again, with the same webhook-id. Not retried
// after a connection error (that would send it twice).
//
// op: POST /v1/deliveries/{id}/redeliver
func (c *Client) Redeliver(ctx context.Context, deliveryID string) (*Redelivered, error) {
	var r Redelivered
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, nil, false, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReplayRun runs a run's original again (202): WaitRun and Output read
// the replay run. The same RequestID never runs twice.
//
// op: POST /v1/runs/{run}/replay
func (c *Client) ReplayRun(ctx context.Context, runID string, r Replay) (*Submitted, error) {
	if r.RequestID == "" {
		r.RequestID = newID("rpl-")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode replay: %w", err)
	}
	var s Submitted
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/replay", nil, body, true, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Promote makes a replay that succeeded, of a run that failed or ended
// over its limit, its session's state. Refused with a 409 *Error naming
// the field (run, replay_of, session); promoting again answers the same
// promotion with Existing true.
//
// op: POST /v1/runs/{run}/promote
func (c *Client) Promote(ctx context.Context, replayRunID string) (*PromoteResult, error) {
	var p PromoteResult
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(replayRunID)+"/promote", nil, nil, true, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// doJSON sends one request (see do) and decodes its JSON answer into out;
// it returns the answer's status.
func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, body []byte, retryable bool, out any) (int, error) {
	status, data, _, err := c.do(ctx, method, path, q, body, retryable)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return status, nil
}
