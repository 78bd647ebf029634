package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/metrics"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// upstreamCall is one request the fake provider received.
type upstreamCall struct {
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// fakeUpstream speaks enough of a provider's wire protocol: a JSON answer,
// or an SSE stream when the request asks for one, and whatever answer
// the test scripts next.
type fakeUpstream struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	calls []upstreamCall
	// next, when set, answers the next request instead; then queue, in
	// order, answers the requests after it.
	next  func(w http.ResponseWriter, r *http.Request)
	queue []func(w http.ResponseWriter, r *http.Request)
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	f := &fakeUpstream{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls = append(f.calls, upstreamCall{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		next := f.next
		f.next = nil
		if next == nil && len(f.queue) > 0 {
			next, f.queue = f.queue[0], f.queue[1:]
		}
		f.mu.Unlock()
		if next != nil {
			next(w, r)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{"message_start", "content_block_delta", "message_stop"} {
				fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q}\n\n", ev, ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_upstream")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":7,"output_tokens":1}}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeUpstream) last() upstreamCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(f.t, f.calls, "the upstream got no request")
	return f.calls[len(f.calls)-1]
}

func (f *fakeUpstream) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeCompactor stands in for the gateway and its runs: a run's output
// keeps the system prompt, a summary message and the last two messages
// of the conversation it was given (the base's output and the appended
// messages, for an incremental event).
type fakeCompactor struct {
	mu      sync.Mutex
	events  []gateway.Event
	outputs map[string][]byte
	// submitErr fails every submission; hold, when set, keeps Wait until
	// it is closed.
	submitErr error
	hold      chan struct{}
}

func newFakeCompactor() *fakeCompactor { return &fakeCompactor{outputs: map[string][]byte{}} }

func (c *fakeCompactor) Submit(_ context.Context, ev gateway.Event) (gateway.Submitted, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.submitErr != nil {
		return gateway.Submitted{}, c.submitErr
	}
	c.events = append(c.events, ev)
	var doc struct {
		System   json.RawMessage   `json:"system,omitempty"`
		Messages []json.RawMessage `json:"messages"`
	}
	if ev.Base != nil {
		base, ok := c.outputs[ev.Base.RunID]
		if !ok {
			return gateway.Submitted{}, &gateway.InputError{Field: "base.run_id", Err: errors.New("not an output of this session")}
		}
		if err := json.Unmarshal(base, &doc); err != nil {
			return gateway.Submitted{}, err
		}
		var more []json.RawMessage
		if err := json.Unmarshal(ev.Messages, &more); err != nil {
			return gateway.Submitted{}, err
		}
		doc.Messages = append(doc.Messages, more...)
	} else if err := json.Unmarshal(ev.Conversation, &doc); err != nil {
		return gateway.Submitted{}, err
	}
	runID := fmt.Sprintf("run-%d", len(c.events))
	summary := fmt.Sprintf(`{"role":"user","content":"Summary by %s of %d messages."}`, runID, len(doc.Messages)-2)
	doc.Messages = append([]json.RawMessage{json.RawMessage(summary)}, doc.Messages[len(doc.Messages)-2:]...)
	out, err := json.Marshal(doc)
	if err != nil {
		return gateway.Submitted{}, err
	}
	c.outputs[runID] = out
	return gateway.Submitted{RunID: runID}, nil
}

func (c *fakeCompactor) Wait(ctx context.Context, runID string) (contract.Outcome, error) {
	c.mu.Lock()
	hold := c.hold
	c.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return contract.Outcome{}, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := sha256.Sum256(c.outputs[runID])
	return contract.Outcome{RunID: runID, Status: "succeeded", OutputSHA256: hex.EncodeToString(sum[:])}, nil
}

func (c *fakeCompactor) output(_ context.Context, tenant, runID string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tenant != "acme" {
		return nil, errors.New("not this tenant's run")
	}
	return c.outputs[runID], nil
}

func (c *fakeCompactor) submitted() []gateway.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]gateway.Event(nil), c.events...)
}

// testProxy is a proxy in front of a fake Anthropic and a fake OpenAI
// upstream; the key "good" is tenant acme's.
type testProxy struct {
	url        string
	anthropic  *fakeUpstream
	openai     *fakeUpstream
	compactor  *fakeCompactor
	authFailed int
	metrics    *metrics.Metrics
	// texts are what the recover tool reads back, by id; recovers are
	// the tenant/session/id of each call.
	texts    map[string]string
	recovers []string
	mu       *sync.Mutex
	snaps    *memSnapshots
}

func newTestProxy(t *testing.T, tune func(*Config)) *testProxy {
	t.Helper()
	tp := &testProxy{anthropic: newFakeUpstream(t), openai: newFakeUpstream(t), compactor: newFakeCompactor(), snaps: &memSnapshots{}}
	cfg := Config{AnthropicURL: tp.anthropic.srv.URL, OpenAIURL: tp.openai.srv.URL + "/v1", WaitFor: 5 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	var mu sync.Mutex
	tp.metrics = metrics.New()
	tp.texts, tp.mu = map[string]string{}, &sync.Mutex{}
	recover := func(_ context.Context, tenant, session, id, lines string) ([]byte, int, error) {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		tp.recovers = append(tp.recovers, tenant+"/"+session+"/"+id+"/"+lines)
		text, ok := tp.texts[id]
		if !ok || tenant != "acme" {
			return nil, 0, errors.New("id: not found")
		}
		return []byte(text), strings.Count(text, "\n") + 1, nil
	}
	p, err := New(cfg, Deps{Compactor: tp.compactor, Outputs: tp.compactor.output, Metrics: tp.metrics, Recover: recover, Snapshots: tp.snaps,
		Authenticate: func(_ *http.Request, key string) (string, error) {
			switch key {
			case "good":
				return "acme", nil
			case "store-down":
				return "", errors.New("connection refused")
			}
			mu.Lock()
			tp.authFailed++
			mu.Unlock()
			return "", &AuthError{Status: http.StatusUnauthorized, Message: "unknown, expired or revoked API key"}
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	tp.url = srv.URL
	return tp
}

// post sends body to path with the compactor key, a context limit and
// the agent's own provider headers.
func (tp *testProxy) post(t *testing.T, path, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tp.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderKey, "good")
	req.Header.Set("X-Api-Key", "sk-ant-agent")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "prompt-caching-2024-07-31")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// postCounting is post that also counts the interim (1xx) answers that
// came before the answer.
func (tp *testProxy) postCounting(t *testing.T, path, body string, header map[string]string) (*http.Response, int) {
	t.Helper()
	var interim atomic.Int32
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code == http.StatusProcessing {
			interim.Add(1)
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, tp.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderKey, "good")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, int(interim.Load())
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// anthropicBody is a Messages request with a system prompt and n
// messages of about 60 tokens each, alternating user and assistant.
func anthropicBody(n int, stream bool) string {
	msgs := make([]string, n)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = fmt.Sprintf(`{"role":%q,"content":"Turn %d: %s"}`, role, i, strings.Repeat("the build fails in module parser again ", 6))
	}
	return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":%t,"system":"You are a coding agent. Task: fix the parser.","messages":[%s],"tools":[{"name":"bash","input_schema":{"type":"object"}}]}`,
		stream, strings.Join(msgs, ","))
}

func TestRouteOffSaysWhichVariable(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, func(c *Config) { c.OpenAIURL = "" })
	resp := tp.post(t, "/proxy/openai/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, readAll(t, resp), "PROXY_OPENAI_URL")
	require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "refused"))
	require.Zero(t, tp.openai.count())
}

func TestKeyRefusalsInTheProviderShape(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	for _, tc := range []struct {
		name, key string
		status    int
		says      string
	}{
		{"missing", "", http.StatusUnauthorized, "missing X-Compactor-Key"},
		{"unknown", "bad", http.StatusUnauthorized, "unknown, expired or revoked"},
	} {
		resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), map[string]string{HeaderKey: tc.key})
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &e), tc.name)
		require.Equal(t, "error", e.Type, tc.name)
		require.Equal(t, "authentication_error", e.Error.Type, tc.name)
		require.Contains(t, e.Error.Message, tc.says, tc.name)
	}
	require.Zero(t, tp.anthropic.count(), "a refused request never reaches the provider")
	require.Equal(t, 1, tp.authFailed, "only the bad key counts as a failed authentication")
}

func TestUnderTheTriggerForwardsByteForByte(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	body := anthropicBody(4, false)
	resp := tp.post(t, "/proxy/anthropic/v1/messages?beta=true", body, map[string]string{HeaderContextLimit: "100000"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, readAll(t, resp), `"input_tokens":7`, "usage passes through unchanged")
	require.Equal(t, "req_upstream", resp.Header.Get("Request-Id"))
	require.Equal(t, "forwarded", resp.Header.Get(HeaderState))

	got := tp.anthropic.last()
	require.Equal(t, "/v1/messages", got.Path)
	require.Equal(t, "beta=true", got.Query)
	require.Equal(t, body, string(got.Body))
	require.Equal(t, "sk-ant-agent", got.Header.Get("X-Api-Key"))
	require.Equal(t, "2023-06-01", got.Header.Get("Anthropic-Version"))
	require.Equal(t, "prompt-caching-2024-07-31", got.Header.Get("Anthropic-Beta"))
	require.Empty(t, got.Header.Get(HeaderKey), "the compactor's key is never forwarded")
	require.Empty(t, got.Header.Get(HeaderContextLimit))
	require.Empty(t, tp.compactor.submitted())
}

func TestStreamReachesTheAgentChunkByChunk(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	release := make(chan struct{})
	tp.anthropic.next = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		<-release // the rest only once the agent has read the first event
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, true), nil)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: message_start\n", line, "the first event arrives while the upstream still holds the rest")
	close(release)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Contains(t, string(rest), "message_stop")
}

func TestUpstreamErrorsReachTheAgentUnchanged(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.anthropic.next = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "17")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "17", resp.Header.Get("Retry-After"))
	require.JSONEq(t, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, readAll(t, resp))
}

// waitSubmitted waits for the background compactions to have been
// submitted and spliced (n of them).
func (tp *testProxy) settle(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(tp.compactor.submitted()) >= n }, 5*time.Second, 5*time.Millisecond)
}

func TestCrossingTheTriggerCompactsAndLaterTurnsAreSpliced(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	limit := map[string]string{HeaderContextLimit: "900", HeaderSession: "s1"}

	// 10 messages of ~60 tokens: over 0.7 × 900. Forwarded whole, and a
	// compaction starts behind it.
	first := anthropicBody(10, false)
	resp := tp.post(t, "/proxy/anthropic/v1/messages", first, limit)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, first, string(tp.anthropic.last().Body), "the crossing request itself does not wait")
	tp.settle(t, 1)
	ev := tp.compactor.submitted()[0]
	require.Equal(t, gateway.KindProxy, ev.Kind)
	require.Equal(t, "acme", ev.Tenant)
	require.Equal(t, "s1", ev.Session)
	require.Less(t, ev.ContextLimit, 800, "the run gets the room the tool definitions leave, the recover tool's included")
	require.Greater(t, ev.ContextLimit, 700)
	require.Nil(t, ev.Base, "the first compaction sends the whole conversation")
	require.JSONEq(t, first, string(ev.Conversation))

	// The next turn extends the conversation by two messages: it goes
	// upstream as the run's output and the two new messages.
	var second string
	require.Eventually(t, func() bool {
		second = anthropicBody(12, false)
		resp = tp.post(t, "/proxy/anthropic/v1/messages", second, limit)
		return strings.HasPrefix(resp.Header.Get(HeaderState), "spliced; run=run-1")
	}, 5*time.Second, 10*time.Millisecond)
	sent := tp.anthropic.last().Body
	msgs := convtest.Messages(t, sent)
	host := convtest.Messages(t, []byte(second))
	require.Len(t, msgs, 3+2)
	require.Contains(t, string(msgs[0]), "Summary by run-1 of 8 messages")
	require.Equal(t, string(host[10]), string(msgs[3]), "appended messages go as the host encoded them")
	require.Equal(t, string(host[11]), string(msgs[4]))
	require.Contains(t, string(sent), `"tools":[{"name":"bash"`, "every other field is the host's")
	require.Contains(t, string(sent), `"max_tokens":1024`)

	// A third turn shares the second's upstream body as its prefix, byte
	// for byte, up to where the host appended.
	third := anthropicBody(14, false)
	resp = tp.post(t, "/proxy/anthropic/v1/messages", third, limit)
	require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "spliced; run=run-1"), resp.Header.Get(HeaderState))
	sent3 := tp.anthropic.last().Body
	cut := strings.Index(string(sent), string(msgs[4])) + len(msgs[4])
	require.Equal(t, string(sent[:cut]), string(sent3[:cut]), "consecutive upstream requests share their prefix")

	// The spliced conversation crosses the trigger again: the next
	// compaction is incremental, on run-1's output, with only what the
	// host appended since the first.
	for i := 16; len(tp.compactor.submitted()) < 2 && i < 40; i += 2 {
		resp = tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(i, false), limit)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	tp.settle(t, 2)
	ev = tp.compactor.submitted()[1]
	require.NotNil(t, ev.Base)
	require.Equal(t, "run-1", ev.Base.RunID)
	var delta []json.RawMessage
	require.NoError(t, json.Unmarshal(ev.Messages, &delta))
	require.NotEmpty(t, delta)
	require.Contains(t, string(delta[0]), "Turn 10:", "the delta starts where run-1's conversation ended")
}

func TestARequestThatDoesNotExtendGoesWhole(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "s2"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(11, false), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)

	// The host rewinds: its first message is another one now.
	rewound := strings.Replace(anthropicBody(6, false), "Turn 0:", "Turn zero, rewritten:", 1)
	resp := tp.post(t, "/proxy/anthropic/v1/messages", rewound, h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "forwarded", resp.Header.Get(HeaderState))
	require.Equal(t, rewound, string(tp.anthropic.last().Body))
}

func TestCountTokensAnswersForWhatGoesUpstream(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "900"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(11, false), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)

	// A count carries no max_tokens nor metadata: it finds its session
	// by the conversation's start.
	count := strings.Replace(anthropicBody(11, false), `"max_tokens":1024,"stream":false,`, "", 1)
	resp := tp.post(t, "/proxy/anthropic/v1/messages/count_tokens", count, h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := tp.anthropic.last()
	require.Equal(t, "/v1/messages/count_tokens", got.Path)
	require.Len(t, convtest.Messages(t, got.Body), 3+1, "the count is of the spliced conversation")
	require.Len(t, tp.compactor.submitted(), 1, "a count never starts a compaction")
}

func TestFailsOpenWhenTheServiceFails(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.compactor.submitErr = errors.New("postgres: connection refused")
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "s3"}
	body := anthropicBody(10, false)
	tp.post(t, "/proxy/anthropic/v1/messages", body, h)
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp = tp.post(t, "/proxy/anthropic/v1/messages", body, h)
		return strings.HasPrefix(resp.Header.Get(HeaderState), "degraded; start a compaction")
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, body, string(tp.anthropic.last().Body))

	// Keys that cannot be read: the request still goes, as it came.
	resp = tp.post(t, "/proxy/anthropic/v1/messages", body, map[string]string{HeaderKey: "store-down"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "degraded; the compactor could not check"))
}

func TestARequestThatWouldNotFitWaitsForTheRunInFlight(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.compactor.hold = make(chan struct{})
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "s4"}
	resp, interim := tp.postCounting(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Zero(t, interim, "a request that does not wait gets no interim answer")
	tp.settle(t, 1)

	// 16 messages do not fit in 900 tokens: the request waits for the
	// run, and goes spliced once it ends. Meanwhile the non-streaming
	// request is kept alive with 102 Processing; its status is still the
	// provider's.
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(tp.compactor.hold)
	}()
	resp, interim = tp.postCounting(t, "/proxy/anthropic/v1/messages", anthropicBody(16, false), h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.GreaterOrEqual(t, interim, 1, "the wait is kept alive with 102 Processing")
	require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "spliced; run=run-1"), resp.Header.Get(HeaderState))
	require.Contains(t, resp.Header.Get(HeaderState), "; waited ", "the state says the request waited")
	require.Len(t, convtest.Messages(t, tp.anthropic.last().Body), 3+6)
}

func TestOpenAIChatIsSplicedAndTheRestPassesThrough(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	chat := func(n int) string {
		msgs := []string{`{"role":"system","content":"You are a coding agent."}`}
		for i := 0; i < n; i++ {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"Turn %d: %s"}`, role, i, strings.Repeat("the build fails in module parser again ", 6)))
		}
		return fmt.Sprintf(`{"model":"gpt-4o","stream":false,"messages":[%s]}`, strings.Join(msgs, ","))
	}
	h := map[string]string{HeaderContextLimit: "700", "Authorization": "Bearer sk-agent"}
	tp.post(t, "/proxy/openai/v1/chat/completions", chat(10), h)
	tp.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/openai/v1/chat/completions", chat(12), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	got := tp.openai.last()
	require.Equal(t, "/v1/chat/completions", got.Path)
	require.Equal(t, "Bearer sk-agent", got.Header.Get("Authorization"))
	require.Len(t, convtest.Messages(t, got.Body), 3+2)

	// A Responses request on the provider's own state goes as it came.
	resp := tp.post(t, "/proxy/openai/v1/responses", `{"model":"gpt-4o","previous_response_id":"resp_1","input":[{"role":"user","content":"go on"}]}`, h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get(HeaderState), "previous_response_id")
	require.Equal(t, "/v1/responses", tp.openai.last().Path)

	req, err := http.NewRequest(http.MethodGet, tp.url+"/proxy/openai/v1/models", nil)
	require.NoError(t, err)
	req.Header.Set(HeaderKey, "good")
	models, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer models.Body.Close()
	require.Equal(t, http.StatusOK, models.StatusCode)
	require.Equal(t, "/v1/models", tp.openai.last().Path)
}

func TestUnreadableRequestsGoUpstreamUnchanged(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	for _, body := range []string{`{"model":"claude-sonnet-4-5","messages":`, `{"model":"claude-sonnet-4-5"}`, `[1,2]`} {
		resp := tp.post(t, "/proxy/anthropic/v1/messages", body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "forwarded; not compacted"), resp.Header.Get(HeaderState))
		require.Equal(t, body, string(tp.anthropic.last().Body))
	}
}

func TestBadSteeringHeadersAreNamed(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	for _, tc := range []struct{ header, value string }{
		{HeaderContextLimit, "lots"},
		{HeaderContextLimit, "0"},
		{HeaderSession, "bad\u200bname"},
	} {
		resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), map[string]string{tc.header: tc.value})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.header)
		require.Contains(t, readAll(t, resp), tc.header)
	}
	require.Zero(t, tp.anthropic.count())
}

func TestSetFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		set        map[string]json.RawMessage
		want       string
	}{
		{"replaces in place", `{"a":1, "messages" : [1,2],"z":{"messages":[]}}`, map[string]json.RawMessage{"messages": json.RawMessage(`[3]`)},
			`{"a":1, "messages" : [3],"z":{"messages":[]}}`},
		{"adds what is missing", `{"messages":[1]}`, map[string]json.RawMessage{"system": json.RawMessage(`"s"`)}, `{"messages":[1],"system":"s"}`},
		{"adds to an empty object", `{ }`, map[string]json.RawMessage{"system": json.RawMessage(`[]`)}, `{ "system":[]}`},
		{"nil leaves the field", `{"system":"keep"}`, map[string]json.RawMessage{"system": nil}, `{"system":"keep"}`},
		{"escaped keys", `{"mess\u0061ges":[1]}`, map[string]json.RawMessage{"messages": json.RawMessage(`[2]`)}, `{"mess\u0061ges":[2]}`},
	} {
		got, err := setFields([]byte(tc.body), tc.set)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, string(got), tc.name)
	}
	_, err := setFields([]byte(`[1]`), nil)
	require.Error(t, err)
}

func TestCompactionsAimBelowTheTriggerUnlessThePresetIsNamed(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, func(c *Config) { c.Target = 0.3 })
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), map[string]string{HeaderContextLimit: "900", HeaderSession: "deep"})
	tp.settle(t, 1)
	require.JSONEq(t, `{"target_usage":0.3,"history":{"trigger_usage":0.3}}`, string(tp.compactor.submitted()[0].Overrides))

	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false),
		map[string]string{HeaderContextLimit: "900", HeaderSession: "named", HeaderPreset: "offload-compact"})
	tp.settle(t, 2)
	ev := tp.compactor.submitted()[1]
	require.Equal(t, "offload-compact", ev.Preset)
	require.Empty(t, ev.Overrides, "a preset the host names keeps its own numbers")
}

func TestProxyEventIDsReadBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id      string
		covered int
		prefix  string
		ok      bool
	}{
		{proxyEventID(12, "00ff00ff00ff00ff"), 12, "00ff00ff00ff00ff", true},
		{proxyEventID(12, "00ff00ff00ff00ff") + "-whole", 12, "00ff00ff00ff00ff", true},
		{"proxy-0-00ff00ff00ff00ff", 0, "", false},
		{"proxy-x-00ff00ff00ff00ff", 0, "", false},
		{"proxy-3-00ff", 0, "", false},
		{"proxy-3-zzzzzzzzzzzzzzzz", 0, "", false},
		{"ev-1", 0, "", false},
		{"", 0, "", false},
	} {
		covered, prefix, ok := parseProxyEventID(tc.id)
		require.Equal(t, tc.ok, ok, tc.id)
		require.Equal(t, tc.covered, covered, tc.id)
		require.Equal(t, tc.prefix, prefix, tc.id)
	}
}

// TestANewProcessSplicesWhereTheSessionWas: a proxy that did not see the
// session's compaction (restarted, or another API process) starts from
// the session's latest output as the store recorded it.
func TestANewProcessSplicesWhereTheSessionWas(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "moved"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(11, false), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	ev := tp.compactor.submitted()[0]

	// The second process: the same store and runs, no line of its own.
	var asked []string
	p, err := New(Config{AnthropicURL: tp.anthropic.srv.URL}, Deps{Compactor: tp.compactor, Outputs: tp.compactor.output,
		Authenticate: func(*http.Request, string) (string, error) { return "acme", nil },
		Latest: func(_ context.Context, tenant, session string) (string, string, string, error) {
			asked = append(asked, tenant+"/"+session)
			out, err := tp.compactor.Wait(context.Background(), "run-1")
			return "run-1", ev.EventID, out.OutputSHA256, err
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	defer srv.Close()
	second := *tp
	second.url = srv.URL
	resp := second.post(t, "/proxy/anthropic/v1/messages", anthropicBody(12, false), h)
	require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "spliced; run=run-1"), resp.Header.Get(HeaderState))
	require.Len(t, convtest.Messages(t, tp.anthropic.last().Body), 3+2)
	second.post(t, "/proxy/anthropic/v1/messages", anthropicBody(13, false), h)
	require.Equal(t, []string{"acme/moved"}, asked, "the store is asked once per line")

	// A rewound conversation there goes whole, as in the first process.
	rewound := strings.Replace(anthropicBody(6, false), "Turn 0:", "Turn zero:", 1)
	require.Equal(t, "forwarded", second.post(t, "/proxy/anthropic/v1/messages", rewound, h).Header.Get(HeaderState))
}

// TestRequestsAreCountedByState: every answer counts once, under its
// upstream and the first word of its state header.
func TestRequestsAreCountedByState(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, func(c *Config) { c.OpenAIURL = "" })
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), nil)
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), map[string]string{HeaderKey: "bad"})
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(2, false), map[string]string{HeaderKey: "store-down"})
	tp.post(t, "/proxy/openai/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	rec := httptest.NewRecorder()
	tp.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{
		`compactor_proxy_requests_total{state="forwarded",upstream="anthropic"} 1`,
		`compactor_proxy_requests_total{state="refused",upstream="anthropic"} 1`,
		`compactor_proxy_requests_total{state="degraded",upstream="anthropic"} 1`,
		`compactor_proxy_requests_total{state="refused",upstream="openai"} 1`,
	} {
		require.Contains(t, rec.Body.String(), line)
	}
}

// TestLinesForgetTheOldestPastTheirBytes: the outputs the lines hold are
// bounded in bytes; past the bound the least recently used line is
// forgotten (its next request rebuilds it from the store), and a line
// already forgotten is not counted.
func TestLinesForgetTheOldestPastTheirBytes(t *testing.T) {
	t.Parallel()
	ls := newLines()
	a := ls.get("acme", "a", "sa", false)
	b := ls.get("acme", "b", "sb", false)
	ls.hold(a, 100<<20)
	ls.hold(b, 100<<20)
	require.Equal(t, int64(200<<20), ls.bytes)
	ls.hold(a, 120<<20) // a grows
	require.Equal(t, int64(220<<20), ls.bytes)
	require.Same(t, a, ls.get("acme", "a", "sa", false)) // a's next request: b is now the least recently used
	c := ls.get("acme", "c", "sc", false)
	ls.hold(c, 100<<20) // 320 MB: the oldest, b, goes
	require.Equal(t, int64(220<<20), ls.bytes)
	require.False(t, ls.bySess.Contains("acme\x00b"))
	require.True(t, ls.bySess.Contains("acme\x00a"))
	ls.hold(b, 50<<20) // b's compaction ends after it was forgotten
	require.Equal(t, int64(220<<20), ls.bytes, "a forgotten line is not counted")
	require.NotSame(t, b, ls.get("acme", "b", "sb", false), "b's next request makes a new line")
}

// TestAWaitingStreamIsKeptAlive: a streaming request that must wait for
// its session's compaction gets its stream at once, with a ping, instead
// of silence; once the run ends, the provider's stream follows on the
// same answer and the state comes as a trailer. An error of the provider
// there becomes an error event of the stream.
func TestAWaitingStreamIsKeptAlive(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.compactor.hold = make(chan struct{})
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "held"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)

	resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(16, true), h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: ping\n", line, "the stream is alive while the run is not done")
	close(tp.compactor.hold)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	require.Contains(t, string(rest), "message_stop", "the provider's stream follows")
	require.True(t, strings.HasPrefix(resp.Trailer.Get(HeaderState), "spliced; run=run-1"), resp.Trailer.Get(HeaderState))
	require.Len(t, convtest.Messages(t, tp.anthropic.last().Body), 3+6, "what went upstream was spliced")
	require.Equal(t, "sk-ant-agent", tp.anthropic.last().Header.Get("X-Api-Key"))
	require.Empty(t, tp.anthropic.last().Header.Get(HeaderKey))

	// The provider refuses the next one: its error, in the stream.
	tp.compactor.mu.Lock()
	tp.compactor.hold = make(chan struct{})
	tp.compactor.mu.Unlock()
	for i := 18; i < 40 && len(tp.compactor.submitted()) < 2; i += 2 {
		tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(i, false), h)
	}
	tp.anthropic.mu.Lock()
	tp.anthropic.next = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	}
	tp.anthropic.mu.Unlock()
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(tp.compactor.hold)
	}()
	resp = tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(60, true), h)
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(all), "event: ping")
	require.Contains(t, string(all), `event: error
data: {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	require.Contains(t, resp.Trailer.Get(HeaderState), "upstream answered 429")
}

// TestAnErasedSessionIsNeverSplicedAgain: once the store has no output
// for the session (it was erased), the line stops sending the output it
// held at its next check, and the requests go as they came.
func TestAnErasedSessionIsNeverSplicedAgain(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	var mu sync.Mutex
	erased := false
	p, err := New(Config{AnthropicURL: tp.anthropic.srv.URL, SyncEvery: time.Millisecond}, Deps{Compactor: tp.compactor, Outputs: tp.compactor.output,
		Authenticate: func(*http.Request, string) (string, error) { return "acme", nil },
		Latest: func(context.Context, string, string) (string, string, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if erased || len(tp.compactor.submitted()) == 0 {
				return "", "", "", nil
			}
			out, err := tp.compactor.Wait(context.Background(), "run-1")
			return "run-1", tp.compactor.submitted()[0].EventID, out.OutputSHA256, err
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	defer srv.Close()
	px := *tp
	px.url = srv.URL
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "erased"}
	px.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	px.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(px.post(t, "/proxy/anthropic/v1/messages", anthropicBody(11, false), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)

	mu.Lock()
	erased = true
	mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	body := anthropicBody(12, false)
	resp := px.post(t, "/proxy/anthropic/v1/messages", body, h)
	require.False(t, strings.HasPrefix(resp.Header.Get(HeaderState), "spliced"), resp.Header.Get(HeaderState))
	require.Equal(t, body, string(tp.anthropic.last().Body), "the erased output is not sent")
}

// TestSplicedRequestsKeepTheHostsBreakpointsOnly: the breakpoints the
// output carries (from the messages the compaction kept) are dropped, so
// that the host's own, on its system prompt and appended messages, stay
// within the Messages API's four.
func TestSplicedRequestsKeepTheHostsBreakpointsOnly(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "bp"}
	// The host marks its last two messages, as Claude Code does: the
	// marks move from one request to the next.
	withBlocks := func(n int) string {
		body := anthropicBody(n, false)
		var v map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		var msgs []map[string]any
		require.NoError(t, json.Unmarshal(v["messages"], &msgs))
		for i, m := range msgs {
			m["content"] = []map[string]any{{"type": "text", "text": m["content"], "cache_control": map[string]string{"type": "ephemeral"}}}
			if i < len(msgs)-2 {
				delete(m["content"].([]map[string]any)[0], "cache_control") // the host marks its last two
			}
		}
		raw, err := json.Marshal(msgs)
		require.NoError(t, err)
		v["messages"] = raw
		out, err := json.Marshal(v)
		require.NoError(t, err)
		return string(out)
	}
	tp.post(t, "/proxy/anthropic/v1/messages", withBlocks(10), h)
	tp.settle(t, 1)
	var sent string
	require.Eventually(t, func() bool {
		resp := tp.post(t, "/proxy/anthropic/v1/messages", withBlocks(12), h)
		sent = string(tp.anthropic.last().Body)
		return strings.HasPrefix(resp.Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	msgs := convtest.Messages(t, []byte(sent))
	require.Len(t, msgs, 3+2)
	for _, m := range msgs[:3] {
		require.NotContains(t, string(m), "cache_control", "the output's messages carry no breakpoint")
	}
	require.Equal(t, 2, strings.Count(sent, `"cache_control"`), "the host's two, on its appended messages")
	require.Len(t, tp.compactor.submitted(), 1, "moved marks do not make a new line")
}

// TestTransientRemindersDoNotBreakTheLine: a host that inserts a system
// reminder among its turns for one request and drops it in the next (as
// Claude Code does) still extends its conversation: the reminder of the
// current request goes upstream, an earlier one does not come back.
func TestTransientRemindersDoNotBreakTheLine(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "reminders"}
	remind := func(body string, at int, text string) string {
		var v map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal(v["messages"], &msgs))
		r, err := json.Marshal(map[string]string{"role": "system", "content": text})
		require.NoError(t, err)
		msgs = append(msgs[:at:at], append([]json.RawMessage{r}, msgs[at:]...)...)
		out, err := setFields([]byte(body), map[string]json.RawMessage{"messages": array(msgs)})
		require.NoError(t, err)
		return string(out)
	}
	tp.post(t, "/proxy/anthropic/v1/messages", remind(anthropicBody(10, false), 4, "first reminder"), h)
	tp.settle(t, 1)
	var state string
	require.Eventually(t, func() bool {
		// The first reminder is gone; another one sits near the end.
		state = tp.post(t, "/proxy/anthropic/v1/messages", remind(anthropicBody(12, false), 11, "second reminder"), h).Header.Get(HeaderState)
		return strings.HasPrefix(state, "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	sent := string(tp.anthropic.last().Body)
	require.Contains(t, sent, "second reminder", "the current request's reminder goes")
	msgs := convtest.Messages(t, []byte(sent))
	require.Len(t, msgs, 3+3, "the output, then turns 10 and 11 with the reminder between")
	require.Contains(t, string(msgs[3]), "Turn 10:")
	require.Contains(t, string(msgs[4]), "second reminder")
	require.Len(t, tp.compactor.submitted(), 1, "no new line")
}

func TestWithoutCacheControlCutsTheFieldOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"role":"user","content":"no marks"}`, `{"role":"user","content":"no marks"}`},
		{`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}`,
			`{"role":"user","content":[{"type":"text","text":"a"}]}`},
		{`{"role":"user","content":[{"cache_control": {"type":"ephemeral"} , "type":"text","text":"b"}]}`,
			`{"role":"user","content":[{"type":"text","text":"b"}]}`},
		{`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral","ttl":"1h"}}],"cache_control":{"type":"ephemeral"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"c"}]}]}`},
		{`{"role":"user","content":[{"type":"text","text":"say \"cache_control\": here"}]}`,
			`{"role":"user","content":[{"type":"text","text":"say \"cache_control\": here"}]}`},
		{`{"role":"user","content":[{"type":"text","text":"<b>&</b>","cache_control":{"type":"ephemeral"}}],"x":1}`,
			`{"role":"user","content":[{"type":"text","text":"<b>&</b>"}],"x":1}`},
	} {
		got, err := withoutCacheControl(json.RawMessage(tc.in))
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
}

// TestAWaitThatStillDoesNotFitCompactsTheRequest: when the compaction a
// request waited for ends and the request still does not fit (the host
// appended a large tool result since it started), a compaction of the
// request itself is started and waited for.
func TestAWaitThatStillDoesNotFitCompactsTheRequest(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.compactor.hold = make(chan struct{})
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "big-result"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)

	// 14 messages, the 11th a result larger than the whole limit.
	body := strings.Replace(anthropicBody(14, false), "Turn 10: ", "Turn 10: "+strings.Repeat("a large tool result line ", 200), 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(tp.compactor.hold)
	}()
	resp := tp.post(t, "/proxy/anthropic/v1/messages", body, h)
	state := resp.Header.Get(HeaderState)
	require.True(t, strings.HasPrefix(state, "spliced; run=run-2"), state)
	require.Contains(t, state, "; waited ")
	require.Len(t, tp.compactor.submitted(), 2)
	ev := tp.compactor.submitted()[1]
	require.Equal(t, "run-1", ev.Base.RunID, "the second compaction continues the first")
	require.Len(t, convtest.Messages(t, tp.anthropic.last().Body), 3, "the summary and the last two turns")
}

// TestNamedSessionsWithOneSystemPromptKeepTheirOwnLines: an agent's
// sessions share its system prompt; two sessions the host names (even
// with names that look derived) never share a line, and two derived
// ones with different tasks neither.
func TestNamedSessionsWithOneSystemPromptKeepTheirOwnLines(t *testing.T) {
	t.Parallel()
	chat := func(task, work string, n int) string {
		msgs := []string{`{"role":"system","content":"You are a coding agent."}`, fmt.Sprintf(`{"role":"user","content":%q}`, task)}
		for i := 0; i < n; i++ {
			role := "assistant"
			if i%2 == 1 {
				role = "user"
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"Turn %d: %s"}`, role, i, strings.Repeat(work+" ", 6)))
		}
		return fmt.Sprintf(`{"model":"gpt-4o","messages":[%s]}`, strings.Join(msgs, ","))
	}
	for _, tc := range []struct {
		name string
		// tasks are the two sessions' first user messages: the same task
		// run twice when the host names its sessions.
		tasks  [2]string
		header func(i int) map[string]string
	}{
		{"named", [2]string{"Fix the parser.", "Fix the parser."}, func(i int) map[string]string {
			return map[string]string{HeaderContextLimit: "700", HeaderSession: fmt.Sprintf("proxy-bench-%d", i)}
		}},
		{"derived", [2]string{"Task one: fix the parser.", "Task two: fix the lexer."}, func(int) map[string]string {
			return map[string]string{HeaderContextLimit: "700"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := newTestProxy(t, nil)
			one := func(n int) string { return chat(tc.tasks[0], "the build fails in module parser again", n) }
			two := func(n int) string { return chat(tc.tasks[1], "the lexer drops a token at the end of input", n) }
			tp.post(t, "/proxy/openai/v1/chat/completions", one(10), tc.header(1))
			tp.settle(t, 1)
			require.Eventually(t, func() bool {
				return strings.HasPrefix(tp.post(t, "/proxy/openai/v1/chat/completions", one(12), tc.header(1)).Header.Get(HeaderState), "spliced")
			}, 5*time.Second, 10*time.Millisecond)
			// Another session of the same agent compacts on a line of its
			// own: the first one's next turn is still spliced on its run.
			resp := tp.post(t, "/proxy/openai/v1/chat/completions", two(10), tc.header(2))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			tp.settle(t, 2)
			require.Eventually(t, func() bool {
				return strings.HasPrefix(tp.post(t, "/proxy/openai/v1/chat/completions", two(12), tc.header(2)).Header.Get(HeaderState), "spliced; run=run-2")
			}, 5*time.Second, 10*time.Millisecond)
			state := tp.post(t, "/proxy/openai/v1/chat/completions", one(14), tc.header(1)).Header.Get(HeaderState)
			require.True(t, strings.HasPrefix(state, "spliced; run=run-1"), state)
		})
	}
}

// TestAnIdleSessionCompactsWhenItsCacheIsCold: a session past the cold
// trigger but under the trigger starts no compaction while its requests
// come; once it has been idle past the cache's lifetime it compacts its
// latest request, and the host's next request goes spliced (the cache
// write it pays anyway is the smaller conversation's). A session under
// the cold trigger stays as it is.
func TestAnIdleSessionCompactsWhenItsCacheIsCold(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, func(c *Config) { c.ColdAfter, c.ColdTrigger = time.Second, 0.4 })
	h := map[string]string{HeaderContextLimit: "1500", HeaderSession: "s1"}
	small := map[string]string{HeaderContextLimit: "100000", HeaderSession: "s2"}
	for _, n := range []int{8, 10, 12} {
		resp := tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(n, false), h)
		require.Equal(t, "forwarded", resp.Header.Get(HeaderState), "under the trigger, the hot session is left alone")
		tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(n, false), small)
	}
	require.Empty(t, tp.compactor.submitted())
	tp.settle(t, 1)
	evs := tp.compactor.submitted()
	require.Len(t, evs, 1, "only the session past the cold trigger compacts")
	require.Equal(t, "s1", evs[0].Session)
	require.JSONEq(t, anthropicBody(12, false), string(evs[0].Conversation), "its latest request")
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(14, false), h).Header.Get(HeaderState), "spliced; run=run-1")
	}, 5*time.Second, 10*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	require.Len(t, tp.compactor.submitted(), 1, "nothing appended since: no second compaction")
}

// TestDerivedTurnsOfTwoThreadsKeepTheirOwnLines: two threads of one host
// (distinct user ids) whose conversations start alike are two sessions;
// only a token count, which names no thread, is found by its start.
func TestDerivedTurnsOfTwoThreadsKeepTheirOwnLines(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	withUser := func(body, user string) string {
		return strings.Replace(body, `"model":`, `"metadata":{"user_id":"`+user+`"},"model":`, 1)
	}
	h := map[string]string{HeaderContextLimit: "900"}
	tp.post(t, "/proxy/anthropic/v1/messages", withUser(anthropicBody(10, false), "a"), h)
	tp.settle(t, 1)
	require.Eventually(t, func() bool {
		return strings.HasPrefix(tp.post(t, "/proxy/anthropic/v1/messages", withUser(anthropicBody(12, false), "a"), h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	// Thread b starts like a but is its own session: it is not spliced on
	// a's output, and its own compaction is of session b.
	resp := tp.post(t, "/proxy/anthropic/v1/messages", withUser(anthropicBody(4, false), "b"), h)
	require.Equal(t, "forwarded", resp.Header.Get(HeaderState))
	tp.post(t, "/proxy/anthropic/v1/messages", withUser(anthropicBody(10, false), "b"), h)
	tp.settle(t, 2)
	evs := tp.compactor.submitted()
	require.NotEqual(t, evs[0].Session, evs[1].Session)
	require.Nil(t, evs[1].Base, "b's first compaction is of its own whole conversation")
}

// TestASilentWaitSendsNoInterimAnswer: with SilentWait (PROXY_INTERIM=false)
// a non-streaming request that waits for the run in flight gets its
// answer alone, for a host whose HTTP client takes an interim answer for
// the answer.
func TestASilentWaitSendsNoInterimAnswer(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, func(c *Config) { c.SilentWait = true })
	tp.compactor.hold = make(chan struct{})
	h := map[string]string{HeaderContextLimit: "900", HeaderSession: "silent"}
	tp.post(t, "/proxy/anthropic/v1/messages", anthropicBody(10, false), h)
	tp.settle(t, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(tp.compactor.hold)
	}()
	resp, interim := tp.postCounting(t, "/proxy/anthropic/v1/messages", anthropicBody(16, false), h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get(HeaderState), "; waited ")
	require.Zero(t, interim)
}
