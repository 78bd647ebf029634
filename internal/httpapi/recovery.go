package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/compress"
)

// getOutput answers a finished run's compacted conversation, byte for
// byte in the caller's format, with its SHA-256: how an integrator gets
// the result of a run that answered 202 (replays included).
func (a *api) getOutput(w http.ResponseWriter, r *http.Request, tenant string) error {
	run, err := a.deps.Store.GetRun(r.Context(), r.PathValue("run"))
	if err != nil {
		return notFoundAs(err, "run")
	}
	if run.Tenant != tenant {
		return notFound("run")
	}
	if !run.Status.Committed() {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "run",
			Message: fmt.Sprintf("run is %s: it has no output (GET /v1/runs/%s?wait=30s waits for it to finish)", run.Status, run.ID)}
	}
	data, err := a.output(r.Context(), tenant, run.OutputKey, run.OutputSHA256)
	if err != nil {
		return err
	}
	w.Header().Set("X-Run-Status", string(run.Status))
	writeBytes(w, "application/json", data)
	return nil
}

// writeBytes answers data as is, with its SHA-256 in X-Content-SHA256.
func writeBytes(w http.ResponseWriter, contentType string, data []byte) {
	sum := sha256.Sum256(data)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-SHA256", hex.EncodeToString(sum[:]))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// waitFinal waits up to wait for run id to be final, polling the store
// (the source of truth for a run's status) with a growing interval.
func (a *api) waitFinal(ctx context.Context, id string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		run, err := a.deps.Store.GetRun(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if run.Status.Final() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
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
	offs, err := a.deps.Store.ListOffloads(r.Context(), tenant, r.PathValue("session"), false)
	if err != nil {
		return err
	}
	out := offloadList{Offloads: []offloadInfo{}}
	for _, o := range offs {
		out.Offloads = append(out.Offloads, offloadInfo{ID: offloadID(o.Key), ToolCallID: o.ToolID, ToolName: o.ToolName,
			Tokens: o.Tokens, RunID: o.RunID, CreatedAt: o.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getOffload answers an offloaded tool result byte for byte: only a live
// offload the store recorded for this tenant and session, named by its id.
// ?lines=A-B answers lines A to B (1-based, inclusive) of a large result.
func (a *api) getOffload(w http.ResponseWriter, r *http.Request, tenant string) error {
	id := r.PathValue("id")
	if blob.ValidateSHA256(id) != nil {
		return notFound("offload")
	}
	key := blob.ContentKey(tenant, blob.KindOffload, id)
	live, err := a.deps.Store.LiveOffloads(r.Context(), tenant, r.PathValue("session"), []string{key})
	if err != nil {
		return err
	}
	if !live[key] {
		return notFound("offload")
	}
	data, err := a.deps.Blob.GetVerified(r.Context(), key, id)
	if err != nil {
		return fmt.Errorf("read offload: %w", err)
	}
	if v := r.URL.Query().Get("lines"); v != "" {
		from, to, ok := parseLines(v)
		if !ok {
			return badRequest("lines", "lines: %q is not a range such as 1-200", v)
		}
		data = []byte(lineRange(string(data), from, to))
		w.Header().Set("X-Lines", fmt.Sprintf("%d-%d", from, to))
	}
	writeBytes(w, "text/plain; charset=utf-8", data)
	return nil
}

// parseLines reads "A-B" (1-based, inclusive) or "A" (one line).
func parseLines(v string) (int, int, bool) {
	a, b, found := strings.Cut(v, "-")
	from, err := strconv.Atoi(a)
	if err != nil || from < 1 {
		return 0, 0, false
	}
	to := from
	if found {
		if to, err = strconv.Atoi(b); err != nil || to < from {
			return 0, 0, false
		}
	}
	return from, to, true
}

// lineRange returns lines from..to of text (1-based, inclusive), each
// with its line break.
func lineRange(text string, from, to int) string {
	lines := strings.SplitAfter(text, "\n")
	if from > len(lines) {
		return ""
	}
	return strings.Join(lines[from-1:min(to, len(lines))], "")
}

// Tool names an agent is given to recover what was offloaded.
const (
	ToolRecover = compress.RecoverTool
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
		{ToolRecover, "Recover the full content of a tool result that was offloaded from the conversation to save context. " +
			"The reference left in its place names the id. Optionally ask for a line range of a very large result.",
			map[string]any{"type": "object", "properties": map[string]any{
				"id":    map[string]any{"type": "string", "description": "the offload id named in the reference"},
				"lines": map[string]any{"type": "string", "description": "optional line range such as 1-200"},
			}, "required": []string{"id"}, "additionalProperties": false}},
		{ToolSearch, "Search the earlier, compacted or offloaded parts of this session for a word, identifier or phrase.",
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
