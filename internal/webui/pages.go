package webui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"login", "error", "runs", "run", "session", "overview"}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"runURL":     runURL,
	"sessionURL": sessionURL,
	"num":        func(n int64) string { return thousands(n) },
	"int":        func(n int) string { return thousands(int64(n)) },
	"pct":        func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	"ratio":      func(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) },
	"dur":        formatDuration,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"lower": strings.ToLower,
}

// parsePages parses every page with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("webui: parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// layoutView is what the layout reads: the signed-in tenant (empty on the
// sign-in page) and the page's own data.
type layoutView struct {
	Tenant string
	Nav    string
	Page   any
}

// render writes page with data, buffered so that a template error is a
// clean 500 instead of half a page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, page, tenant string, data any) {
	t, ok := u.pages[page]
	if !ok {
		u.log.Error("ui: no such template", "page", page)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, layoutView{Tenant: tenant, Nav: page, Page: data}); err != nil {
		u.log.Error("ui: render", "page", page, "path", r.URL.Path, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// runURL is the page of a run.
func runURL(id string) string { return "/ui/runs/" + url.PathEscape(id) }

// sessionURL is the page of a session.
func sessionURL(session string) string { return "/ui/sessions/" + url.PathEscape(session) }

// formatDuration rounds d for a table.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// pathRun reads and checks the run id of the path, as the API does.
func pathRun(r *http.Request) (string, error) {
	id := r.PathValue("run")
	if err := idcheck.Check("run", id); err != nil {
		return "", badRequest("run", "%v", unnamed(err))
	}
	return id, nil
}

// pathSession reads and checks the session of the path.
func pathSession(r *http.Request) (string, error) {
	s := r.PathValue("session")
	if err := idcheck.Session(s); err != nil {
		return "", badRequest("session", "%v", unnamed(err))
	}
	return s, nil
}

// unnamed drops idcheck's field name, which badRequest adds itself.
func unnamed(err error) error {
	var ie *idcheck.Error
	if errors.As(err, &ie) {
		return ie.Unnamed()
	}
	return err
}

// --- runs list ---

// pageSize is the runs list's default page.
const pageSize = 50

// filterForm holds the filter values as typed, to fill the form again.
type filterForm struct {
	Session, Status, Preset, From, To string
	Limit                             int
	// Degraded keeps the runs that went through a fallback only.
	Degraded bool
}

// runRow is one line of a runs table.
type runRow struct {
	ID, Session, Status, Preset, Trigger, Level string
	TokensBefore, TokensAfter                   int64
	Ratio                                       float64
	Started                                     time.Time
	Duration                                    time.Duration
	Replay                                      bool
	// Promoted marks a promoted replay (the session's state, not a
	// what-if); RepairedBy names the promoted replay that replaced a run.
	Promoted   bool
	RepairedBy string
	Error      string
	// Degraded marks a run that reached its result through a fallback.
	Degraded bool
	// cost are the run's cost figures (nil: none recorded), for the
	// session's totals.
	cost *contract.CostFigures
}

func newRunRow(r store.Run) runRow {
	row := runRow{ID: r.ID, Session: r.Session, Status: string(r.Status), Preset: r.Preset, Trigger: r.Trigger,
		Level: r.Level, TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter, Ratio: r.Ratio,
		Started: r.StartedAt, Replay: r.ReplayOf != "", Error: firstLine(r.Error, 160)}
	if !r.FinishedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		row.Duration = r.FinishedAt.Sub(r.StartedAt)
	}
	if st, err := r.ParseStats(); err == nil {
		row.Degraded, row.cost = len(st.DegradedReasons) > 0, st.Cost
	}
	return row
}

func runRows(runs []store.Run) []runRow {
	rows := make([]runRow, len(runs))
	for i, r := range runs {
		rows[i] = newRunRow(r)
	}
	return rows
}

// promotedRows is runRows with each promoted replay and each run one
// repaired marked, so that a table never shows the session's state as
// a what-if.
func (u *UI) promotedRows(ctx context.Context, tenant string, runs []store.Run) ([]runRow, error) {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	ps, err := u.deps.Store.PromotionsOf(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	rows := runRows(runs)
	for i := range rows {
		rows[i].Promoted = ps.Promoted(rows[i].ID)
		if p, ok := ps.RepairedBy[rows[i].ID]; ok {
			rows[i].RepairedBy = p.RunID
		}
	}
	return rows, nil
}

// runsView is the runs page.
type runsView struct {
	Filter   filterForm
	Statuses []string
	Presets  []string
	Runs     []runRow
	// NextURL is the next page, "" on the last.
	NextURL string
	// Filtered is set when any filter is on.
	Filtered bool
}

// statuses lists every run status for the filter.
var statuses = []string{string(store.RunPending), string(store.RunRunning), string(store.RunSucceeded),
	string(store.RunOverLimit), string(store.RunFailed)}

// parseRunFilter reads the runs page's query. Every bad value is a 400
// naming its field; the tenant always comes from the key.
func parseRunFilter(q url.Values, tenant string) (store.RunFilter, filterForm, error) {
	form := filterForm{Session: q.Get("session"), Status: q.Get("status"), Preset: q.Get("preset"), From: q.Get("from"), To: q.Get("to")}
	f := store.RunFilter{Tenant: tenant, Session: form.Session, Status: store.RunStatus(form.Status), Preset: form.Preset, Limit: pageSize}
	switch v := q.Get("degraded"); v {
	case "":
	case "1", "true", "on":
		form.Degraded, f.Degraded = true, true
	default:
		return f, form, badRequest("degraded", "%q is not 1 or empty", v)
	}
	if f.Session != "" {
		if err := idcheck.Session(f.Session); err != nil {
			return f, form, badRequest("session", "%v", unnamed(err))
		}
	}
	if f.Status != "" && !f.Status.Valid() {
		return f, form, badRequest("status", "%q is not one of %s", form.Status, strings.Join(statuses, ", "))
	}
	if f.Preset != "" && !slices.Contains(policy.Names(), f.Preset) {
		return f, form, badRequest("preset", "%q is not one of %s", form.Preset, strings.Join(policy.Names(), ", "))
	}
	var err error
	if f.From, err = parseDay("from", form.From, false); err != nil {
		return f, form, err
	}
	if f.To, err = parseDay("to", form.To, true); err != nil {
		return f, form, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return f, form, badRequest("to", "must be after from")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxListLimit {
			return f, form, badRequest("limit", "must be an integer from 1 to %d", store.MaxListLimit)
		}
		f.Limit = n
	}
	form.Limit = f.Limit
	if v := q.Get("after"); v != "" {
		if err := idcheck.Check("after", v); err != nil {
			return f, form, badRequest("after", "%v", unnamed(err))
		}
		f.AfterID = v
	}
	return f, form, nil
}

// parseDay reads a day (2006-01-02, what a date input sends, in UTC) or
// an RFC 3339 time. A day as the end of a range includes the whole day.
func parseDay(field, v string, end bool) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest(field, "%q is not a date such as 2025-01-02 (or an RFC 3339 time)", v)
	}
	return t, nil
}

func (u *UI) runsPage(w http.ResponseWriter, r *http.Request, tenant string) error {
	q := r.URL.Query()
	f, form, err := parseRunFilter(q, tenant)
	if err != nil {
		return err
	}
	runs, err := u.deps.Audit.Runs(r.Context(), tenant, f)
	if f.AfterID != "" && errors.Is(err, store.ErrNotFound) {
		// Another tenant's run id is as unknown as a made-up one.
		return badRequest("after", "unknown run %q", f.AfterID)
	}
	if err != nil {
		return err
	}
	rows, err := u.promotedRows(r.Context(), tenant, runs)
	if err != nil {
		return err
	}
	v := runsView{Filter: form, Statuses: statuses, Presets: policy.Names(), Runs: rows,
		Filtered: form.Session != "" || form.Status != "" || form.Preset != "" || form.From != "" || form.To != "" || form.Degraded}
	if len(runs) == f.Limit {
		next := url.Values{}
		for _, k := range []string{"session", "status", "preset", "from", "to", "limit", "degraded"} {
			if q.Get(k) != "" {
				next.Set(k, q.Get(k))
			}
		}
		next.Set("after", runs[len(runs)-1].ID)
		v.NextURL = "/ui/runs?" + next.Encode()
	}
	u.render(w, r, http.StatusOK, "runs", tenant, v)
	return nil
}

// --- one run ---

// outcomeOf is a run's outcome as the API answers it; unreadable stats
// show as none.
func outcomeOf(r store.Run) contract.Outcome {
	o, err := r.Outcome()
	if err != nil {
		r.Stats = nil
		o, _ = r.Outcome() // the row alone: no stats to fail on
	}
	return o
}

// limitOf is the context limit a run was measured against: the one its
// commit recorded, else the one the caller asked for.
func limitOf(r store.Run, o contract.Outcome) int64 {
	if o.ContextLimit > 0 {
		return int64(o.ContextLimit)
	}
	return int64(r.ContextLimit)
}

// stepRow is one step attempt.
type stepRow struct {
	store.Step
	// Retried is set on an attempt after the first.
	Retried bool
	// In and Out are InputSize and OutputSize with their units.
	In, Out string
}

// Units of a step's sizes (stepUnits).
const (
	unitBytes   = "B"
	unitRun     = "" // the run's unit: tokens, or react-two-layer's chars
	unitChunks  = "chunks"
	unitResults = "results"
	unitNone    = "-" // the step records no size there
)

// stepUnits are the units in which each kind of step (the kind its
// activity records, activities' a.begin) measures its input and output.
// Steps record bare numbers, some bytes read or written, some sizes in
// the run's unit, some counts: a table of bare numbers mixes them up. A
// test keeps this table and the activities in step.
var stepUnits = map[string][2]string{
	"plan":            {unitBytes, unitBytes},
	"archive":         {unitBytes, unitBytes},
	"deterministic":   {unitBytes, unitRun},
	"budget":          {unitBytes, unitRun},
	"commit":          {unitNone, unitBytes},
	"drift":           {unitNone, unitNone},
	"patch":           {unitNone, unitBytes},
	"fallback":        {unitBytes, unitBytes},
	"prepare-handoff": {unitNone, unitBytes},
	"prepare-history": {unitNone, unitBytes},
	"apply-history":   {unitRun, unitRun},
	"chunk":           {unitBytes, unitChunks},
	"merge":           {unitNone, unitBytes},
	"apply":           {unitBytes, unitRun},
	"plan-global":     {unitNone, unitResults},
	"llm":             {unitBytes, unitBytes},
}

// withUnit writes size n in unit (stepUnits) for a run measured in
// runUnit; a kind the table does not know shows the bare number.
func withUnit(n int64, unit, runUnit string, known bool) string {
	switch {
	case !known:
		return thousands(n)
	case unit == unitNone:
		if n == 0 {
			return "–"
		}
		return thousands(n)
	case unit == unitRun:
		if runUnit == "" {
			runUnit = "tokens"
		}
		return thousands(n) + " " + runUnit
	default:
		return thousands(n) + " " + unit
	}
}

// newStepRow is step s of a run measured in runUnit.
func newStepRow(s store.Step, retried bool, runUnit string) stepRow {
	units, known := stepUnits[s.Kind]
	return stepRow{Step: s, Retried: retried, In: withUnit(s.InputSize, units[0], runUnit, known),
		Out: withUnit(s.OutputSize, units[1], runUnit, known)}
}

// driftRow is one drift verdict.
type driftRow struct {
	store.Drift
}

// runView is the run page.
type runView struct {
	Run         runRow
	Raw         store.Run
	Outcome     contract.Outcome
	Limit       int64
	UsageBefore float64
	UsageAfter  float64
	LevelBefore string
	Committed   bool
	// TokensSaved is what the run's applied passes saved.
	TokensSaved      int
	Steps            []stepRow
	Attempts         int
	Retries          int
	FailedAttempts   int
	Drift            []driftRow
	PromptTokens     int
	CompletionTokens int
	Diff             *audit.Diff
	DiffRows         []diffRow
	DiffNote         string
	// HasOriginal and HasHandoff say which downloads the run has.
	HasOriginal bool
	HasHandoff  bool
	// Deliveries are the run's completion webhooks, with every attempt.
	Deliveries []store.Delivery
}

func (u *UI) runPage(w http.ResponseWriter, r *http.Request, tenant string) error {
	id, err := pathRun(r)
	if err != nil {
		return err
	}
	d, err := u.deps.Audit.Run(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	st := outcomeOf(d.Run)
	rows, err := u.promotedRows(r.Context(), tenant, []store.Run{d.Run})
	if err != nil {
		return err
	}
	v := runView{Run: rows[0], Raw: d.Run, Outcome: st, Limit: limitOf(d.Run, st), Committed: d.Run.Status.Committed(),
		PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens, HasOriginal: d.Run.ArchiveKey != "",
		HasHandoff: d.Run.Status.Committed() && st.HandoffKey != ""}
	if v.Limit > 0 {
		v.UsageBefore = float64(d.Run.TokensBefore) / float64(v.Limit)
		v.UsageAfter = float64(d.Run.TokensAfter) / float64(v.Limit)
		v.LevelBefore = string(strategy.LevelFor(v.UsageBefore))
	}
	for _, p := range st.Passes {
		if p.Applied {
			v.TokensSaved += p.TokensSaved
		}
	}
	seen := map[string]bool{}
	for _, s := range d.Steps {
		v.Steps = append(v.Steps, newStepRow(s, seen[s.Name], st.Unit))
		if seen[s.Name] {
			v.Retries++
		}
		seen[s.Name] = true
		if s.Error != "" {
			v.FailedAttempts++
		}
	}
	v.Attempts = len(d.Steps)
	for _, dr := range d.Drift {
		v.Drift = append(v.Drift, driftRow{dr})
	}
	if v.Deliveries, err = u.deps.Store.ListDeliveries(r.Context(), tenant, id); err != nil {
		return err
	}
	switch diff, err := u.deps.Audit.Diff(r.Context(), tenant, id); {
	case errors.Is(err, audit.ErrNoArchive):
		v.DiffNote = "No diff: the run failed before its original was archived."
	case errors.Is(err, audit.ErrNoOutput):
		v.DiffNote = "No diff: the run has no output."
	case err != nil && (store.IsRetryable(err) || blob.IsOutage(err)):
		return err
	case err != nil:
		// A stored conversation the diff cannot read: the rest of the
		// audit is still worth showing.
		u.log.Warn("ui: diff", "run", id, "error", err)
		v.DiffNote = "No diff: the original or the output could not be compared (see the server log)."
	default:
		v.Diff = &diff
		v.DiffRows = diffRows(diff.Changes)
	}
	u.render(w, r, http.StatusOK, "run", tenant, v)
	return nil
}

// minCollapsed is the shortest run of consecutive summarized (or
// removed) messages that the diff shows as one row.
const minCollapsed = 2

// diffRow is one row of a run's diff: a message the run changed, or a
// run of consecutive messages it summarized (or removed) collapsed into
// one row, so that a summary of hundreds of messages does not push the
// rows worth reading off the page.
type diffRow struct {
	// Change is the message of a single row.
	Change audit.Change
	// Group holds the messages of a collapsed row; nil for a single one.
	Group []audit.Change
}

// Action is the action of the row's messages.
func (r diffRow) Action() string {
	if r.Group != nil {
		return r.Group[0].Action
	}
	return r.Change.Action
}

// From and To are the first and last original positions of a collapsed
// row ("" when not in the original's messages).
func (r diffRow) From() string { return r.Group[0].At }
func (r diffRow) To() string   { return r.Group[len(r.Group)-1].At }

// Before is the characters of a collapsed row's messages.
func (r diffRow) Before() int {
	n := 0
	for _, c := range r.Group {
		n += c.Before
	}
	return n
}

// diffRows lists the changes that are not kept, in order, with each run
// of at least minCollapsed consecutive summarized (or removed) messages
// collapsed into one row. Kept messages between two summarized ones end
// the run: the row stands for messages that were next to each other.
func diffRows(changes []audit.Change) []diffRow {
	var rows []diffRow
	for i := 0; i < len(changes); {
		c := changes[i]
		if c.Action == audit.ActionKept {
			i++
			continue
		}
		j := i + 1
		if c.Action == audit.ActionSummarized || c.Action == audit.ActionRemoved {
			for j < len(changes) && changes[j].Action == c.Action {
				j++
			}
		}
		if j-i >= minCollapsed {
			rows = append(rows, diffRow{Group: changes[i:j]})
		} else {
			rows = append(rows, diffRow{Change: c})
		}
		i = j
	}
	return rows
}

// stepsChart serves a run's step timeline.
func (u *UI) stepsChart(w http.ResponseWriter, r *http.Request, tenant string) error {
	id, err := pathRun(r)
	if err != nil {
		return err
	}
	d, err := u.deps.Audit.Run(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	svg, err := stepsSVG(d.Steps, d.Run.StartedAt)
	if err != nil {
		return err
	}
	writeSVG(w, svg)
	return nil
}

// download serves a run's original, output or handoff as a file, byte
// for byte, with its SHA-256 (runview.Reader.Download: scoped to the
// tenant, a handoff's key checked to be the tenant's before it is read).
func (u *UI) download(part runview.Part) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, tenant string) error {
		id, err := pathRun(r)
		if err != nil {
			return err
		}
		d, err := u.runs.Download(r.Context(), tenant, id, part)
		if err != nil {
			return err
		}
		runview.Write(w, "application/json", d.Filename(), d.Data)
		return nil
	}
}

// writeSVG answers a chart.
func writeSVG(w http.ResponseWriter, svg []byte) {
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Content-Security-Policy", svgCSP)
	w.Header().Set("Content-Length", strconv.Itoa(len(svg)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(svg)
}

// --- one session ---

// maxTimelineRuns bounds the runs on the token timeline (the newest).
const maxTimelineRuns = 60

// sessionView is the session page.
type sessionView struct {
	Session string
	Status  audit.SessionStatus
	Runs    []runRow
	Totals  sessionTotals
	// Plotted is the number of runs on the timeline, Dropped the older
	// committed runs left off it, Replays the what-if replays on it and
	// Promoted the promoted replays (on the session's line).
	Plotted, Dropped, Replays, Promoted int
	Truncated                           bool
}

// sessionTotals are what a session's runs added up to: the runs that are
// its state (a what-if replay is not, nor a run a promoted replay
// repaired), the tokens they shed, the prompt cache they rewrote and what
// they saved the agent net of it; and over all its runs, what their
// summarizer cost and how many went through a fallback (as the
// overview counts them).
type sessionTotals struct {
	Runs, Degraded              int
	TokensShed, CacheRewritten  int64
	NetSavingUSD, SummarizerUSD float64
	// Priced says at least one run had its cost figures.
	Priced bool
}

// totalsOf adds up a session's rows.
func totalsOf(rows []runRow) sessionTotals {
	var t sessionTotals
	for _, r := range rows {
		if r.Degraded {
			t.Degraded++
		}
		if r.cost != nil {
			// Paid whatever became of the run.
			t.SummarizerUSD += r.cost.SummarizerUSD
			t.Priced = true
		}
		if (r.Replay && !r.Promoted) || r.RepairedBy != "" {
			continue
		}
		t.Runs++
		if r.cost != nil {
			t.TokensShed += int64(r.cost.TokensShed)
			t.CacheRewritten += int64(r.cost.CacheRewriteTokens)
			t.NetSavingUSD += r.cost.NetSavingUSD
		}
	}
	return t
}

func (u *UI) sessionPage(w http.ResponseWriter, r *http.Request, tenant string) error {
	session, err := pathSession(r)
	if err != nil {
		return err
	}
	st, err := u.deps.Audit.Status(r.Context(), tenant, session)
	if err != nil {
		return err
	}
	runs, err := u.deps.Audit.Runs(r.Context(), tenant, store.RunFilter{Session: session, Limit: store.MaxListLimit})
	if err != nil {
		return err
	}
	points := timelinePoints(runs, store.SessionPromotions(st.Promotions))
	rows, err := u.promotedRows(r.Context(), tenant, runs)
	if err != nil {
		return err
	}
	v := sessionView{Session: session, Status: st, Runs: rows, Truncated: len(runs) == store.MaxListLimit, Plotted: len(points),
		Totals: totalsOf(rows)}
	if len(points) > maxTimelineRuns {
		v.Plotted, v.Dropped = maxTimelineRuns, len(points)-maxTimelineRuns
		points = points[len(points)-maxTimelineRuns:]
	}
	for _, pt := range points {
		switch {
		case pt.Replay:
			v.Replays++
		case pt.Promoted:
			v.Promoted++
		}
	}
	u.render(w, r, http.StatusOK, "session", tenant, v)
	return nil
}

// timelinePoints are a session's committed runs, replays included and
// marked, oldest first, numbered from 1; runs without a known limit are
// left out. A replay that was not promoted is a what-if (drawn apart
// from the session's size); a promoted one is the session's state, on
// its line like any run, and marked promoted.
func timelinePoints(newestFirst []store.Run, promoted store.RunPromotions) []timelinePoint {
	var pts []timelinePoint
	for i := len(newestFirst) - 1; i >= 0; i-- {
		r := newestFirst[i]
		if !r.Status.Committed() {
			continue
		}
		st := outcomeOf(r)
		limit := limitOf(r, st)
		if limit <= 0 {
			continue
		}
		pts = append(pts, timelinePoint{N: len(pts) + 1, Before: r.TokensBefore, After: r.TokensAfter, Limit: limit, Unit: st.Unit, Started: r.StartedAt, Level: r.Level,
			Replay: r.ReplayOf != "" && !promoted.Promoted(r.ID), Promoted: promoted.Promoted(r.ID)})
	}
	return pts
}

// timelineChart serves a session's token timeline.
func (u *UI) timelineChart(w http.ResponseWriter, r *http.Request, tenant string) error {
	session, err := pathSession(r)
	if err != nil {
		return err
	}
	runs, err := u.deps.Audit.Runs(r.Context(), tenant, store.RunFilter{Session: session, Limit: store.MaxListLimit})
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return notFound("session")
	}
	promotions, err := u.deps.Store.Promotions(r.Context(), tenant, session)
	if err != nil {
		return err
	}
	points := timelinePoints(runs, store.SessionPromotions(promotions))
	if len(points) > maxTimelineRuns {
		points = points[len(points)-maxTimelineRuns:]
	}
	svg, err := timelineSVG(points)
	if err != nil {
		return err
	}
	writeSVG(w, svg)
	return nil
}

// --- tenant overview ---

// overviewDays are the periods the overview offers.
var overviewDays = []int{7, 30, 90}

// overviewView is the overview page.
type overviewView struct {
	Days     int
	Periods  []int
	Since    time.Time
	Daily    []store.DailyRuns
	Total    store.DailyRuns
	Runs     int
	Failures []runRow
}

// period reads days (7, 30 or 90; default 30) and returns the first day
// of the period and its days, zero-filled, oldest first.
func (u *UI) period(r *http.Request, tenant string) (int, time.Time, []store.DailyRuns, error) {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || !slices.Contains(overviewDays, n) {
			return 0, time.Time{}, nil, badRequest("days", "must be 7, 30 or 90")
		}
		days = n
	}
	now := u.deps.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	since := today.AddDate(0, 0, -(days - 1))
	rows, err := u.deps.Store.DailyRunStats(r.Context(), tenant, since)
	if err != nil {
		return 0, time.Time{}, nil, err
	}
	byDay := map[time.Time]store.DailyRuns{}
	for _, d := range rows {
		byDay[d.Day] = d
	}
	filled := make([]store.DailyRuns, days)
	for i := range filled {
		day := since.AddDate(0, 0, i)
		filled[i] = byDay[day]
		filled[i].Day = day
	}
	return days, since, filled, nil
}

func (u *UI) overviewPage(w http.ResponseWriter, r *http.Request, tenant string) error {
	days, since, daily, err := u.period(r, tenant)
	if err != nil {
		return err
	}
	v := overviewView{Days: days, Periods: overviewDays, Since: since}
	for _, d := range daily {
		v.Total.Succeeded += d.Succeeded
		v.Total.OverLimit += d.OverLimit
		v.Total.Failed += d.Failed
		v.Total.Live += d.Live
		v.Total.Replays += d.Replays
		v.Total.TokensSaved += d.TokensSaved
		v.Total.Promoted += d.Promoted
		v.Total.Degraded += d.Degraded
		v.Total.SummarizerUSD += d.SummarizerUSD
		v.Total.NetSavingUSD += d.NetSavingUSD
	}
	v.Runs = v.Total.Total()
	// Newest first for the table.
	for i := len(daily) - 1; i >= 0; i-- {
		if daily[i].Total() > 0 {
			v.Daily = append(v.Daily, daily[i])
		}
	}
	failed, err := u.deps.Audit.Runs(r.Context(), tenant, store.RunFilter{Status: store.RunFailed, From: since, Limit: 20})
	if err != nil {
		return err
	}
	v.Failures = runRows(failed)
	u.render(w, r, http.StatusOK, "overview", tenant, v)
	return nil
}

// overviewChart serves one of the overview's per-day charts, drawn by
// draw from the period the request asks for.
func (u *UI) overviewChart(draw func([]store.DailyRuns) ([]byte, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, tenant string) error {
		_, _, daily, err := u.period(r, tenant)
		if err != nil {
			return err
		}
		svg, err := draw(daily)
		if err != nil {
			return err
		}
		writeSVG(w, svg)
		return nil
	}
}

// firstLine is the first line of s, cut to max runes.
func firstLine(s string, max int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	} else if cut {
		return s + " …"
	}
	return s
}
