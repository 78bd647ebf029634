package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// inspectRequest is the body of POST /v1/sessions/{session}/inspect: a
// conversation to measure, as an event would carry it: whole, or as base
// and messages (the session's latest output and what was appended since).
type inspectRequest struct {
	Model        string            `json:"model"`
	ContextLimit int               `json:"context_limit"`
	Preset       string            `json:"preset"`
	Conversation json.RawMessage   `json:"conversation"`
	Base         *gateway.Base     `json:"base,omitempty"`
	Messages     []json.RawMessage `json:"messages,omitempty"`
}

// inspectResponse is the three-tier design's status report of the conversation sent:
// its size against the limit, its level, the recommendation, and what the
// preset's deterministic passes and the budget ladder would reach.
type inspectResponse struct {
	Format   string      `json:"format"`
	Messages int         `json:"messages"`
	Report   plan.Report `json:"report"`
	// Tokens is the conversation's size (the report's size_before), and
	// TriggerReached whether its usage reaches TriggerUsage, where the
	// preset's first compaction pass starts: "should I send an event?"
	// without a tokenizer of one's own.
	Tokens         int     `json:"tokens"`
	TriggerUsage   float64 `json:"trigger_usage"`
	TriggerReached bool    `json:"trigger_reached"`
}

// postInspect measures the caller's current conversation without running
// a compaction or storing anything (`/status` describes the last run's
// output instead).
func (a *api) postInspect(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req inspectRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	whole := len(req.Conversation) > 0 && string(req.Conversation) != "null"
	switch {
	case req.Base != nil && whole:
		return badRequest("base", "base: an inspection carries base and messages, or a conversation, not both")
	case req.Base == nil && !whole:
		return badRequest("conversation", "conversation: required (or base and messages)")
	}
	if req.ContextLimit < 0 {
		return badRequest("context_limit", "context_limit: must not be negative")
	}
	if req.ContextLimit > gateway.MaxContextLimit {
		return badRequest("context_limit", "context_limit: %d is above %d", req.ContextLimit, gateway.MaxContextLimit)
	}
	if req.Model != "" {
		if err := idcheck.Check("model", req.Model); err != nil {
			return badRequest("model", "%v", err)
		}
	}
	// Measuring runs the deterministic passes on the whole conversation
	// (a few times its size in memory): a few at a time per process, and
	// fewer per tenant.
	if !a.inspections.take(tenant, maxTenantInspections) {
		return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("more than %d of your inspections in flight", maxTenantInspections)}
	}
	defer a.inspections.release(tenant)
	select {
	case a.inspecting <- struct{}{}:
		defer func() { <-a.inspecting }()
	default:
		return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 1,
			Message: fmt.Sprintf("more than %d inspections in flight on this server", cap(a.inspecting))}
	}
	if req.Base != nil {
		rebuilt, err := a.deps.Gateway.Rebuild(r.Context(), tenant, r.PathValue("session"), *req.Base, messagesArg(req.Messages))
		if err != nil {
			return err
		}
		req.Conversation = rebuilt
	}
	conv, err := conversation.ParseAny(req.Conversation)
	if err != nil {
		out := badRequest("conversation", "conversation: %v", err)
		if ce, ok := err.(*conversation.Error); ok && ce.Index >= 0 {
			out.Index, out.Path = &ce.Index, ce.Field
		}
		return out
	}
	name := req.Preset
	if name == "" {
		name = a.deps.Gateway.DefaultPreset
	}
	p, err := policy.Resolve(name, a.deps.Gateway.Overrides[name])
	if err != nil {
		return badRequest("preset", "preset: %v", err)
	}
	model := req.Model
	if model == "" {
		model = "gpt-4o"
	}
	rep, err := plan.Inspect(conv, p, model, req.ContextLimit, tokens.DefaultLimits())
	if err != nil {
		return badRequest("context_limit", "%v", err)
	}
	trigger := triggerUsage(p)
	writeJSON(w, http.StatusOK, inspectResponse{Format: string(conv.Format), Messages: len(conv.Messages), Report: rep,
		Tokens: rep.SizeBefore, TriggerUsage: trigger, TriggerReached: rep.Usage >= trigger})
	return nil
}

// triggerUsage is where preset p's first compaction pass starts, as a
// share of the limit: the lowest trigger of its enabled passes (a pass
// without one runs from the start, the watermark and offloads among
// them, and does not count: they cost the cache nothing), else the
// history pass's, else the budget ladder's target.
func triggerUsage(p policy.Preset) float64 {
	t := 0.0
	lower := func(v float64) {
		if v > 0 && (t == 0 || v < t) {
			t = v
		}
	}
	if p.History.Enabled {
		lower(p.History.TriggerUsage)
	}
	if p.GlobalResults.Enabled {
		lower(p.GlobalResults.TriggerUsage)
	}
	if p.Truncate.Enabled {
		lower(p.Truncate.TriggerUsage)
	}
	if p.Offload.Enabled {
		lower(p.Offload.TriggerUsage)
	}
	if t == 0 && p.Budget.Enabled {
		t = p.Budget.TargetUsage
	}
	return t
}
