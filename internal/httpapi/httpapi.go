// Package httpapi is the HTTP JSON API of the orchestrator (`starter
// serve`): triggers for compaction events, the large-result service, audit,
// restore and replay. It is a thin layer over the gateway and the audit
// service; every route is scoped to the tenant of the caller's API key, and
// api/openapi.yaml documents every route (a test keeps the two in step).
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/runview"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webui"
)

// DefaultMaxWait caps wait_seconds when Deps.MaxWait is zero. The server's
// write timeout must be longer.
const DefaultMaxWait = 10 * time.Minute

// DefaultMaxRequestBytes is the body limit when Deps.MaxRequestBytes is
// zero (MAX_REQUEST_BYTES' default).
const DefaultMaxRequestBytes = 32 << 20

// Deps are what the handlers need.
type Deps struct {
	Gateway *gateway.Gateway
	Audit   *audit.Service
	Store   *store.Store
	Blob    *blob.Store
	// MaxRequestBytes caps every request body; a larger one is a 413.
	MaxRequestBytes int64
	// MaxWait caps how long a request may wait for a run.
	MaxWait time.Duration
	// Draining, when set, is cancelled as the server starts shutting
	// down: requests waiting for a run stop waiting and answer 202 with
	// the run id, so that shutdown is not held up by long waits.
	Draining context.Context
	// Limits bound each tenant's requests, API and web UI together (429
	// with Retry-After beyond).
	Limits ratelimit.Limits
	// AuthFailuresPerMinute bounds failed authentications (unknown keys
	// and UI sessions) per client address; 0 is no limit.
	AuthFailuresPerMinute int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// address (see ratelimit.ClientAddr); empty trusts none.
	TrustedProxies []netip.Prefix
	// UISessionTTL is how long a web UI sign-in lasts (webui's default
	// when zero).
	UISessionTTL time.Duration
	// Metrics count the requests by route and status and are served at
	// /metrics (nil: none, and /metrics is empty).
	Metrics *metrics.Metrics
	// Logger receives one line per request and the cause of every 500.
	// Request bodies, API keys and conversation text are never logged.
	Logger *slog.Logger
	// LLM, when set, reaches the configured summarizer endpoint for the
	// readiness probe (nil: no endpoint configured, offline summaries).
	LLM func(context.Context) error
	// Proxy configures the provider-compatible routes under /proxy/
	// (docs/proxy.md); an empty upstream turns its route off with a
	// clear error.
	Proxy proxy.Config
	// ProxyOnly serves the proxy's routes with the health, readiness
	// and metrics routes alone: no JSON API, web UI or MCP
	// (`starter proxy`).
	ProxyOnly bool
	// MCP, when set, is served at /mcp (the MCP streamable HTTP
	// transport) behind the API's bearer authentication and the tenant's
	// limits; it reads the caller's tenant with TenantOf.
	MCP http.Handler
}

type tenantKey struct{}

// TenantOf is the authenticated tenant of a request served through the
// API (for the MCP handler): "" when the request was not authenticated.
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// handlerFunc is a route's handler: it writes the answer, or returns an
// error that fail turns into the common JSON error.
type handlerFunc func(w http.ResponseWriter, r *http.Request, tenant string) error

// route is one registered operation. Request and Responses (by status)
// hold values of the Go types of the JSON bodies, so that the OpenAPI test
// can compare what the handlers read and write with the document.
type route struct {
	Method    string
	Path      string
	Auth      bool
	Handle    handlerFunc
	Request   any
	Responses map[int]any
}

// api holds the dependencies and the route table.
type api struct {
	deps    Deps
	log     *slog.Logger
	mux     *http.ServeMux
	limiter *ratelimit.Tenants
	// authFailures is shared with the web UI: a guess is a guess,
	// whichever door it knocks on.
	authFailures *ratelimit.AuthFailures
	// inspecting holds a slot per inspection in flight (maxInspections),
	// and inspections counts them per tenant (maxTenantInspections).
	inspecting  chan struct{}
	inspections tenantCount
	// runs reads, waits for and downloads runs, as the MCP server and
	// the web UI do.
	runs *runview.Reader
}

// maxInspections bounds the inspections one API process measures at once:
// each holds a few times its conversation's size while the passes run.
// One tenant holds at most maxTenantInspections of them, so that its
// large inspections never leave another tenant without a slot.
const (
	maxInspections       = 4
	maxTenantInspections = 2
)

// tenantCount counts what each tenant holds in flight.
type tenantCount struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more for tenant unless it holds limit already.
func (c *tenantCount) take(tenant string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[tenant] >= limit {
		return false
	}
	c.n[tenant]++
	return true
}

// release counts one less for tenant.
func (c *tenantCount) release(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[tenant]--; c.n[tenant] <= 0 {
		delete(c.n, tenant)
	}
}

// New builds the HTTP handler of the API.
func New(deps Deps) http.Handler {
	if deps.MaxRequestBytes <= 0 {
		deps.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if deps.MaxWait <= 0 {
		deps.MaxWait = DefaultMaxWait
	}
	a := &api{deps: deps, log: deps.Logger, mux: http.NewServeMux(), limiter: ratelimit.NewTenants(deps.Limits),
		authFailures: ratelimit.NewAuthFailures(deps.AuthFailuresPerMinute), inspecting: make(chan struct{}, maxInspections)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.runs = &runview.Reader{Audit: a.auditService(), Draining: deps.Draining}
	if deps.Gateway != nil && deps.Gateway.Temporal != nil {
		a.runs.Workflows = deps.Gateway
	}
	for _, rt := range a.routes() {
		if deps.ProxyOnly && rt.Auth {
			continue
		}
		a.mux.Handle(rt.Method+" "+rt.Path, a.wrap(rt))
	}
	// The audit web UI is not part of the JSON API: it is mounted beside
	// the route table (which the OpenAPI document covers), signs in with
	// the same API keys and answers its own pages.
	if deps.Store != nil && deps.Audit != nil && !deps.ProxyOnly {
		ui, err := webui.New(webui.Deps{Store: deps.Store, Audit: deps.Audit, Logger: a.log,
			Tenants: a.limiter, AuthFailures: a.authFailures, TrustedProxies: deps.TrustedProxies,
			SessionTTL: deps.UISessionTTL})
		if err != nil {
			panic(fmt.Sprintf("httpapi: web UI: %v", err)) // its embedded templates are broken: a build defect
		}
		a.mux.Handle(webui.Prefix, ui)
	}
	if deps.Gateway != nil && deps.Store != nil {
		// Outside the bearer authentication and the tenant's request
		// limits: the proxy's requests are the agent's own calls, named
		// by X-Compactor-Key (tenantOfKey, the same failed-auth limit).
		px, err := proxy.New(deps.Proxy, proxy.Deps{Compactor: deps.Gateway, Authenticate: a.proxyTenant, Logger: a.log,
			Outputs: func(ctx context.Context, tenant, runID string) ([]byte, error) {
				d, err := a.runs.Download(ctx, tenant, runID, runview.Output)
				return d.Data, err
			},
			Latest: a.latestOutput, Recover: a.proxyRecover, Snapshots: proxySnapshots{a}, Metrics: deps.Metrics})
		if err != nil {
			panic(fmt.Sprintf("httpapi: proxy: %v", err)) // config.Load checks the URLs first
		}
		a.mux.Handle(proxy.Prefix, px)
	}
	if deps.MCP != nil && !deps.ProxyOnly {
		a.mux.Handle("/mcp", a.wrap(route{Path: "/mcp", Auth: true, Handle: func(w http.ResponseWriter, r *http.Request, tenant string) error {
			deps.MCP.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
			return nil
		}}))
	}
	return a
}

// routes is the route table: the one list New registers and the OpenAPI
// test checks.
func (a *api) routes() []route {
	ok := func(v any) map[int]any { return map[int]any{http.StatusOK: v} }
	return []route{
		{Method: http.MethodGet, Path: "/healthz", Handle: a.health, Responses: ok(healthResponse{})},
		{Method: http.MethodGet, Path: "/metrics", Handle: a.metrics},
		{Method: http.MethodGet, Path: "/readyz", Handle: a.ready,
			Responses: map[int]any{http.StatusOK: readyResponse{}, http.StatusServiceUnavailable: readyResponse{}}},
		{Method: http.MethodPost, Path: "/v1/sessions/{session}/events", Auth: true, Handle: a.postEvent, Request: eventRequest{},
			Responses: map[int]any{http.StatusOK: eventResult{}, http.StatusAccepted: accepted{}}},
		{Method: http.MethodPost, Path: "/v1/sessions/{session}/compact", Auth: true, Handle: a.postCompact, Request: compactRequest{},
			Responses: map[int]any{http.StatusOK: eventResult{}, http.StatusAccepted: accepted{}}},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/status", Auth: true, Handle: a.getStatus, Responses: ok(audit.SessionStatus{})},
		{Method: http.MethodPost, Path: "/v1/sessions/{session}/inspect", Auth: true, Handle: a.postInspect, Request: inspectRequest{},
			Responses: ok(inspectResponse{})},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/search", Auth: true, Handle: a.getSearch, Responses: ok(searchResponse{})},
		{Method: http.MethodPost, Path: "/v1/results:compress", Auth: true, Handle: a.postCompress, Request: compressRequest{},
			Responses: map[int]any{http.StatusOK: compressResponse{}, http.StatusAccepted: accepted{}}},
		{Method: http.MethodGet, Path: "/v1/runs", Auth: true, Handle: a.listRuns, Responses: ok(runList{})},
		{Method: http.MethodGet, Path: "/v1/runs/{run}", Auth: true, Handle: a.getRun, Responses: ok(runAnswer{})},
		{Method: http.MethodGet, Path: "/v1/runs/{run}/original", Auth: true, Handle: a.getOriginal},
		{Method: http.MethodGet, Path: "/v1/runs/{run}/output", Auth: true, Handle: a.getOutput},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/offloads", Auth: true, Handle: a.listOffloads, Responses: ok(offloadList{})},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/offloads/{id}", Auth: true, Handle: a.getOffload},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/snapshots", Auth: true, Handle: a.listSnapshots, Responses: ok(snapshotList{})},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/snapshots/{seq}", Auth: true, Handle: a.getSnapshot, Responses: ok(snapshotConversation{})},
		{Method: http.MethodGet, Path: "/v1/tools", Auth: true, Handle: a.getTools, Responses: ok(toolsResponse{})},
		{Method: http.MethodGet, Path: "/v1/runs/{run}/diff", Auth: true, Handle: a.getDiff, Responses: ok(audit.Diff{})},
		{Method: http.MethodPost, Path: "/v1/runs/{run}/replay", Auth: true, Handle: a.postReplay, Request: replayRequest{},
			Responses: map[int]any{http.StatusAccepted: submitted{}}},
		{Method: http.MethodPost, Path: "/v1/runs/{run}/promote", Auth: true, Handle: a.postPromote, Responses: ok(promotion{})},
		{Method: http.MethodGet, Path: "/v1/sessions/{session}/watermarks", Auth: true, Handle: a.listWatermarks, Responses: ok(watermarkList{})},
		{Method: http.MethodPost, Path: "/v1/replays", Auth: true, Handle: a.postReplays, Request: replaysRequest{},
			Responses: map[int]any{http.StatusAccepted: replaysResponse{}}},
		{Method: http.MethodGet, Path: "/v1/export", Auth: true, Handle: a.getExport},
		{Method: http.MethodDelete, Path: "/v1/sessions/{session}", Auth: true, Handle: a.deleteSession,
			Responses: map[int]any{http.StatusAccepted: erasureRecord{}}},
		{Method: http.MethodGet, Path: "/v1/erasures/{id}", Auth: true, Handle: a.getErasure, Responses: ok(erasureRecord{})},
		{Method: http.MethodGet, Path: "/v1/retention", Auth: true, Handle: a.getRetention, Responses: ok(retentionSetting{})},
		{Method: http.MethodPut, Path: "/v1/retention", Auth: true, Handle: a.putRetention, Request: retentionRequest{},
			Responses: ok(retentionSetting{})},
		{Method: http.MethodDelete, Path: "/v1/retention", Auth: true, Handle: a.deleteRetention, Responses: ok(retentionSetting{})},
		{Method: http.MethodPost, Path: "/v1/webhooks", Auth: true, Handle: a.postWebhook, Request: webhookRequest{},
			Responses: map[int]any{http.StatusCreated: webhookEndpoint{}, http.StatusOK: webhookEndpoint{}}},
		{Method: http.MethodGet, Path: "/v1/webhooks", Auth: true, Handle: a.listWebhooks, Responses: ok(webhookList{})},
		{Method: http.MethodPost, Path: "/v1/webhooks/{id}/rotate", Auth: true, Handle: a.rotateWebhook, Responses: ok(webhookEndpoint{})},
		{Method: http.MethodDelete, Path: "/v1/webhooks/{id}", Auth: true, Handle: a.deleteWebhook},
		{Method: http.MethodGet, Path: "/v1/runs/{run}/deliveries", Auth: true, Handle: a.listDeliveries, Responses: ok(deliveryList{})},
		{Method: http.MethodPost, Path: "/v1/deliveries/{id}/redeliver", Auth: true, Handle: a.postRedeliver,
			Responses: map[int]any{http.StatusAccepted: redelivered{}}},
	}
}

// reqInfo is filled while a request is served and read by the access log.
type reqInfo struct {
	id     string
	tenant string
}

type infoKey struct{}

// statusWriter records the status code for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK { // an interim 1xx is not the answer
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// streamed exports).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP limits the body, routes, answers unknown routes with the
// common JSON error and logs one line per request.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: newRequestID()}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	sw := &statusWriter{ResponseWriter: w}
	sw.Header().Set("X-Request-ID", info.id)
	if r.Body != nil {
		r.Body = http.MaxBytesReader(sw, r.Body, a.deps.MaxRequestBytes)
	}

	if _, pattern := a.mux.Handler(r); pattern == "" {
		a.unrouted(sw, r)
	} else {
		a.mux.ServeHTTP(sw, r)
	}

	route := r.Pattern
	if route == "" {
		route = "unrouted"
	}
	a.deps.Metrics.HTTP(route, sw.status, time.Since(start))
	attrs := []any{"request_id", info.id, "method", r.Method, "route", r.Pattern, "status", sw.status,
		"duration_ms", time.Since(start).Milliseconds()}
	if info.tenant != "" {
		attrs = append(attrs, "tenant", info.tenant)
	}
	a.log.Info("http request", attrs...)
}

// unrouted answers a request no route matches: the mux decides between
// 404 and 405 (and redirects), and the answer gets the common shape.
func (a *api) unrouted(w http.ResponseWriter, r *http.Request) {
	h, _ := a.mux.Handler(r)
	rec := &captureWriter{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		writeError(w, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such route: " + r.Method + " " + r.URL.Path})
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
			Message: "method " + r.Method + " not allowed; allowed: " + rec.header.Get("Allow")})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// captureWriter keeps what the mux's own 404/405/redirect handler writes.
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, b...)
	return len(b), nil
}

// wrap authenticates (when the route needs it), runs the handler and turns
// its error into the common JSON error.
func (a *api) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := ""
		if rt.Auth {
			t, err := a.authenticate(r)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			tenant = t
			if info, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
				info.tenant = tenant
			}
			release, err := a.limiter.Acquire(tenant)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			defer release()
		}
		if err := checkPathValues(r, rt.Path); err != nil {
			a.fail(w, r, err)
			return
		}
		r, err := a.checkGone(r, rt, tenant)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if err := rt.Handle(w, r, tenant); err != nil {
			a.fail(w, r, err)
		}
	})
}

// checkGone answers a read of an erased session (or its erasure again)
// with the erasure instead of as a session never used: 410 with its id
// and when it happened. A session name taken again after its erasure is
// a new generation and reads as any live session. The request it
// returns carries the check (store.CheckSessionGoneOnce), so that the
// handler's audit reads of the session do not ask Postgres again.
func (a *api) checkGone(r *http.Request, rt route, tenant string) (*http.Request, error) {
	if !rt.Auth || (r.Method != http.MethodGet && r.Method != http.MethodDelete) {
		return r, nil
	}
	session := r.PathValue("session")
	if session == "" && r.Method == http.MethodGet {
		session = r.URL.Query().Get("session")
	}
	if session == "" || idcheck.Session(session) != nil {
		return r, nil // no session, or one the handler refuses by name
	}
	if r.Method == http.MethodDelete && rt.Path != "/v1/sessions/{session}" {
		return r, nil
	}
	ctx, err := a.deps.Store.CheckSessionGoneOnce(r.Context(), tenant, session)
	var gone *store.SessionGoneError
	if r.Method == http.MethodDelete && errors.As(err, &gone) && gone.Erasure.FinishedAt.IsZero() {
		return r, nil // asking again joins the erasure under way
	}
	if err != nil {
		return r, err
	}
	return r.WithContext(ctx), nil
}

// checkPathValues validates the identifiers in a request's path (see
// package idcheck) before any handler looks them up: a session of invalid
// UTF-8 or with control characters is a 400 naming it, not a 500.
func checkPathValues(r *http.Request, pattern string) error {
	for _, name := range []string{"session", "run", "id"} {
		if !strings.Contains(pattern, "{"+name+"}") {
			continue
		}
		v := r.PathValue(name)
		err := idcheck.Check(name, v)
		if name == "session" {
			err = idcheck.Session(v)
		}
		if err != nil {
			return badRequest(name, "%v", err)
		}
	}
	return nil
}

// authenticate returns the tenant of the request's bearer key. The key is
// looked up by its hash; it is never logged nor echoed.
func (a *api) authenticate(r *http.Request) (string, error) {
	header := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return "", &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "missing API key: send Authorization: Bearer <key>"}
	}
	tenant, found, err := a.tenantOfKey(r, strings.TrimSpace(key))
	if err != nil {
		return "", err
	}
	if !found {
		return "", &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "unknown, expired or revoked API key"}
	}
	return tenant, nil
}

// tenantOfKey is the tenant of API key key, under the failed-auth limit
// of the client's address: found is false for a key that is unknown,
// expired or revoked (a failure counted), and err a refusal of that
// limit or a store that cannot be read.
func (a *api) tenantOfKey(r *http.Request, key string) (tenant string, found bool, err error) {
	addr := ratelimit.ClientAddr(r, a.deps.TrustedProxies)
	if err := a.authFailures.CheckCredential(addr, key); err != nil {
		return "", false, err
	}
	k, found, err := a.deps.Store.Authenticate(r.Context(), key)
	if err != nil || !found {
		if err == nil {
			a.authFailures.Fail(addr)
		}
		return "", false, err
	}
	a.authFailures.Succeeded(key)
	return k.Tenant, true, nil
}

// proxyRecover answers the recover tool the proxy offers, as GET
// /v1/sessions/{session}/offloads/{id} does, for the proxy's tenant and
// session only. What the model reads of an error says what to do, never
// the store's internals.
func (a *api) proxyRecover(ctx context.Context, tenant, session, id, lines string) ([]byte, int, error) {
	rec, err := a.auditService().RecoverContext(ctx, tenant, session, id, lines)
	var re *audit.RecoverError
	var gone *store.SessionGoneError
	switch {
	case errors.As(err, &re):
		return nil, rec.TotalLines, errors.New(re.Message)
	case errors.As(err, &gone):
		return nil, 0, errors.New("this session was erased: its cut content is gone")
	case err != nil:
		a.log.Warn("proxy: recover_context failed", "tenant", tenant, "session", session, "error", err)
		return nil, 0, errors.New("the compactor could not read it now (its store is unavailable): try again shortly")
	}
	return rec.Data, rec.TotalLines, nil
}

// latestOutput is tenant's session's latest output for the proxy: its
// run, the run's event id and the output's digest; "" when there is none.
func (a *api) latestOutput(ctx context.Context, tenant, session string) (runID, eventID, sha string, err error) {
	o, err := a.deps.Store.LatestOutput(ctx, tenant, session)
	if errors.Is(err, store.ErrNotFound) {
		return "", "", "", nil
	}
	if err != nil {
		return "", "", "", err
	}
	r, err := a.deps.Store.GetRun(ctx, o.RunID)
	if err != nil {
		return "", "", "", err
	}
	return o.RunID, r.EventID, o.SHA256, nil
}

// proxyTenant is tenantOfKey for the proxy's X-Compactor-Key.
func (a *api) proxyTenant(r *http.Request, key string) (string, error) {
	tenant, found, err := a.tenantOfKey(r, key)
	var refusal *ratelimit.Refusal
	switch {
	case errors.As(err, &refusal):
		return "", &proxy.AuthError{Status: http.StatusTooManyRequests, Message: refusal.Reason, RetryAfter: refusal.RetryAfter}
	case err != nil:
		return "", err
	case !found:
		return "", &proxy.AuthError{Status: http.StatusUnauthorized, Message: "unknown, expired or revoked API key"}
	}
	return tenant, nil
}

// fail writes err as the common JSON error. Unexpected errors are logged
// with the request id and answered with a generic message, because their
// text may name internals.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="compactor"`)
	}
	if ae.Status == http.StatusInternalServerError {
		id := ""
		if info, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
			id = info.id
		}
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The caller went away; nobody reads the answer.
			a.log.Debug("request cancelled by the client", "request_id", id, "route", r.Pattern)
		} else {
			a.log.Error("request failed", "request_id", id, "route", r.Pattern, "error", err)
		}
		ae.Message = "internal error (request id " + id + ")"
	}
	writeError(w, ae)
}

// health answers the liveness probe; it checks nothing behind the process.
func (a *api) health(w http.ResponseWriter, _ *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
	return nil
}

// metrics serves the process's Prometheus metrics (no key: scrapers
// carry none, and the metrics hold no tenant data).
func (a *api) metrics(w http.ResponseWriter, r *http.Request, _ string) error {
	if a.deps.Metrics == nil {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		return nil
	}
	a.deps.Metrics.Handler().ServeHTTP(w, r)
	return nil
}

// healthResponse is the body of GET /healthz.
type healthResponse struct {
	Status string `json:"status"`
}

// readyResponse is the body of GET /readyz: "ready" or "unavailable",
// and each dependency's check ("ok" or why not).
type readyResponse struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// readyTimeout bounds each readiness check.
const readyTimeout = 2 * time.Second

// ready answers the readiness probe: Temporal, Postgres and S3 each
// answer within readyTimeout, checked in parallel. Any failure is a 503
// with Retry-After, so a load balancer stops sending work here.
func (a *api) ready(w http.ResponseWriter, r *http.Request, _ string) error {
	checks := map[string]func(context.Context) error{
		"postgres": func(ctx context.Context) error { return a.deps.Store.Pool().Ping(ctx) },
		"s3":       a.deps.Blob.Ready,
		"temporal": func(ctx context.Context) error {
			_, err := a.deps.Gateway.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}
	if a.deps.LLM != nil {
		checks["llm"] = a.deps.LLM
	}
	res := readyResponse{Status: "ready", Checks: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			state := "ok"
			if err := check(ctx); err != nil {
				state = "unavailable"
				a.log.Warn("readiness check failed", "dependency", name, "error", err)
			}
			mu.Lock()
			res.Checks[name] = state
			mu.Unlock()
		}()
	}
	wg.Wait()
	status := http.StatusOK
	for name, st := range res.Checks {
		switch {
		case st == "ok":
		case name == "llm":
			// Runs go on with the offline summarizer, each marked
			// degraded: the API stays ready, and says so.
			if res.Status == "ready" {
				res.Status = "degraded"
			}
		default:
			res.Status, status = "unavailable", http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		}
	}
	writeJSON(w, status, res)
	return nil
}

// newRequestID returns a short random id that ties a 500 answer to its log
// line.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
