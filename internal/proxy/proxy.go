// Package proxy serves provider-compatible routes in front of an agent's
// own provider, so that an agent that only knows a base URL (Claude Code,
// Codex, anything built on the Anthropic or OpenAI SDKs) gets durable
// compaction by changing that URL: Anthropic Messages under
// /proxy/anthropic and OpenAI Chat Completions under /proxy/openai/v1.
//
// A request under the session's trigger is forwarded as it came and its
// answer streamed back as it arrives. When the conversation that goes
// upstream crosses the trigger, the proxy starts a compaction run in the
// background (the same durable run as an event, of kind "proxy"); once
// its output is committed, every later request that extends the
// conversation goes upstream as that output followed by the messages the
// agent appended since, so that consecutive requests share their prefix
// byte for byte and the provider's cache keeps hitting. Only a request
// that would not fit at all waits for a run in flight, for a bound.
//
// The proxy fails open: when anything of the service fails, the agent's
// request goes upstream unchanged and the X-Compactor-State header says
// why. The agent's credentials and provider headers are forwarded
// untouched and never stored or logged; the tenant is named by
// X-Compactor-Key, which is never forwarded.
//
// One file per protocol: anthropic.go and openai.go read a request and
// write an error in the provider's shape; line.go holds a session's
// spliced state and its compactions.
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Prefix is where the proxy's routes are mounted.
const Prefix = "/proxy/"

// The headers a host sets to steer the proxy. None is forwarded upstream.
const (
	HeaderKey          = "X-Compactor-Key"
	HeaderSession      = "X-Compactor-Session"
	HeaderPreset       = "X-Compactor-Preset"
	HeaderContextLimit = "X-Compactor-Context-Limit"
	// HeaderState is set on every answer: what the proxy did with the
	// request ("forwarded", "spliced; run=…", "compacting; run=…"), or
	// "degraded; <reason>" when it sent the request as it came because
	// something of the service failed, or "refused; <reason>" when the
	// proxy itself answered an error (as opposed to the provider).
	HeaderState = "X-Compactor-State"
)

// Defaults of Config.
const (
	DefaultTrigger   = 0.7
	DefaultTarget    = 0.3
	DefaultSyncEvery = 30 * time.Second
	// DefaultColdAfter is the prompt cache's lifetime at both providers
	// (Anthropic's default, OpenAI's least), and DefaultColdTrigger the
	// share of the limit from which an idle session compacts.
	DefaultColdAfter   = 5 * time.Minute
	DefaultColdTrigger = 0.5
	DefaultWaitFor     = time.Minute
	// DefaultMaxRequestBytes bounds a request body read for splicing.
	DefaultMaxRequestBytes = 32 << 20
)

// Config is the proxy's settings (config.Config's PROXY_* variables).
type Config struct {
	// AnthropicURL and OpenAIURL are the upstreams (PROXY_ANTHROPIC_URL,
	// PROXY_OPENAI_URL): the base URL the agent would call without the
	// proxy, such as https://api.anthropic.com or
	// https://api.openai.com/v1. Empty turns that route off.
	AnthropicURL string
	OpenAIURL    string
	// Trigger is the share of the context limit at which the conversation
	// that goes upstream starts a compaction (PROXY_TRIGGER).
	Trigger float64
	// Target is where a compaction aims, as a share of the limit, for a
	// session whose host names no preset (PROXY_TARGET): its
	// target_usage and history.trigger_usage overrides. 0 leaves the
	// preset's own.
	Target float64
	// WaitFor bounds how long a request that would not fit waits for a
	// compaction in flight before it goes upstream as it is
	// (PROXY_WAIT).
	WaitFor time.Duration
	// SilentWait turns off the interim 102 answers that keep a waiting
	// non-streaming request alive (PROXY_INTERIM=false): for a host whose
	// HTTP client takes an interim answer for the answer (Python's
	// http.client, under requests and urllib3).
	SilentWait bool
	// ColdAfter is how long a session goes without a request before the
	// provider's prompt cache of it is taken for expired
	// (PROXY_COLD_AFTER; zero: never), and ColdTrigger the share of the
	// limit from which such an idle session compacts then
	// (PROXY_COLD_TRIGGER), below Trigger: the host's next request is
	// written to the cache whole anyway, so it had better be the smaller
	// conversation.
	ColdAfter   time.Duration
	ColdTrigger float64
	// Preset is the preset of a session whose host sends no
	// X-Compactor-Preset ("" is the deployment's default).
	Preset string
	// Limits are the model table for a host that sends no
	// X-Compactor-Context-Limit.
	Limits tokens.Limits
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// SyncEvery is how often a session's line checks its output against
	// the store (DefaultSyncEvery when zero): the session's latest output
	// may have moved (another API process compacted it, a replay was
	// promoted) or be gone (the session was erased: its output is never
	// sent again).
	SyncEvery time.Duration
}

// Compactor starts and waits for compaction runs (a *gateway.Gateway).
type Compactor interface {
	Submit(ctx context.Context, ev gateway.Event) (gateway.Submitted, error)
	Wait(ctx context.Context, runID string) (contract.Outcome, error)
}

// Outputs reads a committed run's output, checked against what the store
// recorded for the tenant (runview.Reader through an adapter).
type Outputs func(ctx context.Context, tenant, runID string) ([]byte, error)

// Latest is tenant's session's latest output as the store recorded it:
// its run, that run's event id and the output's SHA-256 (all "" when the
// session has none yet).
type Latest func(ctx context.Context, tenant, session string) (runID, eventID, sha256 string, err error)

// Authenticator names the tenant of a compactor key. An *AuthError
// refuses the request (an unknown key, too many failed attempts); any
// other error means the keys cannot be read now (Postgres is out), and
// the proxy fails open: the request goes upstream as it came, and the
// state header says so.
type Authenticator func(r *http.Request, key string) (tenant string, err error)

// AuthError is a refused compactor key.
type AuthError struct {
	Status     int // 401, or 429 when the failed-auth limit refuses
	Message    string
	RetryAfter time.Duration
}

func (e *AuthError) Error() string { return e.Message }

// Deps are what the proxy needs.
type Deps struct {
	Compactor    Compactor
	Outputs      Outputs
	Authenticate Authenticator
	// Latest, when set, lets a line the process does not know yet start
	// from the session's latest output (after a restart, or on another
	// API process).
	Latest Latest
	// Recover, when set, answers the recover tool the proxy offers on a
	// request whose spliced conversation names it (recover.go).
	Recover Recover
	// Snapshots, when set, records each session's latest state between
	// compactions (snapshot.go), off the hot path.
	Snapshots Snapshots
	// Transport reaches the upstreams (http.DefaultTransport when nil).
	Transport http.RoundTripper
	// Logger never receives a request's body or headers.
	Logger *slog.Logger
	// Metrics count the requests by upstream and state (nil: none).
	Metrics *metrics.Metrics
}

// Proxy is the handler of the proxy routes.
type Proxy struct {
	cfg       Config
	deps      Deps
	log       *slog.Logger
	lines     *lines
	snapshots *snapshotWriter // nil without Deps.Snapshots
	anthropic *upstream
	openai    *upstream
}

// upstream is one provider's route.
type upstream struct {
	name   string // "anthropic", "openai"
	prefix string // the route's path prefix, stripped before forwarding
	target *url.URL
	proto  protocol
	rp     *httputil.ReverseProxy
}

// New builds the proxy. An upstream URL that does not parse is an error
// naming its variable.
func New(cfg Config, deps Deps) (*Proxy, error) {
	if cfg.Trigger <= 0 || cfg.Trigger > 1 {
		cfg.Trigger = DefaultTrigger
	}
	if cfg.WaitFor <= 0 {
		cfg.WaitFor = DefaultWaitFor
	}
	if cfg.ColdTrigger <= 0 || cfg.ColdTrigger > cfg.Trigger {
		cfg.ColdTrigger = min(DefaultColdTrigger, cfg.Trigger)
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = DefaultSyncEvery
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Limits.Windows == nil {
		cfg.Limits = tokens.DefaultLimits()
	}
	if deps.Transport == nil {
		deps.Transport = http.DefaultTransport
	}
	p := &Proxy{cfg: cfg, deps: deps, log: deps.Logger, lines: newLines()}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if deps.Snapshots != nil {
		p.snapshots = newSnapshotWriter(deps.Snapshots, p.log, deps.Metrics)
	}
	var err error
	if p.anthropic, err = p.newUpstream("anthropic", "PROXY_ANTHROPIC_URL", cfg.AnthropicURL, anthropicProtocol{}); err != nil {
		return nil, err
	}
	if p.openai, err = p.newUpstream("openai", "PROXY_OPENAI_URL", cfg.OpenAIURL, openAIProtocol{}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) newUpstream(name, variable, raw string, proto protocol) (*upstream, error) {
	u := &upstream{name: name, prefix: Prefix + name, proto: proto}
	if name == "openai" {
		u.prefix = Prefix + "openai/v1"
	}
	if raw == "" {
		return u, nil
	}
	target, err := url.Parse(raw)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("%s: %q is not an http(s) URL", variable, raw)
	}
	u.target = target
	u.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL, pr.Out.Host = u.upstreamURL(pr.In.URL), ""
			for k := range pr.Out.Header {
				if compactorHeader(k) {
					pr.Out.Header.Del(k)
				}
			}
			if f, ok := pr.In.Context().Value(forwardKey{}).(*forward); ok && f.body != nil {
				pr.Out.Body = io.NopCloser(bytes.NewReader(f.body))
				pr.Out.ContentLength = int64(len(f.body))
				pr.Out.Header.Set("Content-Length", strconv.Itoa(len(f.body)))
				pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.body)), nil }
			}
		},
		// Every chunk goes to the agent as it arrives: a stream is the
		// agent's, not the proxy's to buffer.
		FlushInterval: -1,
		Transport:     p.deps.Transport,
		ModifyResponse: func(resp *http.Response) error {
			if f, ok := resp.Request.Context().Value(forwardKey{}).(*forward); ok {
				resp.Header.Set(HeaderState, f.state)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the agent went away
			}
			p.log.Warn("proxy: upstream unreachable", "upstream", name, "error", err)
			proto.fail(w, http.StatusBadGateway, "refused; upstream unreachable",
				fmt.Sprintf("the compactor's proxy could not reach the %s upstream (%s)", name, target.Host))
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return u, nil
}

// protoFor is the protocol of the route rest: OpenAI's Responses API
// under the OpenAI upstream, else the upstream's own.
func (u *upstream) protoFor(rest string) protocol {
	if u.name == "openai" && rest == "/responses" {
		return responsesProtocol{}
	}
	return u.proto
}

// upstreamURL is where a request to in goes: the route's path after its
// prefix under the upstream's base URL, with in's query.
func (u *upstream) upstreamURL(in *url.URL) *url.URL {
	out := *u.target
	out.Path = strings.TrimSuffix(out.Path, "/") + strings.TrimPrefix(in.Path, u.prefix)
	out.RawPath = ""
	out.RawQuery = in.RawQuery
	return &out
}

// compactorHeader reports whether header k is one of the compactor's
// own (X-Compactor-*), which are never forwarded.
func compactorHeader(k string) bool {
	return strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Compactor-")
}

// forwardKey carries a request's forward through the reverse proxy.
type forwardKey struct{}

// forward is what goes upstream for one request: the body (nil: the
// request's own) and the state header of the answer.
type forward struct {
	body  []byte
	state string
}

// ServeHTTP answers the routes under Prefix.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var u *upstream
	switch {
	case r.URL.Path == p.anthropic.prefix || strings.HasPrefix(r.URL.Path, p.anthropic.prefix+"/"):
		u = p.anthropic
	case r.URL.Path == p.openai.prefix || strings.HasPrefix(r.URL.Path, p.openai.prefix+"/"):
		u = p.openai
	default:
		http.Error(w, "no such proxy route: use "+Prefix+"anthropic/v1/… or "+Prefix+"openai/v1/…", http.StatusNotFound)
		return
	}
	// Counted by what the answer's state header says, whichever path
	// wrote it, as its status goes out: before the host can read the
	// answer, so that a host (or a test) that reads the metrics after an
	// answer finds it counted.
	cw := &countingWriter{ResponseWriter: w, count: func(state string) { p.deps.Metrics.Proxy(u.name, state) }}
	w = cw
	defer cw.counted()
	if u.target == nil {
		variable := "PROXY_ANTHROPIC_URL"
		if u.name == "openai" {
			variable = "PROXY_OPENAI_URL"
		}
		u.proto.fail(w, http.StatusNotFound, "refused; route off",
			fmt.Sprintf("the compactor's %s proxy is off: set %s to the provider's base URL to turn it on", u.name, variable))
		return
	}
	if r.Method == http.MethodHead && strings.Trim(strings.TrimPrefix(r.URL.Path, u.prefix), "/") == "" {
		// A host's connectivity check of its base URL (Claude Code's
		// HEAD /), which carries none of its headers: answered here,
		// never forwarded.
		w.Header().Set(HeaderState, "answered; connectivity check")
		w.WriteHeader(http.StatusOK)
		return
	}
	key := strings.TrimSpace(r.Header.Get(HeaderKey))
	if key == "" {
		u.proto.fail(w, http.StatusUnauthorized, "refused; missing "+HeaderKey,
			"missing "+HeaderKey+": send the compactor's API key in it (the provider's key stays in its own header)")
		return
	}
	tenant, err := p.deps.Authenticate(r, key)
	var refused *AuthError
	switch {
	case errors.As(err, &refused):
		if refused.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(refused.RetryAfter.Seconds()+0.5))))
		}
		u.proto.fail(w, refused.Status, "refused; "+HeaderKey, HeaderKey+": "+refused.Message)
		return
	case err != nil:
		p.log.Warn("proxy: compactor keys unreadable; forwarding as it came", "error", err)
		p.pass(&streamWriter{ResponseWriter: w}, r, u, "degraded; the compactor could not check "+HeaderKey+" (its store is unavailable): forwarded as it came")
		return
	}
	w = &streamWriter{ResponseWriter: w}
	rest := strings.TrimPrefix(r.URL.Path, u.prefix)
	if r.Method == http.MethodPost {
		proto := u.protoFor(rest)
		if kind := proto.route(rest); kind != routePass {
			p.compacting(w, r, u, proto, tenant, kind)
			return
		}
	}
	p.pass(w, r, u, "forwarded")
}

// pass forwards the request as it came.
func (p *Proxy) pass(w http.ResponseWriter, r *http.Request, u *upstream, state string) {
	p.send(w, r, u, nil, state)
}

// send forwards the request with body (nil: its own).
func (p *Proxy) send(w http.ResponseWriter, r *http.Request, u *upstream, body []byte, state string) {
	r = r.WithContext(context.WithValue(r.Context(), forwardKey{}, &forward{body: body, state: state}))
	u.rp.ServeHTTP(w, r)
}

// compacting serves a request that carries a conversation: it reads it,
// splices in the session's latest output, starts a compaction when the
// result crosses the trigger, and forwards it.
func (p *Proxy) compacting(w http.ResponseWriter, r *http.Request, u *upstream, proto protocol, tenant string, kind routeKind) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			proto.fail(w, http.StatusRequestEntityTooLarge, "refused; request too large",
				fmt.Sprintf("request body is over the compactor's limit of %d bytes (MAX_REQUEST_BYTES)", p.cfg.MaxRequestBytes))
			return
		}
		return // the agent went away mid-body
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	req, err := proto.parse(body, kind)
	if err != nil {
		// What the proxy cannot read is the provider's to judge.
		p.send(w, r, u, body, "forwarded; not compacted: "+err.Error())
		return
	}
	if req.pass != "" {
		p.send(w, r, u, body, "forwarded; "+req.pass)
		return
	}
	sess, sessionNamed, err := sessionOf(r, req, tenant)
	if err != nil {
		proto.fail(w, http.StatusBadRequest, "refused; "+HeaderSession, err.Error())
		return
	}
	limit, err := p.limitOf(r, req.model)
	if err != nil {
		proto.fail(w, http.StatusBadRequest, "refused; "+HeaderContextLimit, err.Error())
		return
	}
	preset := r.Header.Get(HeaderPreset)
	named := preset != ""
	if !named {
		preset = p.cfg.Preset
	}
	t := turn{proto: proto, tenant: tenant, session: sess, body: body, req: req, limit: limit, preset: preset,
		presetNamed: named, counting: kind == routeCount}
	var ka *keepAlive
	if kind == routeMessages && (req.stream || !p.cfg.SilentWait) {
		ka = &keepAlive{w: w, proto: proto, stream: req.stream}
		t.hold = ka.start
	}
	out, state := p.lines.get(tenant, sess, req.shape, !sessionNamed && kind == routeCount).serve(r.Context(), p, t)
	up := out
	if up == nil {
		up = body
	}
	if p.deps.Recover != nil && offersRecovery(up) {
		if kind == routeMessages {
			p.sendRecovering(w, r, u, t, up, state, ka != nil && ka.started)
			return
		}
		// A count is of the request as it will go, the recover tool
		// the proxy offers included.
		if offered, ok := proto.reply().offer(up); ok {
			out = offered
		}
	}
	if ka != nil && ka.started {
		p.sendHeld(w, r, u, proto, out, state)
		return
	}
	p.send(w, r, u, out, state)
}

// pingEvery is how often a held stream is pinged while its request
// waits for a compaction.
const pingEvery = 5 * time.Second

// keepAlive holds a request's answer open while the request waits for
// its session's compaction, so that the host's watchdog (or an idle
// timeout between the host and the proxy) sees a live answer rather than
// a proxy that went silent. A streaming answer opens at once and gets a
// ping every pingEvery; its state goes in a trailer, since the headers
// left before it was known. A non-streaming one gets an HTTP interim
// answer, 102 Processing, every pingEvery instead: clients read past
// interim answers (net/http, Node's http and fetch, httpx under both
// official Python SDKs), and the final status stays the provider's. Python's
// http.client (requests, urllib3) does not: Config.SilentWait turns them
// off.
type keepAlive struct {
	w       http.ResponseWriter
	proto   protocol
	stream  bool
	started bool // the stream opened: the answer's status has left
	done    chan struct{}
	stopped chan struct{}
}

// start opens the stream, or sends the first interim answer, and pings
// until the release it returns is called.
func (k *keepAlive) start() func() {
	if k.stream {
		k.started = true
		h := k.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Trailer", HeaderState)
		k.w.WriteHeader(http.StatusOK)
	}
	k.ping()
	k.done, k.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(k.stopped)
		tick := time.NewTicker(pingEvery)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-tick.C:
				k.ping()
			}
		}
	}()
	return func() {
		close(k.done)
		<-k.stopped
	}
}

func (k *keepAlive) ping() {
	if !k.stream {
		k.w.WriteHeader(http.StatusProcessing)
		return
	}
	_, _ = io.WriteString(k.w, k.proto.ping())
	_ = http.NewResponseController(k.w).Flush()
}

// sendHeld forwards a request whose stream is already open (keepAlive):
// the provider's stream is copied on as it arrives; an error of the
// provider becomes an error event of the stream, its status and body
// kept in it, since the headers have left. The state is the trailer.
func (p *Proxy) sendHeld(w http.ResponseWriter, r *http.Request, u *upstream, proto protocol, body []byte, state string) {
	defer func() { w.Header().Set(HeaderState, state) }()
	if body == nil {
		body, _ = io.ReadAll(r.Body)
	}
	resp, err := p.roundTrip(r, u, body)
	if err != nil {
		state = "refused; upstream unreachable"
		_, _ = io.WriteString(w, proto.streamError([]byte(err.Error())))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		state += fmt.Sprintf("; upstream answered %d", resp.StatusCode)
		_, _ = io.WriteString(w, proto.streamError(msg))
		return
	}
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				// The provider's stream broke off: the host is told, not
				// left with an answer that looks whole.
				state += "; upstream stream broke off"
				_, _ = io.WriteString(w, proto.streamError([]byte("the upstream's stream broke off: "+err.Error())))
			}
			return
		}
	}
}

// limitOf is the session's context limit: the host's header, else the
// model table.
func (p *Proxy) limitOf(r *http.Request, model string) (int, error) {
	if v := r.Header.Get(HeaderContextLimit); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > gateway.MaxContextLimit {
			return 0, fmt.Errorf("%s: %q is not a whole number of tokens between 1 and %d", HeaderContextLimit, v, gateway.MaxContextLimit)
		}
		return n, nil
	}
	return p.cfg.Limits.For(model), nil
}

// sessionOf is the session a request belongs to: the host's header
// (named), else one derived from what the request says of its thread
// (see request.thread).
func sessionOf(r *http.Request, req request, tenant string) (session string, named bool, err error) {
	if v := r.Header.Get(HeaderSession); v != "" {
		if err := idcheck.Session(v); err != nil {
			return "", true, fmt.Errorf("%s: %w", HeaderSession, err)
		}
		return v, true, nil
	}
	return "proxy-" + req.thread[:16], false, nil
}

// countingWriter counts an answer once, by its state header, when its
// status goes out (or when the handler ends without writing).
type countingWriter struct {
	http.ResponseWriter
	once  sync.Once
	count func(state string)
}

func (c *countingWriter) counted() {
	c.once.Do(func() { c.count(c.Header().Get(HeaderState)) })
}

func (c *countingWriter) WriteHeader(code int) {
	if code >= http.StatusOK { // an interim answer (keepAlive) is not the answer
		c.counted()
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.counted()
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// streamWriter keeps a stream that is still flowing from the server's
// write timeout: each chunk pushes the deadline on. A stream that stops
// for longer than streamIdle still ends.
type streamWriter struct {
	http.ResponseWriter
}

// streamIdle is how long a stream may send nothing before the server's
// timeout may cut it.
const streamIdle = 5 * time.Minute

func (s *streamWriter) Write(b []byte) (int, error) {
	_ = http.NewResponseController(s.ResponseWriter).SetWriteDeadline(time.Now().Add(streamIdle))
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes)
// reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// errorJSON marshals v for an error answer.
func errorJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
