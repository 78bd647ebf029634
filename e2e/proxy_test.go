package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/cachebill"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// chatUpstream is a fake OpenAI endpoint that plays a recorded agent: it
// answers each chat completion with the assistant message the transcript
// has next, and keeps every request it got.
type chatUpstream struct {
	mu     sync.Mutex
	next   json.RawMessage
	bodies [][]byte
	heads  []http.Header
	// queue, when not empty, answers the next requests in order before
	// next does.
	queue []json.RawMessage
}

func (u *chatUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.heads = append(u.heads, r.Header.Clone())
	next := u.next
	if len(u.queue) > 0 {
		next, u.queue = u.queue[0], u.queue[1:]
	}
	u.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such route","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, next)
}

// TestProxyCompactsARecordedAgentSession drives a real SWE-agent session
// (141 messages, about 37,000 tokens) through the OpenAI proxy route
// turn by turn, against a 16,000-token limit, on the whole stack: each
// compaction is a durable run of kind proxy, and every request the
// provider gets is checked.
func TestProxyCompactsARecordedAgentSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	up := &chatUpstream{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	const limit = 16000
	srv, key := proxyServer(t, e, proxy.Config{OpenAIURL: upstream.URL + "/v1", WaitFor: 2 * time.Minute, Target: proxy.DefaultTarget})

	msgs, task := recording(t)
	counter, err := tokens.New(tokens.EncodingForModel("gpt-4o"))
	require.NoError(t, err)

	turns, spliced := 0, 0
	var bill cachebill.Bill
	var prev []byte
	var hostSent []json.RawMessage
	prevState := ""
	var prefixShares []float64
	for i := 2; i < len(msgs); i++ {
		var role struct {
			Role string `json:"role"`
		}
		require.NoError(t, json.Unmarshal(msgs[i], &role))
		if role.Role != "assistant" {
			continue
		}
		// The host sends everything before this assistant turn; the
		// provider answers with it.
		body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs[:i], "temperature": 0})
		require.NoError(t, err)
		up.mu.Lock()
		up.next = msgs[i]
		up.mu.Unlock()
		answer, state := proxyPost(t, srv, "/proxy/openai/v1/chat/completions", body, key, "django-11742", limit)
		require.Contains(t, string(answer), "chatcmpl-1", "turn %d", i)
		require.NotContains(t, state, "degraded", "turn %d", i)
		turns++

		up.mu.Lock()
		sent, head := up.bodies[len(up.bodies)-1], up.heads[len(up.heads)-1]
		up.mu.Unlock()
		bill.Add(sent, body)
		requireUpstreamRequest(t, fmt.Sprintf("turn %d (%s)", i, state), sent, head, conversation.FormatOpenAI, counter, limit,
			task, "sk-agent-own-key")
		if strings.HasPrefix(state, "spliced") {
			spliced++
			// Between two compactions, each request starts with the
			// previous one's bytes up to the messages' end.
			run := runOf(state)
			if run != "" && run == runOf(prevState) {
				prefixShares = append(prefixShares, sharedPrefix(prev, sent))
			}
		}
		prev, prevState = sent, state
		hostSent = msgs[:i]
	}
	require.Greater(t, spliced, turns/3, "most turns after the first compaction go spliced")

	// The session's snapshots are what the host sent, not what went
	// upstream: the latest reads back as the host's last request,
	// whatever the compactions spliced in.
	require.Eventually(t, func() bool {
		to, _, err := e.store.LatestSnapshot(context.Background(), e.tenant, "django-11742")
		return err == nil && to == len(hostSent)
	}, time.Minute, 50*time.Millisecond)
	var snaps struct {
		Snapshots []struct {
			Seq int64 `json:"seq"`
		} `json:"snapshots"`
	}
	apiJSON(t, srv, key, http.MethodGet, "/v1/sessions/django-11742/snapshots", http.StatusOK, &snaps)
	require.NotEmpty(t, snaps.Snapshots)
	var conv struct {
		Complete bool              `json:"complete"`
		Messages []json.RawMessage `json:"messages"`
	}
	apiJSON(t, srv, key, http.MethodGet, fmt.Sprintf("/v1/sessions/django-11742/snapshots/%d", snaps.Snapshots[len(snaps.Snapshots)-1].Seq), http.StatusOK, &conv)
	require.True(t, conv.Complete)
	require.Len(t, conv.Messages, len(hostSent))
	for i := range hostSent {
		require.JSONEq(t, string(hostSent[i]), string(conv.Messages[i]), "message %d as the host sent it", i)
	}

	// Consecutive spliced requests share nearly all of their bytes.
	require.NotEmpty(t, prefixShares)
	require.GreaterOrEqual(t, median(prefixShares), 0.8, "median share of the previous request kept as a byte-identical prefix")

	// Every compaction is a run of the audit, of kind proxy.
	runs, err := e.store.ListRuns(context.Background(), store.RunFilter{Tenant: e.tenant, Session: "django-11742"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(runs), 2, "the session compacted more than once")
	succeeded := 0
	for _, r := range runs {
		require.Equal(t, "proxy", r.Trigger, r.ID)
		require.NotEqual(t, store.RunFailed, r.Status, r.ID)
		if r.Status == store.RunSucceeded {
			succeeded++
		}
	}
	require.GreaterOrEqual(t, succeeded, 2)
	t.Logf("%d turns, %d spliced, %d runs, median prefix share %.3f; agent's input bill with a prompt cache (writes 1.25×, reads 0.1×): %.0f through the proxy against %.0f sent whole (%.2f×)",
		turns, spliced, len(runs), median(prefixShares), bill.Proxied, bill.Whole, bill.Ratio())

	// The spliced conversation names cut content by id; the host has no
	// recover tool, so the proxy offers its own and answers the model's
	// call from the store: the model gets the original text, the host
	// only the answer after it.
	id := recoverRef.FindSubmatch(prev)
	require.NotNil(t, id, "the compacted conversation names cut content")
	require.Contains(t, string(prev), `"name":"recover_context"`, "the proxy offers the tool beside the reference")
	call := fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_r1","type":"function","function":{"name":"recover_context","arguments":%q}}]}`,
		fmt.Sprintf(`{"id":%q}`, id[1]))
	up.mu.Lock()
	up.queue = []json.RawMessage{json.RawMessage(call)}
	up.next = json.RawMessage(`{"role":"assistant","content":"Read it back: the cut content is here."}`)
	calls := len(up.bodies)
	up.mu.Unlock()
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": append(slices.Clone(msgs),
		json.RawMessage(`{"role":"user","content":"What did the part that was cut say?"}`))})
	require.NoError(t, err)
	answer, state := proxyPost(t, srv, "/proxy/openai/v1/chat/completions", body, key, "django-11742", limit)
	require.Contains(t, string(answer), "Read it back")
	require.NotContains(t, string(answer), "recover_context", "the host never sees the proxy's tool")
	require.Contains(t, state, "recovered 1")
	up.mu.Lock()
	require.Len(t, up.bodies, calls+2, "the request and the proxy's follow-up")
	followUp, followHead := up.bodies[calls+1], up.heads[calls+1]
	up.mu.Unlock()
	require.Equal(t, "Bearer sk-agent-own-key", followHead.Get("Authorization"))
	var fu struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(followUp, &fu))
	last := fu.Messages[len(fu.Messages)-1]
	require.Equal(t, "tool", last.Role)
	require.Equal(t, "call_r1", last.ToolCallID)
	requireRecovered(t, e, "django-11742", string(id[1]), last.Content)
}

// requireRecovered checks that got, the recover tool's answer the proxy
// gave the model, starts with what id names in session, read back from
// the store as the API's recovery reads it.
func requireRecovered(t *testing.T, e *env, session, id, got string) {
	t.Helper()
	want, err := (&audit.Service{Store: e.store, Blob: e.blob}).RecoverContext(context.Background(), e.tenant, session, id, "")
	require.NoError(t, err)
	require.NotEmpty(t, want.Data)
	n := min(len(want.Data), 2000)
	require.True(t, strings.HasPrefix(got, string(want.Data[:n])), "the model reads the stored text back verbatim")
}

// recoverRef finds the id of a reference a compaction left.
var recoverRef = regexp.MustCompile(`recover_context tool, id: ([0-9a-f]{64}(?:\.m[0-9a-z-]+)?)`)

// requireUpstreamRequest checks one request the provider got through the
// proxy: the agent's own key went (in x-api-key or as a bearer token,
// whichever its client uses) and no X-Compactor-* header did; it parses,
// its tool calls and results pair, it is under the limit (tool
// definitions counted), and the task is in it verbatim.
func requireUpstreamRequest(t *testing.T, what string, body []byte, h http.Header, format conversation.Format,
	counter tokens.Counter, limit int, task, agentKey string) {
	t.Helper()
	require.True(t, h.Get("X-Api-Key") == agentKey || h.Get("Authorization") == "Bearer "+agentKey, "%s: %v", what, h)
	for k := range h {
		require.False(t, strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Compactor-"), "%s: %s forwarded", what, k)
	}
	conv, err := conversation.Parse(body, format)
	require.NoError(t, err, what)
	require.NoError(t, conversation.CheckPairing(conv), what)
	var v struct {
		Tools json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(body, &v), what)
	require.LessOrEqual(t, tokens.Conversation(counter, conv)+counter.Count(string(v.Tools)), limit, what)
	require.True(t, hasUserText(conv, task), "%s: the task verbatim", what)
}

// hasUserText reports whether a user message of c holds text verbatim.
func hasUserText(c conversation.Conversation, text string) bool {
	for _, m := range c.Messages {
		if m.Role != conversation.RoleUser {
			continue
		}
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindText && strings.Contains(b.Text, text) {
				return true
			}
		}
	}
	return false
}

// runOf is the run a state header says the request was spliced on.
func runOf(state string) string {
	_, after, ok := strings.Cut(state, "spliced; run=")
	if !ok {
		return ""
	}
	run, _, _ := strings.Cut(after, ";")
	return run
}

// sharedPrefix is the share of a's bytes that b starts with.
func sharedPrefix(a, b []byte) float64 {
	return float64(cachebill.Shared(a, b)) / float64(len(a))
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// proxySession drives a recorded SWE-agent session through the OpenAI
// proxy route of API processes on one stack, turn by turn.
type proxySession struct {
	t     *testing.T
	e     *env
	up    *chatUpstream
	upURL string
	key   string
	rec   []json.RawMessage
}

func newProxySession(t *testing.T) *proxySession {
	t.Helper()
	e := newEnv(t, withoutLLM())
	up := &chatUpstream{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	ps := &proxySession{t: t, e: e, up: up, upURL: upstream.URL, key: "key-" + e.tenant + "-0123456789abcdef"}
	require.NoError(t, e.store.AddAPIKey(context.Background(), e.tenant, ps.key))
	ps.rec, _ = recording(t)
	return ps
}

// process starts an API process of the stack and returns its URL.
func (ps *proxySession) process() string {
	srv, _ := proxyServer(ps.t, ps.e, proxy.Config{OpenAIURL: ps.upURL + "/v1", WaitFor: 2 * time.Minute, Target: proxy.DefaultTarget,
		SyncEvery: 10 * time.Millisecond})
	return srv.URL
}

// turn sends the host's messages before message i to url, the provider
// answering with message i, and returns the state header and what went
// upstream.
func (ps *proxySession) turn(url, session string, i int) (string, []byte, []byte) {
	t := ps.t
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": ps.rec[:i]})
	require.NoError(t, err)
	ps.up.mu.Lock()
	ps.up.next = ps.rec[i]
	ps.up.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, url+"/proxy/openai/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk-agent-own-key")
	req.Header.Set(proxy.HeaderKey, ps.key)
	req.Header.Set(proxy.HeaderSession, session)
	req.Header.Set(proxy.HeaderContextLimit, "16000")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ps.up.mu.Lock()
	sent := ps.up.bodies[len(ps.up.bodies)-1]
	ps.up.mu.Unlock()
	return resp.Header.Get(proxy.HeaderState), body, sent
}

// untilSpliced sends turns from 2 on until one goes spliced, and returns
// the next turn's index and that state.
func (ps *proxySession) untilSpliced(url, session string) (int, string) {
	i, state := 2, ""
	for ; i < len(ps.rec)-1 && !strings.HasPrefix(state, "spliced"); i++ {
		state, _, _ = ps.turn(url, session, i)
	}
	require.True(ps.t, strings.HasPrefix(state, "spliced"), "the session compacted")
	return i, state
}

// TestProxyRestartSplicesWhereTheSessionWas: an API process that did not
// see a session's compaction (a restarted one, or another behind the same
// balancer) splices the session's latest output in from its first
// request, read from the store on the whole stack.
func TestProxyRestartSplicesWhereTheSessionWas(t *testing.T) {
	t.Parallel()
	ps := newProxySession(t)
	first, second := ps.process(), ps.process()
	i, state := ps.untilSpliced(first, "moved")
	// The next turn, on the second process: spliced on the session's
	// latest output (that one, or a later compaction the first process
	// started meanwhile), a run of this session.
	next, _, _ := ps.turn(second, "moved", i)
	require.True(t, strings.HasPrefix(next, "spliced; run="), "second process: %s (first: %s)", next, state)
	r, err := ps.e.store.GetRun(context.Background(), runOf(next))
	require.NoError(t, err)
	require.Equal(t, ps.e.tenant, r.Tenant)
	require.Equal(t, "moved", r.Session)
	require.Equal(t, "proxy", r.Trigger)
}

// TestProxyNeverSendsAnErasedOutput: once a session is erased, the proxy
// stops splicing the output it held: the next request goes upstream as
// the host sent it, or (over the limit) on a compaction made after the
// erasure, never on an erased run's output.
func TestProxyNeverSendsAnErasedOutput(t *testing.T) {
	t.Parallel()
	ps := newProxySession(t)
	url := ps.process()
	i, _ := ps.untilSpliced(url, "forget-me")
	// Let the compaction in flight, if any, end before the erasure.
	erased := map[string]bool{}
	require.Eventually(t, func() bool {
		runs, err := ps.e.store.ListRuns(context.Background(), store.RunFilter{Tenant: ps.e.tenant, Session: "forget-me"})
		require.NoError(t, err)
		for _, r := range runs {
			if !r.Status.Final() {
				return false
			}
			erased[r.ID] = true
		}
		return true
	}, 2*time.Minute, 50*time.Millisecond)
	require.NotEmpty(t, erased)
	er, _, err := ps.e.gw.EraseSession(context.Background(), ps.e.tenant, "forget-me", "e2e")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := ps.e.store.GetErasure(context.Background(), ps.e.tenant, er.ID)
		return err == nil && !got.FinishedAt.IsZero()
	}, time.Minute, 50*time.Millisecond)
	time.Sleep(20 * time.Millisecond) // past the line's check interval
	state, host, sent := ps.turn(url, "forget-me", i)
	run := runOf(state)
	require.False(t, erased[run], "spliced on an erased run: %s", state)
	if run == "" {
		require.Equal(t, string(host), string(sent), "the erased output is not sent again")
		return
	}
	// Over the limit, the request waited for a compaction of what the
	// host sent after the erasure.
	r, err := ps.e.store.GetRun(context.Background(), run)
	require.NoError(t, err)
	require.Equal(t, "forget-me", r.Session)
	require.Equal(t, "proxy", r.Trigger)
}

// proxyServer is an API process of e's stack with the proxy routes of
// cfg, and the compactor key of e's tenant that its agents send.
func proxyServer(t *testing.T, e *env, cfg proxy.Config) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Gateway: e.gw, Audit: &audit.Service{Store: e.store, Blob: e.blob}, Store: e.store, Blob: e.blob,
		MaxRequestBytes: httpMaxBytes, Logger: slog.New(slog.DiscardHandler), Proxy: cfg,
	}))
	t.Cleanup(srv.Close)
	key := "key-" + e.tenant + "-0123456789abcdef"
	require.NoError(t, e.store.AddAPIKey(context.Background(), e.tenant, key))
	return srv, key
}

// proxyPost sends body to the proxy route path of srv as an agent with
// its own key, in session at limit tokens, and returns the answer and
// its X-Compactor-State (a trailer when a stream opened before the state
// was known); an answer other than 200 fails the test.
func proxyPost(t *testing.T, srv *httptest.Server, path string, body []byte, key, session string, limit int) ([]byte, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk-agent-own-key")
	req.Header.Set(proxy.HeaderKey, key)
	req.Header.Set(proxy.HeaderSession, session)
	req.Header.Set(proxy.HeaderContextLimit, fmt.Sprint(limit))
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	if v := resp.Trailer.Get(proxy.HeaderState); v != "" {
		return answer, v
	}
	return answer, resp.Header.Get(proxy.HeaderState)
}

// recording is the recorded SWE-agent session the proxy tests replay
// (141 messages in OpenAI chat format) and its task, the user's issue
// after the system prompt.
func recording(t *testing.T) ([]json.RawMessage, string) {
	t.Helper()
	var rec struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(readData(t, "swe-agent-deepseek/django__django-11742.json"), &rec))
	var task struct {
		Content string `json:"content"`
	}
	require.NoError(t, json.Unmarshal(rec.Messages[1], &task))
	return rec.Messages, task.Content
}
