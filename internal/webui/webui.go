// Package webui is the operators' audit web UI, served by `starter serve`
// under /ui/: the runs with filters, one run with its figures, steps,
// drift verdicts, diff and downloads (original, output, handoff), a
// session's token timeline (replays marked) and a tenant overview.
//
// Pages are rendered on the server with html/template; the stylesheet is
// embedded with go:embed and the charts are SVG drawn by gonum.org/v1/plot.
// No page runs a script. Operators sign in with an API key, the same keys
// as the JSON API. A sign-in opens a session bound to the key: the browser
// holds only its opaque id in an HttpOnly, SameSite=Strict cookie, the
// store only its hash, and every request checks it again, so every page is
// scoped to the key's tenant, and sign-out, the session's expiry or the
// key's revocation end it at once.
package webui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Prefix is where the UI is mounted.
const Prefix = "/ui/"

// cookieName holds the sign-in's opaque session id (see
// store.OpenUISession), never the API key.
const cookieName = "compactor_ui_session"

// DefaultSessionTTL is how long a sign-in lasts when Deps.SessionTTL is
// zero (UI_SESSION_TTL's default): a working day.
const DefaultSessionTTL = 12 * time.Hour

// Security headers of every HTML page. No script runs anywhere; styles
// come from the embedded stylesheet only; forms post to this origin only.
const (
	pageCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
		"frame-ancestors 'none'; base-uri 'none'"
	// svgCSP applies when a chart is opened on its own: gonum's SVG sets
	// its text styles in style attributes; nothing else may load.
	svgCSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Deps are what the UI reads.
type Deps struct {
	// Store authenticates API keys and counts runs per day.
	Store *store.Store
	// Audit reads runs, sessions, diffs, originals and outputs, always
	// scoped to a tenant.
	Audit *audit.Service
	// Logger receives the cause of every 500; nil discards.
	Logger *slog.Logger
	// Now is the clock of the overview; nil is time.Now.
	Now func() time.Time
	// Tenants counts every signed-in page against its tenant's limits,
	// shared with the JSON API; nil is no limit.
	Tenants *ratelimit.Tenants
	// AuthFailures limits failed sign-ins and unknown sessions per client
	// address, shared with the JSON API; nil is no limit.
	AuthFailures *ratelimit.AuthFailures
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// SessionTTL is how long a sign-in lasts; zero is DefaultSessionTTL.
	SessionTTL time.Duration
}

// UI is the web UI's handler.
type UI struct {
	deps Deps
	// runs reads and downloads runs as the API and the MCP server do.
	runs  *runview.Reader
	log   *slog.Logger
	pages map[string]*template.Template
	// handler is the route table behind the cross-origin protection.
	handler http.Handler
}

// New builds the UI handler, to be mounted at Prefix.
func New(deps Deps) (*UI, error) {
	if deps.Store == nil || deps.Audit == nil {
		return nil, errors.New("webui: Store and Audit are required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.SessionTTL <= 0 {
		deps.SessionTTL = DefaultSessionTTL
	}
	u := &UI{deps: deps, runs: &runview.Reader{Audit: deps.Audit}, log: deps.Logger}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	u.pages = pages

	mux := http.NewServeMux()
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("webui: static assets: %w", err)
	}
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler(http.FileServerFS(static))))
	mux.HandleFunc("GET /ui/login", u.loginPage)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.HandleFunc("POST /ui/logout", u.logout)
	mux.Handle("GET /ui/{$}", u.auth(func(w http.ResponseWriter, r *http.Request, _ string) error {
		http.Redirect(w, r, "/ui/runs", http.StatusSeeOther)
		return nil
	}))
	mux.Handle("GET /ui/runs", u.auth(u.runsPage))
	mux.Handle("GET /ui/runs/{run}", u.auth(u.runPage))
	mux.Handle("GET /ui/runs/{run}/steps.svg", u.auth(u.stepsChart))
	mux.Handle("GET /ui/runs/{run}/original", u.auth(u.download(runview.Original)))
	mux.Handle("GET /ui/runs/{run}/output", u.auth(u.download(runview.Output)))
	mux.Handle("GET /ui/runs/{run}/handoff", u.auth(u.download(runview.Handoff)))
	mux.Handle("GET /ui/sessions/{session}", u.auth(u.sessionPage))
	mux.Handle("GET /ui/sessions/{session}/timeline.svg", u.auth(u.timelineChart))
	mux.Handle("GET /ui/overview", u.auth(u.overviewPage))
	mux.Handle("GET /ui/overview/runs.svg", u.auth(u.overviewChart(dailyRunsSVG)))
	mux.Handle("GET /ui/overview/tokens.svg", u.auth(u.overviewChart(tokensSavedSVG)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.errorPage(w, r, "", &pageError{Status: http.StatusNotFound, Message: "no such page: " + r.URL.Path})
	})

	// Sign-in and sign-out refuse cross-origin POSTs (Sec-Fetch-Site, or
	// an Origin that is not this host); GETs change nothing.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.errorPage(w, r, "", &pageError{Status: http.StatusForbidden, Message: "cross-origin request refused"})
	}))
	u.handler = cop.Handler(mux)
	return u, nil
}

// ServeHTTP sets the security headers and serves the page.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	u.handler.ServeHTTP(w, r)
}

// staticHandler serves the embedded assets; they may be cached, they
// change only with the binary.
func staticHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// pageError is an answer other than 200: a status, the field it is about
// (for 400s) and a message safe to show.
type pageError struct {
	Status  int
	Field   string
	Message string
}

func (e *pageError) Error() string { return e.Message }

// badRequest is a 400 naming the field.
func badRequest(field, format string, args ...any) *pageError {
	return &pageError{Status: http.StatusBadRequest, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// notFound is a 404 naming what was not found.
func notFound(what string) *pageError {
	return &pageError{Status: http.StatusNotFound, Message: what + " not found"}
}

// handlerFunc is a page of a signed-in operator; tenant comes from the key.
type handlerFunc func(w http.ResponseWriter, r *http.Request, tenant string) error

// auth checks the session in the cookie on every request, as the API
// checks its bearer key: without a live session the browser is signed out
// and sent to the sign-in page, which then returns to the page asked for.
// A signed-in page counts against its tenant's limits like an API call.
func (u *UI) auth(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, err := u.tenant(r)
		if err != nil {
			u.errorPage(w, r, "", err)
			return
		}
		if tenant == "" {
			clearCookie(w, r)
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if u.deps.Tenants != nil {
			release, err := u.deps.Tenants.Acquire(tenant)
			if err != nil {
				u.errorPage(w, r, tenant, err)
				return
			}
			defer release()
		}
		if err := h(w, r, tenant); err != nil {
			u.errorPage(w, r, tenant, err)
		}
	})
}

// tenant returns the tenant of the cookie's session, "" when there is no
// live session. An unknown session is a failed authentication of the
// client's address.
func (u *UI) tenant(r *http.Request) (string, error) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return "", nil
	}
	addr := ratelimit.ClientAddr(r, u.deps.TrustedProxies)
	if err := u.deps.AuthFailures.Check(addr); err != nil {
		return "", err
	}
	tenant, ok, err := u.deps.Store.UISessionTenant(r.Context(), c.Value)
	if err != nil {
		return "", fmt.Errorf("look up ui session: %w", err)
	}
	if !ok {
		u.deps.AuthFailures.Fail(addr)
		return "", nil
	}
	return tenant, nil
}

// setCookie keeps the session id in the browser until the session
// expires: HttpOnly (no script reads it, and no script runs anyway),
// SameSite=Strict (no other site's page sends it), Secure over TLS, for
// the UI's paths only.
func setCookie(w http.ResponseWriter, r *http.Request, sess store.UISession) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sess.ID, Expires: sess.Expires,
		Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
}

// overTLS reports whether the browser reached us over TLS: directly, or
// through a proxy that terminated it and says so. Trusting the header
// only ever adds the Secure flag, which cannot weaken the cookie.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// clearCookie signs the browser out: it drops the session cookie.
func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
}

// loginView is the sign-in page.
type loginView struct {
	Next    string
	Message string
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "login", "", loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

// maxLoginForm bounds the sign-in form: an API key and a path.
const maxLoginForm = 8 << 10

// login checks the key of the form and opens a session bound to it; the
// browser gets the session's id, never the key.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	// The failed-sign-in limit applies before the form is read, and the
	// form is small: a key and where to go next. A client over its limit
	// (or sending megabytes) costs no memory.
	addr := ratelimit.ClientAddr(r, u.deps.TrustedProxies)
	if err := u.deps.AuthFailures.Check(addr); err != nil {
		u.errorPage(w, r, "", err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		u.errorPage(w, r, "", badRequest("key", "unreadable form (at most %d bytes)", maxLoginForm))
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" {
		u.render(w, r, http.StatusBadRequest, "login", "", loginView{Next: next, Message: "key: enter an API key"})
		return
	}
	sess, ok, err := u.deps.Store.OpenUISession(r.Context(), key, u.deps.SessionTTL)
	if err != nil {
		u.errorPage(w, r, "", fmt.Errorf("sign in: %w", err))
		return
	}
	if !ok {
		u.deps.AuthFailures.Fail(addr)
		clearCookie(w, r)
		u.render(w, r, http.StatusUnauthorized, "login", "", loginView{Next: next, Message: "unknown, expired or revoked API key"})
		return
	}
	u.log.Info("ui sign-in", "tenant", sess.Tenant, "expires", sess.Expires)
	// A sign-in over an earlier one ends it: one browser, one session.
	if c, err := r.Cookie(cookieName); err == nil {
		if err := u.deps.Store.EndUISession(r.Context(), c.Value); err != nil {
			u.log.Warn("ui sign-in: end the earlier session", "error", err)
		}
	}
	setCookie(w, r, sess)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session on the server, so that a copy of the cookie
// signs no one in, and clears it in the browser.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		if err := u.deps.Store.EndUISession(r.Context(), c.Value); err != nil {
			u.errorPage(w, r, "", fmt.Errorf("sign out: %w", err))
			return
		}
	}
	clearCookie(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext returns next when it is a path inside the UI (with its query),
// else the UI's home: a sign-in never redirects to another site or
// outside /ui/.
func safeNext(next string) string {
	const home = "/ui/runs"
	if next == "" || !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\x00\r\n\t") {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return home
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") {
		clean += "/"
	}
	if clean != u.Path || !strings.HasPrefix(clean, Prefix) || strings.HasPrefix(clean, "/ui/login") {
		return home
	}
	return (&url.URL{Path: clean, RawQuery: u.RawQuery}).RequestURI()
}

// errorView is the error page.
type errorView struct {
	Status  int
	Title   string
	Field   string
	Message string
}

// errorPage answers err: a pageError as it is; an outage of Postgres or S3
// as 503; anything else as a logged 500 with a generic message.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, tenant string, err error) {
	var pe *pageError
	var refused *ratelimit.Refusal
	var gone *store.SessionGoneError
	status := runview.Status(err)
	switch {
	case errors.As(err, &pe):
	case status == http.StatusGone && errors.As(err, &gone):
		// As the API's 410: the erasure's id and when, never "not found".
		pe = &pageError{Status: http.StatusGone, Message: gone.Error()}
	case status == http.StatusNotFound && runview.Missing(err) != "":
		pe = &pageError{Status: http.StatusNotFound, Message: runview.Missing(err)}
	case status == http.StatusNotFound:
		pe = notFound("run or session")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the browser went away
	case errors.As(err, &refused):
		w.Header().Set("Retry-After", strconv.Itoa(refused.RetryAfterSeconds()))
		pe = &pageError{Status: http.StatusTooManyRequests, Message: refused.Reason + "; try again shortly"}
	case store.IsRetryable(err) || blob.IsOutage(err):
		u.log.Warn("ui: dependency unavailable", "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", "5")
		pe = &pageError{Status: http.StatusServiceUnavailable, Message: "Postgres or S3 is unavailable; try again shortly"}
	default:
		u.log.Error("ui: request failed", "path", r.URL.Path, "error", err)
		pe = &pageError{Status: http.StatusInternalServerError, Message: "internal error (see the server log)"}
	}
	u.render(w, r, pe.Status, "error", tenant, errorView{Status: pe.Status, Title: http.StatusText(pe.Status), Field: pe.Field, Message: pe.Message})
}
