package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/ident"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// inspectRequest is the body of POST /v1/sessions/{session}/inspect: a
// conversation to measure, as an event would carry it.
type inspectRequest struct {
	Model        string          `json:"model"`
	ContextLimit int             `json:"context_limit"`
	Preset       string          `json:"preset"`
	Conversation json.RawMessage `json:"conversation"`
}

// inspectResponse is the three-tier design's status report of the conversation sent:
// its size against the limit, its level, the recommendation, and what the
// preset's deterministic passes and the budget ladder would reach.
type inspectResponse struct {
	Format   string      `json:"format"`
	Messages int         `json:"messages"`
	Report   plan.Report `json:"report"`
}

// postInspect measures the caller's current conversation without running
// a compaction or storing anything (`/status` describes the last run's
// output instead).
func (a *api) postInspect(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req inspectRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Conversation) == 0 || string(req.Conversation) == "null" {
		return badRequest("conversation", "conversation: required")
	}
	if req.ContextLimit < 0 {
		return badRequest("context_limit", "context_limit: must not be negative")
	}
	if req.ContextLimit > gateway.MaxContextLimit {
		return badRequest("context_limit", "context_limit: %d is above %d", req.ContextLimit, gateway.MaxContextLimit)
	}
	if req.Model != "" {
		if err := ident.Check("model", req.Model); err != nil {
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
	writeJSON(w, http.StatusOK, inspectResponse{Format: string(conv.Format), Messages: len(conv.Messages), Report: rep})
	return nil
}
