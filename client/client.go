// Package client is a Go client for the orchestrator's HTTP API
// (api/openapi.yaml): typed requests and answers, retries on 429 and 503
// that honour Retry-After, and event ids fixed before the first attempt so
// that a retried submission is the same event, never a second run.
//
// It covers every operation under /v1: events (whole or incremental),
// runs (wait, output, original, diff, list, export), recovery (offloads,
// search, tools), a session's status, watermarks and erasure, the
// tenant's retention and webhooks (VerifyWebhook checks a delivery),
// replays and promotion. Each method names its operation in its doc
// comment ("op: METHOD /path"); TestClientCoversTheAPI holds them to the
// document. A read of an erased session is a *GoneError.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one deployment with one API key (one tenant).
type Client struct {
	baseURL string
	apiKey  string
	http    *http.Client
	// MaxRetries is how many times a 429 or 503 (or a connection error on
	// an idempotent request) is retried; 0 never retries.
	MaxRetries int
	// MaxRetryWait caps one wait between attempts, whatever Retry-After
	// asks.
	MaxRetryWait time.Duration
}

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080)
// using apiKey. httpClient may be nil for http.DefaultClient.
func New(baseURL, apiKey string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: httpClient,
		MaxRetries: 4, MaxRetryWait: 30 * time.Second}
}

// Event is a threshold, checkpoint or manual event of a session.
type Event struct {
	// EventID makes the submission idempotent; empty gets a random one,
	// fixed before the first attempt.
	EventID      string `json:"event_id"`
	Kind         string `json:"kind,omitempty"`
	Model        string `json:"model,omitempty"`
	ContextLimit int    `json:"context_limit,omitempty"`
	// Conversation is the conversation in any supported format, sent
	// byte for byte; ConversationKey names one stored before instead.
	Conversation    json.RawMessage `json:"conversation,omitempty"`
	ConversationKey string          `json:"conversation_key,omitempty"`
	// Base and Messages make an incremental event instead: the session's
	// latest output (the run id and OutputSHA256 of its Result) and the
	// messages the agent appended since, as a JSON array in its format.
	Base      *Base           `json:"base,omitempty"`
	Messages  json.RawMessage `json:"messages,omitempty"`
	Preset    string          `json:"preset,omitempty"`
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// WaitSeconds > 0 waits for the run and answers its Result.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// Base names the output an incremental event continues.
type Base struct {
	RunID  string `json:"run_id"`
	SHA256 string `json:"sha256"`
}

// Accepted is the answer while a run is not finished (202).
type Accepted struct {
	RunID     string `json:"run_id"`
	Existing  bool   `json:"existing"`
	Status    string `json:"status"`
	StatusURL string `json:"status_url"`
	// SessionGeneration is 1 for a session name never erased; above 1
	// the name was erased before (PreviousErasure) and started anew.
	SessionGeneration int              `json:"session_generation,omitempty"`
	PreviousErasure   *PreviousErasure `json:"previous_erasure,omitempty"`
}

// PreviousErasure is the erasure a session generation follows.
type PreviousErasure struct {
	ID       string    `json:"id"`
	ErasedAt time.Time `json:"erased_at"`
}

// PassStat is one pass of a run.
type PassStat struct {
	Name        string `json:"name"`
	Applied     bool   `json:"applied"`
	Count       int    `json:"count"`
	TokensSaved int    `json:"tokens_saved"`
	Note        string `json:"note,omitempty"`
}

// CacheFigures are a run's prompt-cache effects: the output's tokens that
// are an unchanged prefix of the request, and those the agent's next call
// writes to its cache again.
type CacheFigures struct {
	PrefixTokens  int     `json:"prefix_tokens"`
	RewriteTokens int     `json:"rewrite_tokens"`
	PrefixShare   float64 `json:"prefix_share"`
}

// LogFigures describe the session's summary log after a run: its blocks
// and size, the blocks the run appended, and whether it reflected
// (condensed the earlier blocks into one).
type LogFigures struct {
	Blocks    int  `json:"blocks"`
	Tokens    int  `json:"tokens"`
	Appended  int  `json:"appended"`
	Reflected bool `json:"reflected"`
}

// CostFigures are a run's money figures in US dollars at the server's
// price table: the summarizer's usage and cost, the tokens the agent's
// next call re-writes to its cache, the tokens shed, and the net saving
// over the agent's next Turns calls (negative: it costs more than it
// saves); Priced is false when the agent's model has no price.
type CostFigures struct {
	SummarizerInputTokens  int     `json:"summarizer_input_tokens"`
	SummarizerOutputTokens int     `json:"summarizer_output_tokens"`
	SummarizerUSD          float64 `json:"summarizer_usd"`
	CacheRewriteTokens     int     `json:"cache_rewrite_tokens"`
	TokensShed             int     `json:"tokens_shed"`
	NetSavingUSD           float64 `json:"net_saving_usd"`
	Turns                  int     `json:"turns"`
	// TurnsSource says where Turns comes from: "observed" (the agent's
	// calls since the session's previous compaction, as an incremental
	// event showed them) or "default" (the deployment's COST_TURNS).
	TurnsSource string `json:"turns_source,omitempty"`
	Priced      bool   `json:"priced"`
}

// Result is a finished run with its compacted conversation (200).
type Result struct {
	RunID    string `json:"run_id"`
	Existing bool   `json:"existing"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
	// ErrorClass says what kind of failure a failed run had: bad_input,
	// config, summarizer, dependency, timeout, canceled, interrupted or
	// internal.
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorCause says why the dependency call behind a failed run's error
	// failed: refused, timeout, dns, tls, connection reset, connection
	// failed, or "http 503" when an answer came (the summarizer's
	// failures).
	ErrorCause   string  `json:"error_cause,omitempty"`
	Format       string  `json:"format,omitempty"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Ratio        float64 `json:"ratio"`
	LevelBefore  string  `json:"level_before,omitempty"`
	LevelAfter   string  `json:"level_after,omitempty"`
	Drift        string  `json:"drift,omitempty"`
	// BehaviourDrift names the signs that the agent drifted from its
	// task since the previous compaction; GoalDriftWarning says a warning
	// was appended at the output's tail for them.
	BehaviourDrift   []string `json:"behaviour_drift,omitempty"`
	GoalDriftWarning bool     `json:"goal_drift_warning,omitempty"`
	HistoryFailed    bool     `json:"history_failed"`
	// Degraded: the run reached its result through a fallback, which
	// DegradedReasons name.
	Degraded        bool     `json:"degraded"`
	DegradedReasons []string `json:"degraded_reasons,omitempty"`
	Success         bool     `json:"success"`
	OverLimit       bool     `json:"over_limit"`
	OverLimitReason string   `json:"over_limit_reason,omitempty"`
	LevelReason     string   `json:"level_reason,omitempty"`
	Unit            string   `json:"unit,omitempty"`
	ContextLimit    int      `json:"context_limit,omitempty"`
	Counter         string   `json:"counter,omitempty"`
	TokenCounting   string   `json:"token_counting,omitempty"`
	FreedTokens     int      `json:"freed_tokens"`
	PreservedCount  int      `json:"preserved_count"`
	DeletedOffloads int      `json:"deleted_offloads"`
	ArchiveKey      string   `json:"archive_key,omitempty"`
	OutputKey       string   `json:"output_key,omitempty"`
	OutputSHA256    string   `json:"output_sha256,omitempty"`
	// HandoffKey names the fresh session's conversation (Handoff), made
	// when the run ended CRITICAL or over its limit, or at a checkpoint.
	HandoffKey    string     `json:"handoff_key,omitempty"`
	HandoffSHA256 string     `json:"handoff_sha256,omitempty"`
	Passes        []PassStat `json:"passes"`
	// Cache is how much of the agent's prompt cache the run kept.
	Cache *CacheFigures `json:"cache,omitempty"`
	// SessionLog is the session's append-only summary log after the run.
	SessionLog *LogFigures `json:"session_log,omitempty"`
	// SummaryLog is SessionLog under the name the docs use.
	SummaryLog *LogFigures `json:"summary_log,omitempty"`
	// Cost is what the run cost and saves after prompt-cache effects.
	Cost *CostFigures `json:"cost,omitempty"`
	// ContextCompression is a ReAct trajectory's layer statistics
	// (react-two-layer), as the server sends them.
	ContextCompression json.RawMessage `json:"context_compression,omitempty"`
	Conversation       json.RawMessage `json:"conversation,omitempty"`
	// Recommendation is the three-tier action for the level after; Handoff the
	// fresh-session conversation, when the run ended CRITICAL (or over its
	// limit) or on a checkpoint event.
	Recommendation string          `json:"recommendation,omitempty"`
	Handoff        json.RawMessage `json:"handoff,omitempty"`
	// SessionGeneration and PreviousErasure: see Accepted.
	SessionGeneration int              `json:"session_generation,omitempty"`
	PreviousErasure   *PreviousErasure `json:"previous_erasure,omitempty"`
}

// Run is a run's record, as GET /v1/runs/{run} (RunAnswer.Run) and
// ListRuns answer it.
type Run struct {
	ID      string `json:"id"`
	Tenant  string `json:"tenant,omitempty"`
	Session string `json:"session"`
	EventID string `json:"event_id,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	Preset  string `json:"preset"`
	// Model is the summarizer's; AgentModel the agent's the caller named.
	Model         string     `json:"model,omitempty"`
	PromptVersion string     `json:"prompt_version,omitempty"`
	Status        string     `json:"status"`
	Level         string     `json:"level,omitempty"`
	TokensBefore  int        `json:"tokens_before,omitempty"`
	TokensAfter   int        `json:"tokens_after,omitempty"`
	CharsBefore   int        `json:"chars_before,omitempty"`
	CharsAfter    int        `json:"chars_after,omitempty"`
	Ratio         float64    `json:"ratio,omitempty"`
	DurationMS    int        `json:"duration_ms,omitempty"`
	StartedAt     time.Time  `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	Error         string     `json:"error,omitempty"`
	// ErrorClass: see Result.ErrorClass.
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorCause: see Result.ErrorCause.
	ErrorCause    string          `json:"error_cause,omitempty"`
	ReplayOf      string          `json:"replay_of,omitempty"`
	InputKey      string          `json:"input_key,omitempty"`
	ArchiveKey    string          `json:"archive_key,omitempty"`
	ArchiveSHA256 string          `json:"archive_sha256,omitempty"`
	OutputKey     string          `json:"output_key,omitempty"`
	OutputSHA256  string          `json:"output_sha256,omitempty"`
	InputSHA256   string          `json:"input_sha256,omitempty"`
	Stats         json.RawMessage `json:"stats,omitempty"`
	AgentModel    string          `json:"agent_model,omitempty"`
	ContextLimit  int             `json:"context_limit,omitempty"`
	// Overrides are the effective overrides; ResolvedPreset the preset the
	// run works with.
	Overrides      json.RawMessage `json:"overrides,omitempty"`
	ResolvedPreset json.RawMessage `json:"resolved_preset,omitempty"`
	// Degraded says the run reached its result through a fallback;
	// DegradedReasons say which.
	Degraded        bool     `json:"degraded"`
	DegradedReasons []string `json:"degraded_reasons,omitempty"`
}

// Final reports whether the run will not change any more.
func (r Run) Final() bool {
	switch r.Status {
	case "succeeded", "over_limit", "failed":
		return true
	}
	return false
}

// Offload is one live offloaded tool result of a session.
type Offload struct {
	ID         string    `json:"id"`
	ToolCallID string    `json:"tool_call_id"`
	ToolName   string    `json:"tool_name"`
	Tokens     int       `json:"tokens"`
	RunID      string    `json:"run_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// DeletedAt is set on a released offload (listed with deleted=true
	// only; Offloads lists the live ones).
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Hit is one result of a recovery search.
type Hit struct {
	Kind    string `json:"kind"`
	RunID   string `json:"run_id"`
	Message int    `json:"message"`
	Matches int    `json:"matches"`
	// MatchesCapped: counting stopped at 10,000 matches in this hit.
	MatchesCapped bool   `json:"matches_capped,omitempty"`
	Excerpt       string `json:"excerpt"`
	// ID is what Recover reads the hit back with ("" when nothing can).
	ID string `json:"id,omitempty"`
}

// Error is an answer other than success, in the API's one error shape.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Index and Path name the message of a malformed conversation and the
	// field inside it.
	Index *int   `json:"index,omitempty"`
	Path  string `json:"path,omitempty"`
	// RunID is the run holding an event id (a 409 naming event_id) or a
	// base (a 409 naming base.run_id, a *BaseHeldError).
	RunID string `json:"run_id,omitempty"`
	// ErasureID and ErasedAt are set on a 410 (code "gone"): the session
	// was erased, by that erasure (readable with Erasure).
	ErasureID string     `json:"erasure_id,omitempty"`
	ErasedAt  *time.Time `json:"erased_at,omitempty"`
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration `json:"-"`
}

// GoneError is the answer to a read of an erased session: HTTP 410, code
// "gone". It wraps the *Error (errors.As finds either), whose ErasureID
// and ErasedAt name the erasure.
type GoneError struct {
	Err *Error
}

// Error says the API error and the erasure.
func (e *GoneError) Error() string { return e.Err.Error() + " (erasure " + e.Err.ErasureID + ")" }

// Unwrap returns the API error.
func (e *GoneError) Unwrap() error { return e.Err }

// BaseHeldError refuses an incremental event whose base another event
// already continues: HTTP 409, field base.run_id. Err.RunID is the run
// that holds the base; continue from its output (wait for it, then send
// the turns appended since as an event on that run's output). It wraps
// the *Error (errors.As finds either).
type BaseHeldError struct {
	Err *Error
}

// Error says the API error and the run that holds the base.
func (e *BaseHeldError) Error() string { return e.Err.Error() + " (held by run " + e.Err.RunID + ")" }

// Unwrap returns the API error.
func (e *BaseHeldError) Unwrap() error { return e.Err }

// HoldingRun is the run that already continues the base.
func (e *BaseHeldError) HoldingRun() string { return e.Err.RunID }

// Error says the status, the code, the field when there is one, and the
// message.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Submit sends an event of session. A finished run answers a Result (with
// WaitSeconds, when it finished in time); otherwise Accepted, and the run
// goes on: WaitRun and Output get it later.
//
// op: POST /v1/sessions/{session}/events
func (c *Client) Submit(ctx context.Context, session string, ev Event) (*Result, *Accepted, error) {
	if ev.EventID == "" {
		ev.EventID = newID("evt-")
	}
	return c.submit(ctx, "/v1/sessions/"+url.PathEscape(session)+"/events", ev)
}

// Compact is the offload-compact design's manual /compact: an event of
// kind manual (ev.Kind is not sent), answered as Submit. An empty EventID
// gets a random one, fixed before the first attempt: each call is a new
// event, and a retry is the same one.
//
// op: POST /v1/sessions/{session}/compact
func (c *Client) Compact(ctx context.Context, session string, ev Event) (*Result, *Accepted, error) {
	ev.Kind = ""
	if ev.EventID == "" {
		ev.EventID = newID("cmp-")
	}
	return c.submit(ctx, "/v1/sessions/"+url.PathEscape(session)+"/compact", ev)
}

// submit posts an event to path and decodes its Result (200) or Accepted
// (202).
func (c *Client) submit(ctx context.Context, path string, ev Event) (*Result, *Accepted, error) {
	// The conversation goes as it is, byte for byte (the archive keeps
	// those bytes): json.Marshal would compact it and escape <, > and &.
	conv := ev.Conversation
	ev.Conversation = nil
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, nil, fmt.Errorf("encode event: %w", err)
	}
	if len(conv) > 0 {
		if !json.Valid(conv) {
			return nil, nil, errors.New("encode event: the conversation is not valid JSON")
		}
		body = append(append(append(body[:len(body)-1], `,"conversation":`...), conv...), '}')
	}
	status, data, _, err := c.do(ctx, http.MethodPost, path, nil, body, true)
	if err != nil {
		return nil, nil, err
	}
	return finishedOrAccepted[Result](status, data, "result")
}

// finishedOrAccepted decodes the answer of a request that may finish
// within its wait (200: a T) or be accepted to finish later (202).
func finishedOrAccepted[T any](status int, data []byte, what string) (*T, *Accepted, error) {
	if status == http.StatusAccepted {
		var a Accepted
		if err := json.Unmarshal(data, &a); err != nil {
			return nil, nil, fmt.Errorf("decode 202: %w", err)
		}
		return nil, &a, nil
	}
	var r T
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return &r, nil, nil
}

// RunAnswer is a run as GET /v1/runs/{run} answers it: the same outcome
// as a finished run's answer to its event (Result: figures, reason,
// handoff, conversation; status and error only while it is live), and
// its record (Run).
type RunAnswer struct {
	Result
	Run Run `json:"run"`
}

// Final reports whether the run will not change any more.
func (a RunAnswer) Final() bool { return a.Run.Final() }

// WaitRun returns run runID, waiting up to wait (the server caps it) for
// it to be final; a run still live after the wait comes back as it is.
//
// op: GET /v1/runs/{run}
func (c *Client) WaitRun(ctx context.Context, runID string, wait time.Duration) (RunAnswer, error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), q, nil, true)
	if err != nil {
		return RunAnswer{}, err
	}
	var a RunAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return RunAnswer{}, fmt.Errorf("decode run: %w", err)
	}
	return a, nil
}

// waitFinalStep is how long each request of WaitFinal asks the server to
// wait (the server caps it at its own bound, 10 minutes by default).
const waitFinalStep = 5 * time.Minute

// WaitFinal returns run runID once it is final (succeeded, over_limit,
// failed, …), asking again as long as it is live; ctx bounds the whole
// wait. Its answer is the run's whole outcome, the compacted conversation
// included, as a finished run's answer to its event. It asks through
// WaitRun.
func (c *Client) WaitFinal(ctx context.Context, runID string) (RunAnswer, error) {
	for {
		a, err := c.WaitRun(ctx, runID, waitFinalStep)
		if err != nil || a.Final() {
			return a, err
		}
		if err := ctx.Err(); err != nil {
			return a, fmt.Errorf("wait for run %s (still %s): %w", runID, a.Run.Status, err)
		}
	}
}

// Output returns a finished run's compacted conversation, checked against
// the SHA-256 the server sends.
//
// op: GET /v1/runs/{run}/output
func (c *Client) Output(ctx context.Context, runID string) ([]byte, error) {
	_, data, h, err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/output", nil, nil, true)
	if err != nil {
		return nil, err
	}
	return data, checkSHA(h, data)
}

// Offloads lists the session's live offloads.
//
// op: GET /v1/sessions/{session}/offloads
func (c *Client) Offloads(ctx context.Context, session string) ([]Offload, error) {
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/offloads", nil, nil, true)
	if err != nil {
		return nil, err
	}
	var l struct {
		Offloads []Offload `json:"offloads"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("decode offloads: %w", err)
	}
	return l.Offloads, nil
}

// Recover returns what a recover id names (lines "" for the whole, or
// "A-B"): an offloaded tool result byte for byte, or for an archive id
// ("<sha256>.m3-57", "<sha256>.m12b1") messages of the archived original
// as a transcript or one block verbatim. What the recover_context tool
// answers to an agent. A range that starts past the end is an *Error
// with Status 416 whose message names the line count.
//
// op: GET /v1/sessions/{session}/offloads/{id}
func (c *Client) Recover(ctx context.Context, session, id, lines string) ([]byte, error) {
	q := url.Values{}
	if lines != "" {
		q.Set("lines", lines)
	}
	_, data, h, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/offloads/"+url.PathEscape(id), q, nil, true)
	if err != nil {
		return nil, err
	}
	if lines != "" {
		return data, nil
	}
	return data, checkSHA(h, data)
}

// Search finds text in the session's offloads and archived originals:
// what the search_context tool answers.
//
// op: GET /v1/sessions/{session}/search
func (c *Client) Search(ctx context.Context, session, query string) ([]Hit, error) {
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(session)+"/search", url.Values{"q": {query}}, nil, true)
	if err != nil {
		return nil, err
	}
	var s struct {
		Hits []Hit `json:"hits"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode search: %w", err)
	}
	return s.Hits, nil
}

// Tools returns the recovery tools' definitions in a provider's schema
// ("openai" or "anthropic"), ready to pass to the agent's model.
//
// op: GET /v1/tools
func (c *Client) Tools(ctx context.Context, format string) ([]json.RawMessage, error) {
	_, data, _, err := c.do(ctx, http.MethodGet, "/v1/tools", url.Values{"format": {format}}, nil, true)
	if err != nil {
		return nil, err
	}
	var t struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("decode tools: %w", err)
	}
	return t.Tools, nil
}

// do sends one request, retrying 429 and 503 answers (after their
// Retry-After) and, when retryable, connection errors. It returns the
// status, body and headers of a 2xx answer, or an *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, retryable bool) (int, []byte, http.Header, error) {
	u := c.baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		status, data, h, err := c.once(req)
		wait := time.Duration(0)
		switch {
		case err == nil:
			return status, data, h, nil
		case ctx.Err() != nil:
			return 0, nil, nil, ctx.Err()
		default:
			var ae *Error
			if errors.As(err, &ae) {
				if ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusServiceUnavailable {
					return 0, nil, nil, err
				}
				wait = ae.RetryAfter
			} else if !retryable {
				return 0, nil, nil, err
			}
		}
		if attempt >= c.MaxRetries {
			return 0, nil, nil, err
		}
		if wait <= 0 {
			wait = time.Duration(1<<attempt) * 200 * time.Millisecond
		}
		wait = min(wait, c.MaxRetryWait)
		select {
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// CodeGone is the code of the answer to a read of an erased session
// (410, a *GoneError).
const CodeGone = "gone"

func (c *Client) once(req *http.Request) (int, []byte, http.Header, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s %s: read answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, data, resp.Header, nil
	}
	var body struct {
		Error *Error `json:"error"`
	}
	ae := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(data))}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		ae = body.Error
		ae.Status = resp.StatusCode
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		ae.RetryAfter = time.Duration(s) * time.Second
	}
	if ae.Status == http.StatusGone && ae.Code == CodeGone {
		return 0, nil, nil, &GoneError{Err: ae}
	}
	if ae.Status == http.StatusConflict && ae.Field == "base.run_id" && ae.RunID != "" {
		return 0, nil, nil, &BaseHeldError{Err: ae}
	}
	return 0, nil, nil, ae
}

// checkSHA checks data against the X-Content-SHA256 header, when sent.
func checkSHA(h http.Header, data []byte) error {
	want := h.Get("X-Content-SHA256")
	if want == "" {
		return nil
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("answer's SHA-256 %s does not match X-Content-SHA256 %s", got, want)
	}
	return nil
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
