package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Modes of POST /v1/results:compress.
const (
	ModeSummarize = "summarize"
	ModeOffload   = "offload"
)

// DefaultResultsSession is the session that results:compress uses when the
// caller names none.
const DefaultResultsSession = "results"

// defaultSummarizeWait is how long summarize waits when the caller gives no
// wait_seconds: the endpoint is meant to be synchronous.
const defaultSummarizeWait = 2 * time.Minute

// compressRequest is the body of POST /v1/results:compress: the ReAct two-layer design's
// layer 1 as a service, for one large tool result.
type compressRequest struct {
	Text     string `json:"text"`
	ToolName string `json:"tool_name"`
	// Model is the agent's model: it picks the token encoding of offload's
	// count.
	Model string `json:"model"`
	Mode  string `json:"mode"`
	// Session groups the work in the audit trail; "results" when empty.
	Session     string          `json:"session"`
	Overrides   json.RawMessage `json:"overrides"`
	WaitSeconds int             `json:"wait_seconds"`
}

// compressResponse answers results:compress. Offload fills Reference, Key,
// SHA256 and Tokens; summarize fills RunID, Text, the sizes and Drift.
type compressResponse struct {
	Mode string `json:"mode"`
	// Status is the run's status for summarize (succeeded, or over_limit
	// or failed with Error) and "stored" for offload.
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	Reference  string `json:"reference,omitempty"`
	// ID is the offload's id (its SHA-256), which the reference names and
	// GET /v1/sessions/{session}/offloads/{id} reads.
	ID          string `json:"id,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	Tokens      int    `json:"tokens,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Text        string `json:"text,omitempty"`
	CharsBefore int    `json:"chars_before"`
	CharsAfter  int    `json:"chars_after"`
	Drift       string `json:"drift,omitempty"`
}

func (a *api) postCompress(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req compressRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Text == "" {
		return badRequest("text", "text: must not be empty")
	}
	if !utf8.ValidString(req.Text) {
		return badRequest("text", "text: must be valid UTF-8")
	}
	if req.Session == "" {
		req.Session = DefaultResultsSession
	}
	// The same identifier rules as every route's session and the
	// gateway's tool names: they land in rows, keys and terminals.
	if err := idcheck.Session(req.Session); err != nil {
		return badRequest("session", "%v", err)
	}
	if req.ToolName != "" {
		if err := idcheck.Check("tool_name", req.ToolName); err != nil {
			return badRequest("tool_name", "%v", err)
		}
	}
	if err := a.checkOverrides(req.Overrides); err != nil {
		return err
	}
	switch req.Mode {
	case ModeOffload:
		return a.offload(w, r, tenant, req)
	case ModeSummarize:
		return a.summarize(w, r, tenant, req)
	case "":
		return badRequest("mode", "mode: required, one of summarize, offload")
	default:
		return badRequest("mode", "mode: %q is not one of summarize, offload", req.Mode)
	}
}

// checkOverrides checks a request's overrides in every mode as a
// summarize run's are checked by the gateway (gateway.Gateway.settings):
// the operator's caps, then the merge under the deployment's overrides of
// the react-two-layer preset and its resolution, each problem a 400
// naming the field. Offload uses no overrides, but must not take what
// summarize refuses.
func (a *api) checkOverrides(raw json.RawMessage) error {
	g := a.deps.Gateway
	if err := policy.CheckCallerOverrides(raw, g.Caps); err != nil {
		var oe *policy.OverrideError
		if errors.As(err, &oe) {
			field := "overrides"
			if oe.Field != "overrides" {
				field += "." + oe.Field
			}
			return badRequest(field, "%s: %s", field, oe.Reason)
		}
		return badRequest("overrides", "overrides: %v", err)
	}
	merged, err := policy.Merge(g.Overrides[policy.ReactTwoLayer], nullIsEmpty(raw))
	if err == nil {
		_, err = policy.Resolve(policy.ReactTwoLayer, merged)
	}
	if err != nil {
		return badRequest("overrides", "overrides: %v", err)
	}
	return nil
}

// offload stores the text under the tenant's offload prefix and answers
// with the three-tier reference block, which the caller puts in place of the
// result.
func (a *api) offload(w http.ResponseWriter, r *http.Request, tenant string, req compressRequest) error {
	counter, err := tokens.New(tokens.EncodingForModel(req.Model))
	if err != nil {
		return fmt.Errorf("token counter for %q: %w", req.Model, err)
	}
	// The row first, then the object (see store.ReleaseOffloads).
	sha := blob.SHA256Hex([]byte(req.Text))
	key := blob.ContentKey(tenant, blob.KindOffload, sha)
	n := counter.Count(req.Text)
	if err := a.deps.Store.AddOffload(r.Context(), store.Offload{Tenant: tenant, Session: req.Session, Key: key,
		ToolName: req.ToolName, Tokens: n, SHA256: sha}); err != nil {
		return fmt.Errorf("record offload: %w", err)
	}
	ref, err := a.deps.Blob.PutContent(r.Context(), tenant, blob.KindOffload, []byte(req.Text))
	if err != nil {
		return fmt.Errorf("store offload: %w", err)
	}
	chars := utf8.RuneCountInString(req.Text)
	reference := strategy.Reference(strategy.OffloadRef{Key: ref.Key, ToolName: req.ToolName, TokensSaved: n, Preview: strategy.Preview(req.Text)})
	writeJSON(w, http.StatusOK, compressResponse{Mode: ModeOffload, Status: "stored", Reference: reference, ID: ref.SHA256, SHA256: ref.SHA256,
		Tokens: n, CharsBefore: chars, CharsAfter: utf8.RuneCountInString(reference)})
	return nil
}

// summarize runs the result through the react-two-layer pipeline as a
// one-turn ReAct trajectory, so that the map-reduce is durable, audited
// and drift-checked like any run. Results at or under the preset's
// large_result.threshold_chars come back unchanged.
func (a *api) summarize(w http.ResponseWriter, r *http.Request, tenant string, req compressRequest) error {
	wait, err := a.waitFor(req.WaitSeconds)
	if err != nil {
		return err
	}
	if wait == 0 {
		wait = min(defaultSummarizeWait, a.deps.MaxWait)
	}
	tool := req.ToolName
	if tool == "" {
		tool = "tool"
	}
	conv, err := json.Marshal(map[string]any{
		"execution": map[string]any{"tool_calls": []any{
			map[string]any{"action": map[string]any{"tool": tool}, "result": req.Text},
		}},
	})
	if err != nil {
		return fmt.Errorf("build trajectory: %w", err)
	}
	overrides := nullIsEmpty(req.Overrides)
	// The same text and settings are the same event: a retry joins the
	// first run instead of summarizing again.
	sum := sha256.Sum256(append(append([]byte(req.Model+"\x00"+tool+"\x00"), overrides...), conv...))
	sub, err := a.deps.Gateway.Submit(r.Context(), gateway.Event{
		Tenant: tenant, Session: req.Session, EventID: "compress-" + hex.EncodeToString(sum[:16]), Kind: gateway.KindManual,
		Model: req.Model, Preset: policy.ReactTwoLayer, Overrides: overrides, Conversation: conv,
	})
	if err != nil {
		return err
	}
	res, done, err := a.waitRun(r.Context(), tenant, sub.RunID, wait)
	if err != nil {
		return err
	}
	if !done {
		a.accept(w, r, tenant, sub)
		return nil
	}
	if res.Status != string(store.RunSucceeded) {
		writeJSON(w, http.StatusOK, compressResponse{Mode: ModeSummarize, Status: res.Status, Error: res.Error, ErrorClass: res.ErrorClass, RunID: sub.RunID,
			CharsBefore: utf8.RuneCountInString(req.Text)})
		return nil
	}
	text, err := resultText(res.Conversation)
	if err != nil {
		return fmt.Errorf("read summarized result of run %s: %w", sub.RunID, err)
	}
	writeJSON(w, http.StatusOK, compressResponse{Mode: ModeSummarize, Status: res.Status, RunID: sub.RunID, Text: text,
		CharsBefore: utf8.RuneCountInString(req.Text), CharsAfter: utf8.RuneCountInString(text), Drift: res.Drift})
	return nil
}

// resultText is the text of the first tool result of a compacted
// trajectory.
func resultText(data []byte) (string, error) {
	c, err := conversation.Parse(data, conversation.FormatReAct)
	if err != nil {
		return "", err
	}
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindToolResult {
				return b.Text, nil
			}
		}
	}
	return "", fmt.Errorf("no tool result in the output")
}
