package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// promotion is the body of POST /v1/runs/{run}/promote.
type promotion struct {
	store.Promotion
	// Existing is set when the replay had been promoted already: the
	// answer is that promotion.
	Existing bool `json:"existing"`
}

// postPromote makes a replay its session's state (gateway.Promote). A
// replay that cannot be promoted is a 409 naming why and which field.
func (a *api) postPromote(w http.ResponseWriter, r *http.Request, tenant string) error {
	by := "api"
	if info, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		by = "api request " + info.id
	}
	p, fresh, err := a.deps.Gateway.Promote(r.Context(), tenant, r.PathValue("run"), by)
	var pe *store.PromoteError
	if errors.As(err, &pe) {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: pe.Field, Message: pe.Error()}
	}
	if err != nil {
		return notFoundAs(err, "run")
	}
	writeJSON(w, http.StatusOK, promotion{Promotion: p, Existing: !fresh})
	return nil
}

// watermarkEntry is one watermark a session had.
type watermarkEntry struct {
	ToolUseID string    `json:"tool_use_id"`
	RunID     string    `json:"run_id,omitempty"`
	At        time.Time `json:"at"`
}

// watermarkList is the body of GET /v1/sessions/{session}/watermarks.
type watermarkList struct {
	// Current is the session's watermark now ("" none).
	Current    string           `json:"current"`
	Watermarks []watermarkEntry `json:"watermarks"`
}

// listWatermarks answers the session's watermark history, oldest first.
// A session of another tenant is a 404, like one that does not exist.
func (a *api) listWatermarks(w http.ResponseWriter, r *http.Request, tenant string) error {
	session := r.PathValue("session")
	exists, err := a.deps.Store.SessionExists(r.Context(), tenant, session)
	if err != nil {
		return err
	}
	if !exists {
		return notFound("session")
	}
	hist, err := a.deps.Store.ListWatermarks(r.Context(), tenant, session)
	if err != nil {
		return err
	}
	out := watermarkList{Watermarks: make([]watermarkEntry, 0, len(hist))}
	for _, h := range hist {
		out.Watermarks = append(out.Watermarks, watermarkEntry{ToolUseID: h.ToolUseID, RunID: h.RunID, At: h.At})
	}
	if out.Current, err = a.deps.Store.GetWatermark(r.Context(), tenant, session); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// boolParam reads query parameter name: absent is false; anything but a
// boolean is a 400 naming it.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(name, "%s: %q is not true or false", name, v)
	}
	return b, nil
}
