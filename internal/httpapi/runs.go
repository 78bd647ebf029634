package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// runList is a page of runs; NextAfter is the cursor of the next page,
// empty on the last.
type runList struct {
	Runs      []audit.RunRecord `json:"runs"`
	NextAfter string            `json:"next_after,omitempty"`
}

func (a *api) listRuns(w http.ResponseWriter, r *http.Request, tenant string) error {
	f, err := runFilter(r, tenant)
	if err != nil {
		return err
	}
	runs, err := a.deps.Audit.Runs(r.Context(), tenant, f)
	if f.AfterID != "" && errors.Is(err, store.ErrNotFound) {
		// Another tenant's run id is as unknown as a made-up one.
		return badRequest("after", "after: unknown run %q", f.AfterID)
	}
	if err != nil {
		return err
	}
	out := runList{Runs: audit.Records(runs)}
	limit := f.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	if len(runs) > 0 && len(runs) == min(limit, store.MaxListLimit) {
		out.NextAfter = runs[len(runs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// runFilter reads the query of the run listing and the export. The tenant
// always comes from the key.
func runFilter(r *http.Request, tenant string) (store.RunFilter, error) {
	q := r.URL.Query()
	f := store.RunFilter{Tenant: tenant, Session: q.Get("session"), Status: store.RunStatus(q.Get("status")), AfterID: q.Get("after")}
	// Both reach Postgres: text it cannot hold (a NUL, invalid UTF-8) is
	// the caller's mistake, named, not a 500.
	if f.Session != "" {
		if err := idcheck.Session(f.Session); err != nil {
			return f, badRequest("session", "%s", err.Error())
		}
	}
	if f.AfterID != "" {
		if err := idcheck.Check("after", f.AfterID); err != nil {
			return f, badRequest("after", "%s", err.Error())
		}
	}
	if f.Status != "" && !f.Status.Valid() {
		return f, badRequest("status", "status: %q is not one of pending, running, succeeded, over_limit, failed", f.Status)
	}
	var err error
	if f.From, err = queryTime(q, "from"); err != nil {
		return f, err
	}
	if f.To, err = queryTime(q, "to"); err != nil {
		return f, err
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxListLimit {
			return f, badRequest("limit", "limit: must be an integer from 1 to %d", store.MaxListLimit)
		}
		f.Limit = n
	}
	if v := q.Get("degraded"); v != "" {
		d, err := strconv.ParseBool(v)
		if err != nil {
			return f, badRequest("degraded", "degraded: %q is not true or false", v)
		}
		f.Degraded = d
	}
	return f, nil
}

// bodyTime reads a required RFC 3339 time from a body field.
func bodyTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, badRequest(name, "%s: required RFC 3339 time", name)
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest(name, "%s: %q is not an RFC 3339 time such as 2025-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// queryTime reads an RFC 3339 time from the query; absent is zero.
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest(name, "%s: %q is not an RFC 3339 time such as 2025-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

func (a *api) getRun(w http.ResponseWriter, r *http.Request, tenant string) error {
	wait, err := a.queryWait(r)
	if err != nil {
		return err
	}
	// Long poll: the answer comes as soon as the run is final, or after
	// wait with the run as it is then (wait 0 reads it at once).
	run, err := a.runs.Wait(r.Context(), tenant, r.PathValue("run"), wait)
	if err != nil {
		return notFoundAs(err, "run")
	}
	d, err := a.auditService().Detail(r.Context(), run)
	if err != nil {
		return err
	}
	res, err := a.fromStore(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runAnswer{runResponse: res, RunDetailRecord: d.Record()})
	return nil
}

// runAnswer is GET /v1/runs/{run}: the same fields as a finished run's
// answer to its event (its outcome, handoff and conversation; status and
// error only while it is live), plus the audit detail (the run's record,
// steps and drift verdicts). One answer per run, however it is asked.
type runAnswer struct {
	runResponse
	audit.RunDetailRecord
}

// getOriginal restores a run's original conversation byte for byte, with
// its SHA-256 so the caller can check it.
func (a *api) getOriginal(w http.ResponseWriter, r *http.Request, tenant string) error {
	d, err := a.runs.Download(r.Context(), tenant, r.PathValue("run"), runview.Original)
	if err != nil {
		return notFoundAs(err, "run")
	}
	runview.Write(w, "application/json", "", d.Data)
	return nil
}

func (a *api) getDiff(w http.ResponseWriter, r *http.Request, tenant string) error {
	d, err := a.deps.Audit.Diff(r.Context(), tenant, r.PathValue("run"))
	if err != nil {
		return notFoundAs(err, "run")
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// replayRequest is the body of POST /v1/runs/{run}/replay: the replay's
// own id (its idempotency key) and what to change.
type replayRequest struct {
	RequestID    string          `json:"request_id"`
	Preset       string          `json:"preset"`
	Overrides    json.RawMessage `json:"overrides"`
	Model        string          `json:"model"`
	ContextLimit int             `json:"context_limit"`
}

func (q replayRequest) gateway() gateway.ReplayRequest {
	return gateway.ReplayRequest{RequestID: q.RequestID, Preset: q.Preset, Overrides: nullIsEmpty(q.Overrides),
		Model: q.Model, ContextLimit: q.ContextLimit}
}

// submitted is one started (or joined) replay.
type submitted struct {
	RunID     string `json:"run_id"`
	Existing  bool   `json:"existing"`
	StatusURL string `json:"status_url"`
}

func (a *api) postReplay(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req replayRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.RequestID) == "" {
		return badRequest("request_id", "request_id: required; the same id replays once")
	}
	sub, err := a.deps.Gateway.Replay(r.Context(), tenant, r.PathValue("run"), req.gateway())
	if err != nil {
		return replayError(err)
	}
	w.Header().Set("Location", "/v1/runs/"+sub.RunID)
	writeJSON(w, http.StatusAccepted, submitted{RunID: sub.RunID, Existing: sub.Existing, StatusURL: "/v1/runs/" + sub.RunID})
	return nil
}

// replaysRequest is the body of POST /v1/replays: every failed run that
// started in [from, to) is replayed.
type replaysRequest struct {
	// From and To are RFC 3339 times, read here so that a bad one is a
	// 400 naming its field.
	From         string          `json:"from"`
	To           string          `json:"to"`
	RequestID    string          `json:"request_id"`
	Preset       string          `json:"preset"`
	Overrides    json.RawMessage `json:"overrides"`
	Model        string          `json:"model"`
	ContextLimit int             `json:"context_limit"`
	// Statuses select the runs: failed, over_limit or both (default
	// failed).
	Statuses []string `json:"statuses"`
}

// replaysResponse lists the replays started.
type replaysResponse struct {
	Runs []submitted `json:"runs"`
}

func (a *api) postReplays(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req replaysRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	from, err := bodyTime("from", req.From)
	if err != nil {
		return err
	}
	to, err := bodyTime("to", req.To)
	if err != nil {
		return err
	}
	switch {
	case !to.After(from):
		return badRequest("to", "to: must be after from")
	case strings.TrimSpace(req.RequestID) == "":
		return badRequest("request_id", "request_id: required; the same id replays once")
	}
	one := replayRequest{RequestID: req.RequestID, Preset: req.Preset, Overrides: req.Overrides, Model: req.Model, ContextLimit: req.ContextLimit}
	bulk := one.gateway()
	bulk.Statuses = req.Statuses
	subs, err := a.deps.Gateway.ReplayFailed(r.Context(), tenant, from, to, bulk)
	if err != nil {
		return replayError(err)
	}
	out := replaysResponse{Runs: make([]submitted, 0, len(subs))}
	for _, s := range subs {
		out.Runs = append(out.Runs, submitted{RunID: s.RunID, Existing: s.Existing, StatusURL: "/v1/runs/" + s.RunID})
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// replayError names request_id on a conflict: for a replay it is the
// idempotency key.
func replayError(err error) error {
	if errors.Is(err, gateway.ErrConflict) {
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "request_id", Message: err.Error()}
	}
	return notFoundAs(err, "run")
}

// searchResponse is the answer of the recovery search.
type searchResponse struct {
	Hits []audit.Hit `json:"hits"`
	// Truncated: the search read its byte budget before every offload
	// and archive of the session; narrow the query or the session.
	Truncated bool `json:"truncated,omitempty"`
}

func (a *api) getSearch(w http.ResponseWriter, r *http.Request, tenant string) error {
	q := r.URL.Query()
	query := strings.TrimSpace(q.Get("q"))
	if query == "" {
		return badRequest("q", "q: required search text")
	}
	if !utf8.ValidString(query) || strings.ContainsRune(query, 0) {
		return badRequest("q", "q: must be UTF-8 text without NUL characters")
	}
	limit := audit.DefaultSearchLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxSearchLimit {
			return badRequest("limit", "limit: must be an integer from 1 to %d", audit.MaxSearchLimit)
		}
		limit = n
	}
	res, err := a.deps.Audit.SearchSession(r.Context(), tenant, r.PathValue("session"), query, limit)
	if err != nil {
		return notFoundAs(err, "session")
	}
	writeJSON(w, http.StatusOK, searchResponse{Hits: res.Hits, Truncated: res.Truncated})
	return nil
}

// getExport streams the runs matching the filter as JSON lines or CSV.
// Errors after the first byte can only end the stream; they are logged.
func (a *api) getExport(w http.ResponseWriter, r *http.Request, tenant string) error {
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "jsonl"
	}
	var contentType string
	switch format {
	case "jsonl":
		contentType = "application/x-ndjson"
	case "csv":
		contentType = "text/csv; charset=utf-8"
	default:
		return badRequest("format", "format: %q is not one of jsonl, csv", format)
	}
	f, err := runFilter(r, tenant)
	if err != nil {
		return err
	}
	steps, err := boolParam(r, "steps")
	if err != nil {
		return err
	}
	if steps && format != "jsonl" {
		return badRequest("steps", "steps: step rows are exported with format jsonl only, not %s", format)
	}
	ew := &exportWriter{w: w, contentType: contentType, format: format}
	if err := a.deps.Audit.Export(r.Context(), tenant, f, format, steps, ew); err != nil {
		if !ew.started {
			return err
		}
		// The status is sent: the truncated stream is all the caller
		// can be told.
		a.log.Error("export interrupted", "tenant", tenant, "error", err)
		return nil
	}
	if !ew.started {
		ew.start()
	}
	return nil
}

// exportWriter sends the headers on the first write, so that an error
// before any output can still be a proper JSON error.
type exportWriter struct {
	w           http.ResponseWriter
	contentType string
	format      string
	started     bool
}

func (e *exportWriter) start() {
	e.started = true
	e.w.Header().Set("Content-Type", e.contentType)
	e.w.Header().Set("Content-Disposition", `attachment; filename="runs.`+e.format+`"`)
	e.w.WriteHeader(http.StatusOK)
}

func (e *exportWriter) Write(p []byte) (int, error) {
	if !e.started {
		e.start()
	}
	return e.w.Write(p)
}

// notFoundAs names what was not found in the answer (runview.Status):
// an unknown one, or another tenant's, is "<what> not found", a run
// without the conversation asked for says which it lacks; other errors,
// an erased session's included, pass.
func notFoundAs(err error, what string) error {
	if runview.Status(err) != http.StatusNotFound {
		return err
	}
	if missing := runview.Missing(err); missing != "" {
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: missing}
	}
	return notFound(what)
}
