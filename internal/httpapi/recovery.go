package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// getOutput answers a finished run's compacted conversation, byte for
// byte in the caller's format, with its SHA-256: how an integrator gets
// the result of a run that answered 202 (replays included). A run that
// did not commit is a 409 saying how to wait for it.
func (a *api) getOutput(w http.ResponseWriter, r *http.Request, tenant string) error {
	d, err := a.runs.Download(r.Context(), tenant, r.PathValue("run"), runview.Output)
	if errors.Is(err, audit.ErrNoOutput) {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "run",
			Message: fmt.Sprintf("run is %s: it has no output (GET /v1/runs/%s?wait=30s waits for it to finish)", d.Run.Status, d.Run.ID)}
	}
	if err != nil {
		return notFoundAs(err, "run")
	}
	w.Header().Set("X-Run-Status", string(d.Run.Status))
	runview.Write(w, "application/json", "", d.Data)
	return nil
}

// queryWait reads ?wait= (a Go duration such as 30s, or seconds), capped
// by MaxWait.
func (a *api) queryWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, badRequest("wait", "wait: %q is not a duration such as 30s", v)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > a.deps.MaxWait {
		return 0, badRequest("wait", "wait: must be between 0s and %s", a.deps.MaxWait)
	}
	return d, nil
}

// offloadInfo is one live offload of a session, as an agent recovers it:
// ID is what the reference in the conversation names.
type offloadInfo struct {
	ID         string    `json:"id"`
	ToolCallID string    `json:"tool_call_id"`
	ToolName   string    `json:"tool_name"`
	Tokens     int       `json:"tokens"`
	RunID      string    `json:"run_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// DeletedAt is when a released offload's object was deleted (listed
	// with ?deleted=true); its text stays readable from the archived
	// original of the run that offloaded it.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// offloadList is the body of GET /v1/sessions/{session}/offloads.
type offloadList struct {
	Offloads []offloadInfo `json:"offloads"`
}

// offloadID is an offload's public id: the SHA-256 of its content, which
// is also the last segment of its key.
func offloadID(key string) string {
	_, _, sha, err := blob.ParseContentKey(key)
	if err != nil {
		return ""
	}
	return sha
}

func (a *api) listOffloads(w http.ResponseWriter, r *http.Request, tenant string) error {
	deleted, err := boolParam(r, "deleted")
	if err != nil {
		return err
	}
	offs, err := a.deps.Store.ListOffloads(r.Context(), tenant, r.PathValue("session"), deleted)
	if err != nil {
		return err
	}
	out := offloadList{Offloads: []offloadInfo{}}
	for _, o := range offs {
		info := offloadInfo{ID: offloadID(o.Key), ToolCallID: o.ToolID, ToolName: o.ToolName,
			Tokens: o.Tokens, RunID: o.RunID, CreatedAt: o.CreatedAt}
		if !o.DeletedAt.IsZero() {
			at := o.DeletedAt
			info.DeletedAt = &at
		}
		out.Offloads = append(out.Offloads, info)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getOffload answers what a recover id names (the recover_context tool):
// audit.Service.RecoverContext reads it, for this tenant and session only
// (the MCP server's recover_context calls the same function). Anything
// else, malformed ids included, is a 404 like an unknown id. ?lines=A-B
// answers lines A to B (1-based, inclusive) of the text; a range that
// starts past the end is a 416 naming the text's line count, which
// X-Total-Lines carries on every answer.
func (a *api) getOffload(w http.ResponseWriter, r *http.Request, tenant string) error {
	rec, err := a.auditService().RecoverContext(r.Context(), tenant, r.PathValue("session"), r.PathValue("id"), r.URL.Query().Get("lines"))
	var re *audit.RecoverError
	if errors.As(err, &re) {
		return recoverError(w, re)
	}
	if err != nil {
		return err
	}
	w.Header().Set("X-Total-Lines", strconv.Itoa(rec.TotalLines))
	if rec.From > 0 {
		w.Header().Set("X-Lines", fmt.Sprintf("%d-%d", rec.From, rec.To))
	}
	runview.Write(w, "text/plain; charset=utf-8", "", rec.Data)
	return nil
}

// recoverError is the HTTP answer of a recovery the caller got wrong.
func recoverError(w http.ResponseWriter, re *audit.RecoverError) error {
	switch re.Code {
	case audit.RecoverBadLines:
		w.Header().Set("X-Total-Lines", strconv.Itoa(re.TotalLines))
		return badRequest(re.Field, "%s", re.Message)
	case audit.RecoverPastEnd:
		w.Header().Set("X-Total-Lines", strconv.Itoa(re.TotalLines))
		return &apiError{Status: http.StatusRequestedRangeNotSatisfiable, Code: CodeRangeNotSatisfiable, Field: re.Field, Message: re.Message}
	default:
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Field: re.Field, Message: re.Message}
	}
}

// The line helpers live with the recovery logic, in package audit.

func parseLines(v string) (int, int, bool)       { return audit.ParseLines(v) }
func splitLines(text string) []string            { return audit.SplitLines(text) }
func countLines(text string) int                 { return audit.CountLines(text) }
func lineRange(text string, from, to int) string { return audit.LineRange(text, from, to) }

// Tool names an agent is given to recover what was offloaded.
const (
	ToolRecover = strategy.RecoverTool
	ToolSearch  = "search_context"
)

// toolsResponse is the body of GET /v1/tools: ready tool definitions in
// the provider's own schema.
type toolsResponse struct {
	Format string           `json:"format"`
	Tools  []map[string]any `json:"tools"`
}

// getTools answers the recovery tools' definitions for ?format=openai
// (Chat Completions "tools") or anthropic (Messages "tools").
func (a *api) getTools(w http.ResponseWriter, r *http.Request, _ string) error {
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "openai"
	}
	type tool struct {
		name, description string
		params            map[string]any
	}
	tools := []tool{
		{ToolRecover, "Recover, word for word, what was cut from the conversation to save context: a tool result that was " +
			"offloaded, a tool result or call input that was shortened or summarized, or the messages a summary replaced. " +
			"The reference, note or summary left in its place ends with the id to pass. Optionally ask for a line range of a long text.",
			map[string]any{"type": "object", "properties": map[string]any{
				"id": map[string]any{"type": "string", "description": "the id named where the content was cut: an offload id (64 hex " +
					"characters), or an archive id such as <64 hex>.m3-57 (messages 3 to 57 of the original conversation, as a " +
					"transcript) or <64 hex>.m12b1 (one tool result or input, verbatim)"},
				"lines": map[string]any{"type": "string", "description": "optional line range such as 1-200; a range past the end is " +
					"refused with the text's line count"},
			}, "required": []string{"id"}, "additionalProperties": false}},
		{ToolSearch, "Search the earlier, compacted or offloaded parts of this session for a word, identifier or phrase. " +
			"Each hit names the id that reads its message back with " + ToolRecover + ".",
			map[string]any{"type": "object", "properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "what to look for"},
			}, "required": []string{"query"}, "additionalProperties": false}},
	}
	out := toolsResponse{Format: format}
	for _, t := range tools {
		switch format {
		case "openai":
			out.Tools = append(out.Tools, map[string]any{"type": "function", "function": map[string]any{
				"name": t.name, "description": t.description, "parameters": t.params}})
		case "anthropic":
			out.Tools = append(out.Tools, map[string]any{"name": t.name, "description": t.description, "input_schema": t.params})
		default:
			return badRequest("format", "format: %q is not one of openai, anthropic", format)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
