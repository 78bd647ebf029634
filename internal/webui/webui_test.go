package webui

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// fixture is the UI on a real Postgres schema and S3 bucket, with two
// tenants and their keys.
type fixture struct {
	t      *testing.T
	url    string
	store  *store.Store
	blob   *blob.Store
	keyA   string
	keyB   string
	client *http.Client
}

const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, func(*Deps) {})
}

// newFixtureWith is newFixture with Deps changed by set (limits, TTL).
func newFixtureWith(t *testing.T, set func(*Deps)) *fixture {
	t.Helper()
	st := storetest.New(t)
	bl := blobtest.New(t)
	deps := Deps{Store: st, Audit: &audit.Service{Store: st, Blob: bl}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	set(&deps)
	ui, err := New(deps)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(Prefix, ui)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := &fixture{t: t, url: srv.URL, store: st, blob: bl,
		keyA: "key-a-0123456789abcdef", keyB: "key-b-0123456789abcdef",
		// Redirects are checked, not followed.
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	require.NoError(t, st.AddAPIKey(t.Context(), tenantA, f.keyA))
	require.NoError(t, st.AddAPIKey(t.Context(), tenantB, f.keyB))
	return f
}

// answer is a response with its body read.
type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a request with the sign-in cookie (when not nil) and extra
// headers.
func (f *fixture) do(method, path string, cookie *http.Cookie, form url.Values, headers map[string]string) answer {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.url+path, body)
	require.NoError(f.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := f.client.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func (f *fixture) get(path string, cookie *http.Cookie) answer {
	f.t.Helper()
	return f.do(http.MethodGet, path, cookie, nil, nil)
}

// signIn posts key to the sign-in form and returns the cookie set.
func (f *fixture) signIn(key string) *http.Cookie {
	f.t.Helper()
	a := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {key}}, nil)
	require.Equal(f.t, http.StatusSeeOther, a.status, a.body)
	c := uiCookie(f.t, a.header)
	require.NotNil(f.t, c, "no cookie set")
	return c
}

// uiCookie is the UI's cookie in a response, nil if none.
func uiCookie(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	for _, line := range h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		require.NoError(t, err)
		if c.Name == cookieName {
			return c
		}
	}
	return nil
}

// seededRun is a run with its stored original and output.
type seededRun struct {
	run      store.Run
	original []byte
	output   []byte
}

// addRun stores a committed run of tenant/session with an archive, an
// output, stats, two step attempts and a drift verdict.
func (f *fixture) addRun(tenant, session, id string, status store.RunStatus, preset string, started time.Time, before, after int64) seededRun {
	f.t.Helper()
	return f.addRunWith(tenant, session, id, status, preset, started, before, after, runExtras{})
}

// runExtras change what addRunWith stores; zero values keep addRun's.
type runExtras struct {
	// Original and Output replace the stored conversations.
	Original, Output []byte
	// ReplayOf makes the run a replay of that run.
	ReplayOf string
	// Handoff is stored and named in the stats of a committed run.
	Handoff []byte
}

// addRunWith is addRun with extras.
func (f *fixture) addRunWith(tenant, session, id string, status store.RunStatus, preset string, started time.Time, before, after int64, extras runExtras) seededRun {
	f.t.Helper()
	ctx := f.t.Context()
	orig := []byte(`{"messages":[{"role":"user","content":"fix src/parse.go"},{"role":"assistant","content":"` + strings.Repeat("x", 400) + `"},{"role":"assistant","content":"done"}]}`)
	out := []byte(`{"messages":[{"role":"user","content":"fix src/parse.go"},{"role":"assistant","content":"done"}]}`)
	if extras.Original != nil {
		orig = extras.Original
	}
	if extras.Output != nil {
		out = extras.Output
	}
	r := store.Run{ID: id, Tenant: tenant, Session: session, EventID: "ev-" + id, Trigger: "threshold", Preset: preset,
		Status: status, StartedAt: started, TokensBefore: before, TokensAfter: after, ContextLimit: 10000,
		Level: "GREEN", Model: "gpt-4o-mini", ReplayOf: extras.ReplayOf}
	if before > 0 {
		r.Ratio = float64(after) / float64(before)
	}
	if status.Final() {
		r.FinishedAt = started.Add(3 * time.Second)
	}
	if status != store.RunPending && status != store.RunRunning {
		ref, err := f.blob.PutContent(ctx, tenant, blob.KindArchive, orig)
		require.NoError(f.t, err)
		r.ArchiveKey, r.ArchiveSHA256 = ref.Key, ref.SHA256
	}
	if status.Committed() {
		ref, err := f.blob.PutContent(ctx, tenant, blob.KindOutput, out)
		require.NoError(f.t, err)
		r.OutputKey, r.OutputSHA256 = ref.Key, ref.SHA256
		st := map[string]any{
			"context_limit": 10000, "usage_after": float64(after) / 10000, "unit": "tokens", "recommendation": "Continue normally",
			"passes": []map[string]any{
				{"name": "offload", "applied": true, "count": 1, "tokens_saved": before - after, "note": "offloaded <b>1</b> result"},
				{"name": "watermark", "applied": false, "note": "no watermark yet"},
			},
			"cache":            map[string]any{"prefix_tokens": 1500, "rewrite_tokens": after - 1500, "prefix_share": 0.75},
			"session_log":      map[string]any{"blocks": 2, "tokens": 700, "appended": 1, "reflected": true},
			"cost":             map[string]any{"net_saving_usd": 0.0123, "summarizer_usd": 0.0007, "turns": 10, "priced": true},
			"degraded_reasons": []string{"the summarizer failed: the extractive fallback wrote a summary instead"},
		}
		if extras.Handoff != nil {
			ref, err := f.blob.PutContent(ctx, tenant, blob.KindOutput, extras.Handoff)
			require.NoError(f.t, err)
			st["handoff_key"], st["handoff_sha256"] = ref.Key, ref.SHA256
		}
		stats, err := json.Marshal(st)
		require.NoError(f.t, err)
		r.Stats = stats
	}
	if status == store.RunFailed || status == store.RunOverLimit {
		r.Error = "summarizer said no"
	}
	stored, created, err := f.store.CreateRun(ctx, r)
	require.NoError(f.t, err)
	require.True(f.t, created)
	require.NoError(f.t, f.store.RecordStep(ctx, store.Step{RunID: id, Name: "plan", Attempt: 1, Kind: "plan",
		Duration: 40 * time.Millisecond, At: started.Add(50 * time.Millisecond), Execution: "x1"}))
	require.NoError(f.t, f.store.RecordStep(ctx, store.Step{RunID: id, Name: "history-summary", Attempt: 1, Kind: "llm",
		Duration: time.Second, Error: "429 rate limited", At: started.Add(1100 * time.Millisecond), Execution: "x2"}))
	require.NoError(f.t, f.store.RecordStep(ctx, store.Step{RunID: id, Name: "history-summary", Attempt: 2, Kind: "llm",
		Duration: 1500 * time.Millisecond, PromptTokens: 900, CompletionTokens: 120, At: started.Add(2700 * time.Millisecond), Execution: "x3"}))
	require.NoError(f.t, f.store.RecordDrift(ctx, store.Drift{RunID: id, Step: "history", Pass: 0, Score: 0.5, Passed: false,
		Missing: []string{"src/parse.go", "ERR_<42>"}, Verdict: "repaired"}))
	return seededRun{run: stored, original: orig, output: out}
}

func TestSignInOutAndRevocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	// Signed out: every page sends the browser to the sign-in page, which
	// returns to it.
	a := f.get("/ui/runs?status=failed", nil)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/runs?status=failed"), a.header.Get("Location"))
	login := f.get("/ui/login?next="+url.QueryEscape("/ui/runs?status=failed"), nil)
	require.Equal(t, http.StatusOK, login.status)
	require.Contains(t, login.body, `name="next" value="/ui/runs?status=failed"`)

	// A wrong key: 401, no cookie.
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {"not-a-key-0123456789"}}, nil)
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Contains(t, a.body, "unknown, expired or revoked API key")
	if c := uiCookie(t, a.header); c != nil {
		require.Empty(t, c.Value)
	}
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {""}}, nil)
	require.Equal(t, http.StatusBadRequest, a.status)

	// The right key: a strict cookie and back to the page asked for.
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyA}, "next": {"/ui/runs?status=failed"}}, nil)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/ui/runs?status=failed", a.header.Get("Location"))
	c := uiCookie(t, a.header)
	require.NotNil(t, c)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.False(t, c.Secure, "plain HTTP here; Secure is set over TLS")
	require.Equal(t, "/ui/", c.Path)
	require.NotContains(t, c.Value, f.keyA, "the cookie is not the key")
	require.NotContains(t, c.Value, base64.RawURLEncoding.EncodeToString([]byte(f.keyA)), "nor the key encoded")
	require.False(t, c.Expires.IsZero(), "the cookie ends with its session")
	require.WithinDuration(t, time.Now().Add(DefaultSessionTTL), c.Expires, 5*time.Minute)
	// The store holds only the session id's hash.
	sum := sha256.Sum256([]byte(c.Value))
	var stored int
	require.NoError(t, f.store.Pool().QueryRow(t.Context(),
		`select count(*) from ui_sessions where id_hash = $1`, hex.EncodeToString(sum[:])).Scan(&stored))
	require.Equal(t, 1, stored)

	// Behind a proxy that terminated TLS, the cookie is Secure.
	proxied := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyA}}, map[string]string{"X-Forwarded-Proto": "https"})
	require.Equal(t, http.StatusSeeOther, proxied.status, proxied.body)
	require.True(t, uiCookie(t, proxied.header).Secure)

	page := f.get("/ui/runs", c)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, `<strong id="tenant">tenant-a</strong>`)

	// Sign-out clears the cookie.
	a = f.do(http.MethodPost, "/ui/logout", c, url.Values{}, nil)
	require.Equal(t, http.StatusSeeOther, a.status)
	cleared := uiCookie(t, a.header)
	require.NotNil(t, cleared)
	require.Less(t, cleared.MaxAge, 0)
	// ... and ends the session: a copy of the cookie kept from before
	// signs no one in.
	a = f.get("/ui/runs", c)
	require.Equal(t, http.StatusSeeOther, a.status, "a stolen cookie dies with sign-out")
	require.True(t, strings.HasPrefix(a.header.Get("Location"), "/ui/login"))

	// A revoked key signs the browser out on its next request.
	c = f.signIn(f.keyA)
	require.Equal(t, http.StatusOK, f.get("/ui/overview", c).status)
	revoked, err := f.store.RevokeAPIKey(t.Context(), f.keyA)
	require.NoError(t, err)
	require.True(t, revoked)
	a = f.get("/ui/overview", c)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.True(t, strings.HasPrefix(a.header.Get("Location"), "/ui/login"))
	cleared = uiCookie(t, a.header)
	require.NotNil(t, cleared)
	require.Less(t, cleared.MaxAge, 0)
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyA}}, nil)
	require.Equal(t, http.StatusUnauthorized, a.status)

	// A forged cookie is no session; the API key itself is none either.
	for _, v := range []string{"garbage!!", "", "a2V5LWItMDEyMzQ1Njc4OWFiY2RlZg-", f.keyB,
		base64.RawURLEncoding.EncodeToString([]byte(f.keyB)), base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
		a = f.get("/ui/runs", &http.Cookie{Name: cookieName, Value: v})
		require.Equal(t, http.StatusSeeOther, a.status, "cookie %q", v)
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.signIn(f.keyB)
	host := strings.TrimPrefix(f.url, "http://")
	tests := []struct {
		name    string
		path    string
		headers map[string]string
		status  int
	}{
		{"cross-site sign-in", "/ui/login", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site other origin", "/ui/login", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign Origin", "/ui/login", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-site sign-out", "/ui/logout", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same origin", "/ui/login", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"own Origin", "/ui/login", map[string]string{"Origin": "http://" + host}, http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(http.MethodPost, tc.path, c, url.Values{"key": {f.keyA}}, tc.headers)
			require.Equal(t, tc.status, a.status, a.body)
			if tc.status == http.StatusForbidden {
				require.Contains(t, a.body, "cross-origin request refused")
				require.Nil(t, uiCookie(t, a.header), "a refused request changes no cookie")
			}
		})
	}
}

func TestNextStaysInsideTheUI(t *testing.T) {
	t.Parallel()
	tests := []struct{ next, want string }{
		{"", "/ui/runs"},
		{"/ui/runs?status=failed&preset=adaptive", "/ui/runs?status=failed&preset=adaptive"},
		{"/ui/sessions/a%20b", "/ui/sessions/a%20b"},
		{"/ui/", "/ui/"},
		{"https://evil.example/ui/", "/ui/runs"},
		{"//evil.example/ui/", "/ui/runs"},
		{"/\\evil.example", "/ui/runs"},
		{"/ui/\\evil", "/ui/runs"},
		{"/ui/../v1/runs", "/ui/runs"},
		{"/ui/%2e%2e/v1/runs", "/ui/runs"},
		{"/ui//evil.example", "/ui/runs"},
		{"/uix", "/ui/runs"},
		{"/v1/runs", "/ui/runs"},
		{"javascript:alert(1)", "/ui/runs"},
		{"/ui/login?next=https://evil.example", "/ui/runs"},
		{"/ui/runs\r\nSet-Cookie: x=1", "/ui/runs"},
		{"/ui/runs#frag", "/ui/runs"},
	}
	for _, tc := range tests {
		t.Run(tc.next, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, safeNext(tc.next))
		})
	}
	// And through the form.
	f := newFixture(t)
	for _, next := range []string{"https://evil.example/", "//evil.example", "/ui/runs?session=s1"} {
		a := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyA}, "next": {next}}, nil)
		require.Equal(t, http.StatusSeeOther, a.status)
		require.Equal(t, safeNext(next), a.header.Get("Location"))
		require.True(t, strings.HasPrefix(a.header.Get("Location"), "/ui/"))
	}
}

func TestPagesAreTenantScoped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Add(-time.Hour)
	a := f.addRun(tenantA, "alpha-session", "run-a1", store.RunSucceeded, "adaptive", now, 8000, 2000)
	f.addRun(tenantB, "beta-session", "run-b1", store.RunSucceeded, "adaptive", now, 5000, 1000)
	ca, cb := f.signIn(f.keyA), f.signIn(f.keyB)

	pages := []string{
		"/ui/runs/run-a1", "/ui/runs/run-a1/steps.svg", "/ui/runs/run-a1/original", "/ui/runs/run-a1/output",
		"/ui/sessions/alpha-session", "/ui/sessions/alpha-session/timeline.svg",
	}
	for _, p := range pages {
		t.Run(p, func(t *testing.T) {
			own := f.get(p, ca)
			require.Equal(t, http.StatusOK, own.status, own.body)
			other := f.get(p, cb)
			require.Equal(t, http.StatusNotFound, other.status, "tenant B must not see %s", p)
			require.NotContains(t, other.body, "alpha-session")
			require.NotContains(t, other.body, "8,000")
		})
	}

	// Lists and the overview show only the tenant's own runs.
	listA, listB := f.get("/ui/runs", ca), f.get("/ui/runs", cb)
	require.Contains(t, listA.body, "run-a1")
	require.NotContains(t, listA.body, "run-b1")
	require.Contains(t, listB.body, "run-b1")
	require.NotContains(t, listB.body, "run-a1")
	require.Contains(t, f.get("/ui/overview", cb).body, `id="total-saved">4,000<`)
	// Another tenant's run as the page cursor is unknown.
	cur := f.get("/ui/runs?after=run-a1", cb)
	require.Equal(t, http.StatusBadRequest, cur.status)
	require.Contains(t, cur.body, `id="field">after<`)

	// Downloads are the stored bytes, with their digest.
	for path, want := range map[string][]byte{"/ui/runs/run-a1/original": a.original, "/ui/runs/run-a1/output": a.output} {
		got := f.get(path, ca)
		require.Equal(t, string(want), got.body)
		sum := sha256.Sum256(want)
		require.Equal(t, hex.EncodeToString(sum[:]), got.header.Get("X-Content-SHA256"))
		require.Contains(t, got.header.Get("Content-Disposition"), "attachment")
		require.Equal(t, "application/json", got.header.Get("Content-Type"))
	}
}

func TestRunPageShowsTheAudit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := time.Now().UTC().Add(-time.Hour)
	f.addRun(tenantA, "s1", "run-ok", store.RunSucceeded, "three-tier", started, 8000, 2000)
	f.addRun(tenantA, "s1", "run-over", store.RunOverLimit, "adaptive", started.Add(time.Minute), 12000, 11000)
	f.addRun(tenantA, "s1", "run-failed", store.RunFailed, "adaptive", started.Add(2*time.Minute), 9000, 0)
	c := f.signIn(f.keyA)

	page := f.get("/ui/runs/run-ok", c)
	require.Equal(t, http.StatusOK, page.status)
	for _, want := range []string{
		`id="tokens-before">8,000<`, `id="tokens-after">2,000<`, `id="ratio">0.250<`, `id="status">succeeded<`,
		"history-summary", "429 rate limited", `<span class="tag">retry</span>`, // steps with attempts and errors
		"6,000 tokens saved", "offloaded &lt;b&gt;1&lt;/b&gt; result", // passes, escaped
		`<code class="missing">ERR_&lt;42&gt;</code>`, "repaired", // drift
		`id="diff-summary"`,                                                                               // the diff
		`id="cache-prefix">1,500<`, `id="session-log">2 blocks<`, "reflected", `id="net-saving">$0.0123<`, // a session's life
		`id="degraded">Degraded: the summarizer failed: the extractive fallback wrote a summary instead<`,
		`href="/ui/runs/run-ok/original"`, `href="/ui/runs/run-ok/output"`, `src="/ui/runs/run-ok/steps.svg"`,
	} {
		require.Contains(t, page.body, want)
	}
	require.Contains(t, page.body, `id="no-deliveries"`)

	// The run's webhook deliveries, with each attempt and the answer's
	// first bytes (escaped).
	ctx := t.Context()
	_, _, err := f.store.AddWebhook(ctx, tenantA, "https://hooks.example.com/x", "", "whsec_c2VjcmV0")
	require.NoError(t, err)
	ds, err := f.store.PrepareDeliveries(ctx, tenantA, "run-ok", "run.succeeded")
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.NoError(t, f.store.RecordAttempt(ctx, ds[0].ID, store.DeliveryAttempt{Code: 500, Error: "endpoint answered 500", ResponsePrefix: "<b>down</b>"}, false))
	require.NoError(t, f.store.RecordAttempt(ctx, ds[0].ID, store.DeliveryAttempt{Code: 200, ResponsePrefix: "ok"}, true))
	page = f.get("/ui/runs/run-ok", c)
	for _, want := range []string{`id="deliveries"`, ds[0].ID, "delivered", "endpoint answered 500", "&lt;b&gt;down&lt;/b&gt;"} {
		require.Contains(t, page.body, want)
	}

	over := f.get("/ui/runs/run-over", c)
	require.Contains(t, over.body, `id="over-limit">Over the limit: summarizer said no<`)
	failed := f.get("/ui/runs/run-failed", c)
	require.Contains(t, failed.body, `id="run-error">summarizer said no<`)
	require.Contains(t, failed.body, "No diff: the run has no output.")
	require.NotContains(t, failed.body, `id="dl-output"`)
	require.Equal(t, http.StatusNotFound, f.get("/ui/runs/run-failed/output", c).status)
	require.NotContains(t, failed.body, `id="live-steps"`, "a final run has all its step records")

	// A live run says why its successful steps are not listed yet.
	f.addRun(tenantA, "s1", "run-live", store.RunRunning, "adaptive", started.Add(3*time.Minute), 9000, 0)
	live := f.get("/ui/runs/run-live", c)
	require.Equal(t, http.StatusOK, live.status)
	require.Contains(t, live.body, `id="live-steps"`)

	// The step chart carries the steps.
	svg := f.get("/ui/runs/run-ok/steps.svg", c)
	require.Equal(t, "image/svg+xml", svg.header.Get("Content-Type"))
	texts := svgTexts(t, []byte(svg.body))
	require.Contains(t, texts, "history-summary #2")
	require.Contains(t, texts, "1.0s error")
}

func TestRunFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	day := time.Date(2025, 4, 10, 12, 0, 0, 0, time.UTC)
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", day, 1000, 100)
	f.addRun(tenantA, "s2", "run-2", store.RunFailed, "three-tier", day.AddDate(0, 0, 1), 1000, 0)
	f.addRun(tenantA, "s2", "run-3", store.RunSucceeded, "three-tier", day.AddDate(0, 0, 2), 1000, 200)
	c := f.signIn(f.keyA)

	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"run-3", "run-2", "run-1"}},
		{"session=s2", []string{"run-3", "run-2"}},
		{"status=failed", []string{"run-2"}},
		{"preset=three-tier&status=succeeded", []string{"run-3"}},
		{"from=2025-04-11", []string{"run-3", "run-2"}},
		{"to=2025-04-11", []string{"run-2", "run-1"}},
		{"from=2025-04-11&to=2025-04-11", []string{"run-2"}},
		{"from=2025-04-11T00:00:00Z&to=2025-04-12T00:00:00Z", []string{"run-2"}},
		{"session=nobody", nil},
		// Every committed run of the fixture went through a fallback;
		// the failed one has no stats.
		{"degraded=1", []string{"run-3", "run-1"}},
		{"degraded=1&session=s2", []string{"run-3"}},
	}
	for _, tc := range tests {
		t.Run("ok "+tc.query, func(t *testing.T) {
			a := f.get("/ui/runs?"+tc.query, c)
			require.Equal(t, http.StatusOK, a.status, a.body)
			require.Equal(t, tc.want, listedRuns(a.body))
		})
	}

	bad := []struct{ query, field string }{
		{"status=bogus", "status"},
		{"preset=squeeze-hard", "preset"},
		{"from=yesterday", "from"},
		{"to=2025-13-01", "to"},
		{"from=2025-04-12&to=2025-04-10", "to"},
		{"session=" + url.QueryEscape("bad\x01name"), "session"},
		{"session=a%2Fb", "session"},
		{"session=%ff", "session"},
		{"limit=0", "limit"},
		{"limit=lots", "limit"},
		{"after=run-unknown", "after"},
		{"degraded=maybe", "degraded"},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.query, func(t *testing.T) {
			a := f.get("/ui/runs?"+tc.query, c)
			require.Equal(t, http.StatusBadRequest, a.status, a.body)
			require.Contains(t, a.body, `id="field">`+tc.field+`<`)
		})
	}
	for _, tc := range []struct{ path, field string }{
		{"/ui/overview?days=5", "days"},
		{"/ui/overview/runs.svg?days=x", "days"},
		{"/ui/runs/bad%01id", "run"},
		{"/ui/sessions/%ff", "session"},
		{"/ui/sessions/bad%01/timeline.svg", "session"},
	} {
		a := f.get(tc.path, c)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", tc.path, a.body)
		require.Contains(t, a.body, `id="field">`+tc.field+`<`)
	}
	require.Equal(t, http.StatusNotFound, f.get("/ui/runs/run-nope", c).status)
	require.Equal(t, http.StatusNotFound, f.get("/ui/sessions/nobody", c).status)
	require.Equal(t, http.StatusNotFound, f.get("/ui/sessions/nobody/timeline.svg", c).status)
	require.Equal(t, http.StatusNotFound, f.get("/ui/no/such/page", c).status)

	// The degraded runs carry a badge; the filter is kept when paging.
	all := f.get("/ui/runs", c)
	require.Equal(t, 2, strings.Count(all.body, `<span class="tag degraded"`), "run-1 and run-3")
	page := f.get("/ui/runs?degraded=1&limit=1", c)
	require.Equal(t, []string{"run-3"}, listedRuns(page.body))
	require.Equal(t, []string{"run-1"}, listedRuns(f.get(linkByID(t, page.body, "next"), c).body))

	// Paging: a page of one links to the next, filters kept.
	first := f.get("/ui/runs?session=s2&limit=1", c)
	require.Equal(t, []string{"run-3"}, listedRuns(first.body))
	next := linkByID(t, first.body, "next")
	second := f.get(next, c)
	require.Equal(t, []string{"run-2"}, listedRuns(second.body))
	third := f.get(linkByID(t, second.body, "next"), c)
	require.Empty(t, listedRuns(third.body))
}

func TestHostileSessionNamesAreEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hostile := `<img src=x onerror=alert(1)>"'&`
	f.addRun(tenantA, hostile, "run-h", store.RunSucceeded, "adaptive", time.Now().UTC().Add(-time.Minute), 3000, 1000)
	c := f.signIn(f.keyA)
	for _, p := range []string{"/ui/runs", "/ui/runs/run-h", "/ui/sessions/" + url.PathEscape(hostile), "/ui/runs?session=" + url.QueryEscape(hostile)} {
		a := f.get(p, c)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", p, a.body)
		require.NotContains(t, a.body, "<img src=x", p)
		require.Contains(t, a.body, "&lt;img src=x onerror=alert(1)&gt;", p)
	}
	// The links to the session are path-escaped and lead to it.
	page := f.get("/ui/runs", c)
	require.Contains(t, page.body, `href="/ui/sessions/%3Cimg%20src=x%20onerror=alert%281%29%3E%22%27&amp;"`)
	svg := f.get("/ui/sessions/"+url.PathEscape(hostile)+"/timeline.svg", c)
	require.Equal(t, http.StatusOK, svg.status)
	svgTexts(t, []byte(svg.body))
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", time.Now().UTC().Add(-time.Minute), 1000, 100)
	c := f.signIn(f.keyA)
	for _, p := range []string{"/ui/login", "/ui/runs", "/ui/runs/run-1", "/ui/sessions/s1", "/ui/overview", "/ui/nope"} {
		a := f.get(p, c)
		require.Equal(t, pageCSP, a.header.Get("Content-Security-Policy"), p)
		require.Equal(t, "nosniff", a.header.Get("X-Content-Type-Options"), p)
		require.Equal(t, "no-store", a.header.Get("Cache-Control"), p)
		require.Equal(t, "text/html; charset=utf-8", a.header.Get("Content-Type"), p)
		require.NotContains(t, a.body, "<script", p)
		require.NotContains(t, a.body, "http://", p)
		require.NotContains(t, a.body, "https://", p)
	}
	css := f.get("/ui/static/style.css", nil)
	require.Equal(t, http.StatusOK, css.status)
	require.Contains(t, css.header.Get("Content-Type"), "text/css")
	for _, p := range []string{"/ui/sessions/s1/timeline.svg", "/ui/runs/run-1/steps.svg", "/ui/overview/runs.svg", "/ui/overview/tokens.svg?days=7"} {
		a := f.get(p, c)
		require.Equal(t, http.StatusOK, a.status, p)
		require.Equal(t, "image/svg+xml", a.header.Get("Content-Type"), p)
		require.Equal(t, svgCSP, a.header.Get("Content-Security-Policy"), p)
		require.Equal(t, "nosniff", a.header.Get("X-Content-Type-Options"), p)
		require.NotContains(t, a.body, "<script", p)
		svgTexts(t, []byte(a.body))
	}
}

func TestSessionPageAndTimeline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	start := time.Now().UTC().Add(-time.Hour)
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", start, 9000, 2000)
	f.addRun(tenantA, "s1", "run-2", store.RunFailed, "adaptive", start.Add(time.Minute), 9100, 0)
	f.addRun(tenantA, "s1", "run-3", store.RunSucceeded, "adaptive", start.Add(2*time.Minute), 7400, 1234)
	c := f.signIn(f.keyA)

	page := f.get("/ui/sessions/s1", c)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, `src="/ui/sessions/s1/timeline.svg"`)
	require.Contains(t, page.body, `id="level">GREEN<`)
	require.Equal(t, []string{"run-3", "run-2", "run-1"}, listedRuns(page.body))

	svg := f.get("/ui/sessions/s1/timeline.svg", c)
	texts := svgTexts(t, []byte(svg.body))
	// Each committed run's point before and after, numbered in order; the
	// failed run has no output and no point.
	for _, want := range []string{"9,000", "2,000 GREEN", "7,400", "1,234 GREEN", "#1", "#2", "limit (100%)",
		"GREEN", "YELLOW", "ORANGE", "RED", "CRITICAL"} {
		require.Contains(t, texts, want)
	}
	require.NotContains(t, texts, "9,100")
}

func TestOverviewTotals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", today.Add(time.Minute), 9000, 2000)
	f.addRun(tenantA, "s1", "run-2", store.RunFailed, "adaptive", today.Add(2*time.Minute), 9100, 0)
	f.addRun(tenantA, "s2", "run-3", store.RunOverLimit, "adaptive", today.AddDate(0, 0, -3), 20000, 15000)
	f.addRun(tenantA, "s2", "run-old", store.RunSucceeded, "adaptive", today.AddDate(0, 0, -20), 50000, 1000)
	f.addRun(tenantB, "s1", "run-b", store.RunSucceeded, "adaptive", today.Add(time.Minute), 99000, 1000)
	c := f.signIn(f.keyA)

	tests := []struct {
		days                                 int
		runs, succeeded, over, failed, saved string
	}{
		{7, "3", "1", "1", "1", "12,000"},
		{30, "4", "2", "1", "1", "61,000"},
		{90, "4", "2", "1", "1", "61,000"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.days), func(t *testing.T) {
			a := f.get(fmt.Sprintf("/ui/overview?days=%d", tc.days), c)
			require.Equal(t, http.StatusOK, a.status, a.body)
			require.Contains(t, a.body, `id="total-runs">`+tc.runs+`<`)
			require.Contains(t, a.body, `id="total-succeeded">`+tc.succeeded+`<`)
			require.Contains(t, a.body, `id="total-over-limit">`+tc.over+`<`)
			require.Contains(t, a.body, `id="total-failed">`+tc.failed+`<`)
			require.Contains(t, a.body, `id="total-saved">`+tc.saved+`<`)
			require.Contains(t, a.body, `data-run="run-2"`, "the failure is listed")
			require.NotContains(t, a.body, "run-b")
			for _, chart := range []string{"runs", "tokens"} {
				svg := f.get(fmt.Sprintf("/ui/overview/%s.svg?days=%d", chart, tc.days), c)
				require.Equal(t, http.StatusOK, svg.status)
				texts := svgTexts(t, []byte(svg.body))
				require.Contains(t, texts, today.Format("01-02"), "today is labelled")
			}
		})
	}
	// The default period is 30 days.
	require.Contains(t, f.get("/ui/overview", c).body, `id="total-saved">61,000<`)
}

// listedRuns returns the run ids of a page's runs table, in order.
func listedRuns(body string) []string {
	var ids []string
	for _, part := range strings.Split(body, `data-run="`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

// linkByID returns the href of the element with id, unescaped.
func linkByID(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	require.GreaterOrEqual(t, i, 0, "no #%s", id)
	start := strings.LastIndex(body[:i], `href="`)
	require.GreaterOrEqual(t, start, 0)
	href, _, _ := strings.Cut(body[start+len(`href="`):], `"`)
	return strings.ReplaceAll(href, "&amp;", "&")
}

// TestUISessionExpires: a sign-in ends at its time to live even if the
// browser keeps sending the cookie.
func TestUISessionExpires(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(d *Deps) { d.SessionTTL = 300 * time.Millisecond })
	c := f.signIn(f.keyA)
	require.Equal(t, http.StatusOK, f.get("/ui/overview", c).status)
	require.Eventually(t, func() bool { return f.get("/ui/overview", c).status == http.StatusSeeOther },
		10*time.Second, 100*time.Millisecond, "an expired session signs the browser out")
	// Signing in again opens a new session.
	require.Equal(t, http.StatusOK, f.get("/ui/overview", f.signIn(f.keyA)).status)
}

// TestUIPagesCountAgainstTheTenant: the web UI is under the same tenant
// limits as the API; another tenant is not.
func TestUIPagesCountAgainstTheTenant(t *testing.T) {
	t.Parallel()
	tenants := ratelimit.NewTenants(ratelimit.Limits{RatePerSecond: 0.001, Burst: 3})
	f := newFixtureWith(t, func(d *Deps) { d.Tenants = tenants })
	c := f.signIn(f.keyA)
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusOK, f.get("/ui/overview", c).status, "page %d is within the burst", i+1)
	}
	a := f.get("/ui/overview", c)
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.NotEmpty(t, a.header.Get("Retry-After"))
	require.Contains(t, a.body, "requests per second")
	// An API request of the same tenant shares the bucket.
	_, err := tenants.Acquire(tenantA)
	require.Error(t, err)
	require.Equal(t, http.StatusOK, f.get("/ui/overview", f.signIn(f.keyB)).status, "tenant B has its own limits")
}

// TestFailedSignInsAreLimitedPerAddress: wrong keys and forged sessions
// from one address are refused before any lookup once the address has
// used its failures; the right key waits too, so guessing gains nothing.
func TestFailedSignInsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	failures := ratelimit.NewAuthFailures(3)
	f := newFixtureWith(t, func(d *Deps) { d.AuthFailures = failures })
	good := f.signIn(f.keyA)
	for i := 0; i < 2; i++ {
		a := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {fmt.Sprintf("guess-%d", i)}}, nil)
		require.Equal(t, http.StatusUnauthorized, a.status)
	}
	forged := &http.Cookie{Name: cookieName, Value: base64.RawURLEncoding.EncodeToString(make([]byte, 32))}
	require.Equal(t, http.StatusSeeOther, f.get("/ui/runs", forged).status, "the third failure: a forged session")

	a := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {"guess-3"}}, nil)
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.Contains(t, a.body, "failed authentications")
	require.NotEmpty(t, a.header.Get("Retry-After"))
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyB}}, nil)
	require.Equal(t, http.StatusTooManyRequests, a.status, "no lookup at all while the address is limited")
	require.Equal(t, http.StatusTooManyRequests, f.get("/ui/runs", forged).status)
	// A session opened before is checked like any request from here; a
	// live session is not a failure, but the lookup is refused first.
	require.Equal(t, http.StatusTooManyRequests, f.get("/ui/runs", good).status)
	// The limit applies before the form is read: a huge form from a
	// limited address is refused as such, not parsed.
	a = f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {strings.Repeat("k", 1<<20)}}, nil)
	require.Equal(t, http.StatusTooManyRequests, a.status)
}

// TestSignInFormIsSmall: a sign-in form above the bound is a 400 naming
// the key, read no further.
func TestSignInFormIsSmall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {strings.Repeat("k", maxLoginForm+1)}}, nil)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, a.body, "at most")
	require.Equal(t, http.StatusSeeOther, f.do(http.MethodPost, "/ui/login", nil, url.Values{"key": {f.keyA}}, nil).status, "a real key still signs in")
}

func TestDiffRowsCollapseRunsOfSummarizedMessages(t *testing.T) {
	t.Parallel()
	// changes builds changes from "action×count" specs, numbering the
	// original positions from 0.
	changes := func(specs ...string) []audit.Change {
		var out []audit.Change
		for _, spec := range specs {
			action, count, ok := strings.Cut(spec, "×")
			n := 1
			if ok {
				var err error
				n, err = strconv.Atoi(count)
				require.NoError(t, err)
			}
			for range n {
				out = append(out, audit.Change{Index: len(out), At: strconv.Itoa(len(out)), Action: action, Before: 10})
			}
		}
		return out
	}
	// shape is the rows as "action" for a single row, "action×n" for a
	// collapsed one.
	shape := func(rows []diffRow) []string {
		var out []string
		for _, r := range rows {
			if r.Group != nil {
				out = append(out, fmt.Sprintf("%s×%d", r.Action(), len(r.Group)))
			} else {
				out = append(out, r.Action())
			}
		}
		return out
	}
	tests := []struct {
		name    string
		changes []audit.Change
		want    []string
	}{
		{"nothing", nil, nil},
		{"only kept", changes("kept×5"), nil},
		{"a long summary", changes("kept", "summarized×252", "added", "replaced", "kept×3"), []string{"summarized×252", "added", "replaced"}},
		{"one summarized stays a row", changes("kept", "summarized", "kept"), []string{"summarized"}},
		{"kept messages split a run", changes("summarized×2", "kept", "summarized×3"), []string{"summarized×2", "summarized×3"}},
		{"removed runs too", changes("removed×3", "summarized"), []string{"removed×3", "summarized"}},
		{"actions do not mix", changes("summarized×2", "removed×2"), []string{"summarized×2", "removed×2"}},
		{"replaced and added are never collapsed", changes("replaced×3", "added×2"), []string{"replaced", "replaced", "replaced", "added", "added"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, shape(diffRows(tc.changes)))
		})
	}
	rows := diffRows(changes("kept", "summarized×252", "added"))
	require.Equal(t, "1", rows[0].From())
	require.Equal(t, "252", rows[0].To())
	require.Equal(t, 2520, rows[0].Before())
}

// TestRunPageCollapsesTheDiff: a run that summarized a long stretch of
// the conversation shows it as one row that opens, and the rows worth
// reading (the summary it added) as rows of their own.
func TestRunPageCollapsesTheDiff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msgs := []string{`{"role":"user","content":"fix src/parse.go"}`}
	for i := range 30 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"step %d: %s"}`, i, strings.Repeat("y", 50)))
	}
	orig := `{"messages":[` + strings.Join(msgs, ",") + `,{"role":"assistant","content":"done"}]}`
	out := `{"messages":[` + msgs[0] + `,{"role":"user","content":"Summary of the earlier work: parse.go fixed"},{"role":"assistant","content":"done"}]}`
	f.addRunWith(tenantA, "s1", "run-sum", store.RunSucceeded, "adaptive", time.Now().UTC().Add(-time.Hour), 9000, 1000,
		runExtras{Original: []byte(orig), Output: []byte(out)})
	c := f.signIn(f.keyA)

	page := f.get("/ui/runs/run-sum", c)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, "30 summarized")
	table := page.body[strings.Index(page.body, `<table id="diff">`):]
	require.Contains(t, table, `<tr class="act-summarized collapsed"><td colspan="7"><details><summary><span class="count">30 messages summarized</span> · original #1–#30`)
	require.Equal(t, 1, strings.Count(table, "<details>"), "one collapsed row")
	require.NotContains(t, table, "<details open", "the summarized messages stay folded")
	require.Equal(t, 30, strings.Count(table, `<tr class="act-summarized">`), "each message is inside the fold")
	require.Contains(t, table, `<tr class="act-added">`, "the summary is a row of its own")
}

// TestHandoffDownload: a run's handoff downloads as an attachment for
// its tenant, and is not found for another tenant or a run without one.
func TestHandoffDownload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	started := time.Now().UTC().Add(-time.Hour)
	handoff := []byte(`{"messages":[{"role":"user","content":"continue from the handoff"}]}`)
	f.addRunWith(tenantA, "s1", "run-handoff", store.RunOverLimit, "adaptive", started, 90000, 50000, runExtras{Handoff: handoff})
	f.addRun(tenantA, "s1", "run-plain", store.RunSucceeded, "adaptive", started.Add(time.Minute), 9000, 1000)
	ca, cb := f.signIn(f.keyA), f.signIn(f.keyB)

	page := f.get("/ui/runs/run-handoff", ca)
	require.Contains(t, page.body, `<a href="/ui/runs/run-handoff/handoff" id="dl-handoff" download>Download handoff</a>`)
	require.NotContains(t, f.get("/ui/runs/run-plain", ca).body, `id="dl-handoff"`, "a run without a handoff has no link")

	tests := []struct {
		name   string
		path   string
		cookie *http.Cookie
		status int
	}{
		{"own run", "/ui/runs/run-handoff/handoff", ca, http.StatusOK},
		{"another tenant's run", "/ui/runs/run-handoff/handoff", cb, http.StatusNotFound},
		{"a run without a handoff", "/ui/runs/run-plain/handoff", ca, http.StatusNotFound},
		{"an unknown run", "/ui/runs/run-nope/handoff", ca, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := f.get(tc.path, tc.cookie)
			require.Equal(t, tc.status, a.status, a.body)
			if tc.status != http.StatusOK {
				require.NotContains(t, a.body, "continue from the handoff")
				require.Empty(t, a.header.Get("Content-Disposition"))
				return
			}
			require.Equal(t, string(handoff), a.body)
			require.Equal(t, `attachment; filename=run-handoff-handoff.json`, a.header.Get("Content-Disposition"))
			require.Equal(t, "application/json", a.header.Get("Content-Type"))
			sum := sha256.Sum256(handoff)
			require.Equal(t, hex.EncodeToString(sum[:]), a.header.Get("X-Content-SHA256"))
		})
	}
}

// TestSessionTimelineShowsReplays: a replay is on the session's
// timeline, marked as one, and the page says so.
func TestSessionTimelineShowsReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	start := time.Now().UTC().Add(-time.Hour)
	f.addRun(tenantA, "s1", "run-1", store.RunSucceeded, "adaptive", start, 9000, 2000)
	f.addRunWith(tenantA, "s1", "run-replay", store.RunSucceeded, "three-tier", start.Add(time.Minute), 9000, 3333, runExtras{ReplayOf: "run-1"})
	f.addRun(tenantA, "s1", "run-2", store.RunSucceeded, "adaptive", start.Add(2*time.Minute), 7400, 1234)
	c := f.signIn(f.keyA)

	page := f.get("/ui/sessions/s1", c)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `id="timeline-replays">1 replay is on the plot`)
	require.Equal(t, []string{"run-2", "run-replay", "run-1"}, listedRuns(page.body))

	texts := svgTexts(t, []byte(f.get("/ui/sessions/s1/timeline.svg", c).body))
	for _, want := range []string{"#1", "#2 replay", "#3", "3,333 GREEN", "2,000 GREEN", "1,234 GREEN", "replay (what-if)"} {
		require.Contains(t, texts, want)
	}

	// Without a replay, the page does not mention one.
	f.addRun(tenantA, "s2", "run-3", store.RunSucceeded, "adaptive", start, 9000, 2000)
	require.NotContains(t, f.get("/ui/sessions/s2", c).body, `id="timeline-replays"`)
	require.NotContains(t, svgTexts(t, []byte(f.get("/ui/sessions/s2/timeline.svg", c).body)), "replay (what-if)")
}
