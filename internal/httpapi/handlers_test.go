package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// These tests cover what the API decides before a run reaches Temporal:
// authentication, limits, validation, the large-result offload, search and
// the logs. The e2e package covers whole runs over HTTP.

// lockedBuffer collects log output from concurrent handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	url    string
	keyA   string
	keyB   string
	logs   *lockedBuffer
	blob   *blob.Store
	st     *store.Store
	client *http.Client
}

const testMaxBytes = 64 << 10

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, func(*Deps) {})
}

// newFixtureWith is newFixture with Deps changed by set (limits).
func newFixtureWith(t *testing.T, set func(*Deps)) *fixture {
	t.Helper()
	st := storetest.New(t)
	bl := blobtest.New(t)
	// No Temporal client: every request here must be answered before a
	// run would start.
	gw := &gateway.Gateway{Store: st, Blob: bl, DefaultPreset: policy.Adaptive}
	logs := &lockedBuffer{}
	deps := Deps{Gateway: gw, Audit: &audit.Service{Store: st, Blob: bl}, Store: st, Blob: bl,
		MaxRequestBytes: testMaxBytes, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	set(&deps)
	h := New(deps)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &fixture{url: srv.URL, keyA: "key-a-0123456789abcdef", keyB: "key-b-0123456789abcdef", logs: logs, blob: bl, st: st, client: srv.Client()}
	require.NoError(t, st.AddAPIKey(context.Background(), "tenant-a", f.keyA))
	require.NoError(t, st.AddAPIKey(context.Background(), "tenant-b", f.keyB))
	return f
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (f *fixture) do(t *testing.T, method, path, key string, body []byte, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "body: %s", data)
	}
	return resp
}

type errorAnswer struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
		Index   *int   `json:"index"`
		Path    string `json:"path"`
	} `json:"error"`
}

const openAIChat = `{"messages":[{"role":"user","content":"fix the parser in src/parse.go"},{"role":"assistant","content":"ok"}]}`

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	event := func(extra string) []byte {
		return []byte(`{"event_id":"e1","model":"gpt-4o","conversation":` + openAIChat + extra + `}`)
	}
	big := []byte(`{"event_id":"e1","conversation":{"messages":[{"role":"user","content":"` + strings.Repeat("a", testMaxBytes) + `"}]}}`)
	for _, tc := range []struct {
		name, method, path, key string
		body                    []byte
		status                  int
		code, field             string
		index                   int // -1: no index expected
		path2                   string
	}{
		{"no key", "POST", "/v1/sessions/s1/events", "", event(""), 401, CodeUnauthorized, "", -1, ""},
		{"unknown key", "GET", "/v1/runs", "not-a-key-0123456789", nil, 401, CodeUnauthorized, "", -1, ""},
		{"too large", "POST", "/v1/sessions/s1/events", f.keyA, big, 413, CodeTooLarge, "", -1, ""},
		{"malformed JSON", "POST", "/v1/sessions/s1/events", f.keyA, []byte(`{"event_id":`), 400, CodeBadRequest, "", -1, ""},
		{"empty body", "POST", "/v1/sessions/s1/events", f.keyA, []byte{}, 400, CodeBadRequest, "", -1, ""},
		{"unknown field", "POST", "/v1/sessions/s1/events", f.keyA, event(`,"colour":"red"`), 400, CodeBadRequest, "colour", -1, ""},
		{"wrong type", "POST", "/v1/sessions/s1/events", f.keyA, event(`,"context_limit":"big"`), 400, CodeBadRequest, "context_limit", -1, ""},
		{"two values", "POST", "/v1/sessions/s1/events", f.keyA, append(event(""), []byte(` {}`)...), 400, CodeBadRequest, "", -1, ""},
		{"bad kind", "POST", "/v1/sessions/s1/events", f.keyA, event(`,"kind":"sometimes"`), 400, CodeBadRequest, "kind", -1, ""},
		{"bad preset", "POST", "/v1/sessions/s1/events", f.keyA, event(`,"preset":"squeeze-hard"`), 400, CodeBadRequest, "preset", -1, ""},
		{"no event id", "POST", "/v1/sessions/s1/events", f.keyA, []byte(`{"conversation":` + openAIChat + `}`), 400, CodeBadRequest, "event_id", -1, ""},
		{"no conversation", "POST", "/v1/sessions/s1/events", f.keyA, []byte(`{"event_id":"e1"}`), 400, CodeBadRequest, "conversation", -1, ""},
		{"bad wait", "POST", "/v1/sessions/s1/events", f.keyA, event(`,"wait_seconds":-1`), 400, CodeBadRequest, "wait_seconds", -1, ""},
		{"orphan tool result", "POST", "/v1/sessions/s1/events", f.keyA,
			[]byte(`{"event_id":"e1","conversation":{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"x"}]}}`),
			400, CodeBadRequest, "conversation", 1, "tool_call_id"},
		{"anthropic orphan", "POST", "/v1/sessions/s1/compact", f.keyA,
			[]byte(`{"conversation":{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}}`),
			400, CodeBadRequest, "conversation", 1, "content[0].tool_use_id"},
		{"compact has no kind", "POST", "/v1/sessions/s1/compact", f.keyA, event(`,"kind":"manual"`), 400, CodeBadRequest, "kind", -1, ""},
		{"foreign conversation key", "POST", "/v1/sessions/s1/events", f.keyA,
			[]byte(`{"event_id":"e1","conversation_key":"tenants/tenant-b/archive/abc"}`), 400, CodeBadRequest, "conversation_key", -1, ""},
		{"unknown run", "GET", "/v1/runs/run-nope", f.keyA, nil, 404, CodeNotFound, "", -1, ""},
		{"unknown run original", "GET", "/v1/runs/run-nope/original", f.keyA, nil, 404, CodeNotFound, "", -1, ""},
		{"unknown run diff", "GET", "/v1/runs/run-nope/diff", f.keyA, nil, 404, CodeNotFound, "", -1, ""},
		{"unknown session status", "GET", "/v1/sessions/nope/status", f.keyA, nil, 404, CodeNotFound, "", -1, ""},
		{"replay unknown run", "POST", "/v1/runs/run-nope/replay", f.keyA, []byte(`{"request_id":"r1"}`), 404, CodeNotFound, "", -1, ""},
		{"replay without id", "POST", "/v1/runs/run-nope/replay", f.keyA, []byte(`{}`), 400, CodeBadRequest, "request_id", -1, ""},
		{"replays bad range", "POST", "/v1/replays", f.keyA, []byte(`{"from":"2025-01-02T00:00:00Z","to":"2025-01-01T00:00:00Z","request_id":"r"}`), 400, CodeBadRequest, "to", -1, ""},
		{"replays bad time", "POST", "/v1/replays", f.keyA, []byte(`{"from":"yesterday","request_id":"r"}`), 400, CodeBadRequest, "from", -1, ""},
		{"bad status filter", "GET", "/v1/runs?status=bogus", f.keyA, nil, 400, CodeBadRequest, "status", -1, ""},
		{"bad from", "GET", "/v1/runs?from=yesterday", f.keyA, nil, 400, CodeBadRequest, "from", -1, ""},
		{"bad limit", "GET", "/v1/runs?limit=0", f.keyA, nil, 400, CodeBadRequest, "limit", -1, ""},
		{"unknown cursor", "GET", "/v1/runs?after=run-nope", f.keyA, nil, 400, CodeBadRequest, "after", -1, ""},
		{"bad export format", "GET", "/v1/export?format=xml", f.keyA, nil, 400, CodeBadRequest, "format", -1, ""},
		{"search without q", "GET", "/v1/sessions/s1/search", f.keyA, nil, 400, CodeBadRequest, "q", -1, ""},
		// Text Postgres cannot hold is the caller's mistake, not a 500.
		{"NUL session filter", "GET", "/v1/runs?session=%00", f.keyA, nil, 400, CodeBadRequest, "session", -1, ""},
		{"invalid UTF-8 session filter", "GET", "/v1/runs?session=%ff", f.keyA, nil, 400, CodeBadRequest, "session", -1, ""},
		{"NUL cursor", "GET", "/v1/runs?after=%00", f.keyA, nil, 400, CodeBadRequest, "after", -1, ""},
		{"NUL export session", "GET", "/v1/export?session=%00", f.keyA, nil, 400, CodeBadRequest, "session", -1, ""},
		{"invalid UTF-8 search", "GET", "/v1/sessions/s1/search?q=%ff", f.keyA, nil, 400, CodeBadRequest, "q", -1, ""},
		{"search unknown session", "GET", "/v1/sessions/nope/search?q=x", f.keyA, nil, 404, CodeNotFound, "", -1, ""},
		{"compress without mode", "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"x"}`), 400, CodeBadRequest, "mode", -1, ""},
		{"compress bad mode", "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"x","mode":"zip"}`), 400, CodeBadRequest, "mode", -1, ""},
		{"inspect huge limit", "POST", "/v1/sessions/s1/inspect", f.keyA, []byte(`{"context_limit":2147483648,"conversation":` + openAIChat + `}`), 400, CodeBadRequest, "context_limit", -1, ""},
		{"inspect NUL model", "POST", "/v1/sessions/s1/inspect", f.keyA, []byte(`{"model":"gpt\u0000x","conversation":` + openAIChat + `}`), 400, CodeBadRequest, "model", -1, ""},
		{"compress without text", "POST", "/v1/results:compress", f.keyA, []byte(`{"mode":"offload"}`), 400, CodeBadRequest, "text", -1, ""},
		// Offload checks overrides as summarize does.
		{"offload overrides not an object", "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"x","mode":"offload","overrides":"notanobject"}`), 400, CodeBadRequest, "overrides", -1, ""},
		{"offload unknown override", "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"x","mode":"offload","overrides":{"bogus":1}}`), 400, CodeBadRequest, "overrides.bogus", -1, ""},
		{"summarize unknown override", "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"x","mode":"summarize","overrides":{"bogus":1}}`), 400, CodeBadRequest, "overrides.bogus", -1, ""},
		// Retention is whole days from 1 to 36500.
		{"retention tiny fraction", "PUT", "/v1/retention", f.keyA, []byte(`{"days":1e-300}`), 400, CodeBadRequest, "days", -1, ""},
		{"retention fraction", "PUT", "/v1/retention", f.keyA, []byte(`{"days":1.5}`), 400, CodeBadRequest, "days", -1, ""},
		{"retention zero", "PUT", "/v1/retention", f.keyA, []byte(`{"days":0}`), 400, CodeBadRequest, "days", -1, ""},
		{"retention negative", "PUT", "/v1/retention", f.keyA, []byte(`{"days":-3}`), 400, CodeBadRequest, "days", -1, ""},
		{"retention over the max", "PUT", "/v1/retention", f.keyA, []byte(`{"days":36501}`), 400, CodeBadRequest, "days", -1, ""},
		// A tool input nested 9,000 levels deep: the message and field.
		{"deep tool input", "POST", "/v1/sessions/s1/compact", f.keyA,
			[]byte(`{"conversation":{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":` +
				strings.Repeat(`{"a":`, 9000) + `1` + strings.Repeat(`}`, 9000) + `}]}]}}`),
			400, CodeBadRequest, "conversation", 1, "content[0].input.a.a.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got errorAnswer
			resp := f.do(t, tc.method, tc.path, tc.key, tc.body, &got)
			require.Equal(t, tc.status, resp.StatusCode, "%+v", got)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, tc.code, got.Error.Code)
			require.Equal(t, tc.field, got.Error.Field, got.Error.Message)
			require.NotEmpty(t, got.Error.Message)
			if tc.index >= 0 {
				require.NotNil(t, got.Error.Index, got.Error.Message)
				require.Equal(t, tc.index, *got.Error.Index)
				require.Equal(t, tc.path2, got.Error.Path)
				require.Contains(t, got.Error.Message, "message 1")
			} else {
				require.Nil(t, got.Error.Index)
			}
			if tc.status == http.StatusUnauthorized {
				require.NotEmpty(t, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestFailedAuthenticationIsLimitedPerAddress: unknown keys from one
// address are refused before any lookup once the address has used its
// failures, with Retry-After; a valid key never seen from anywhere waits
// too, one that authenticated before passes (one client's guesses do not
// lock out another behind the same NAT); the web UI's sign-in shares the
// budget.
func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(d *Deps) { d.AuthFailuresPerMinute = 3 })
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/v1/runs", f.keyA, nil, nil).StatusCode, "a good key is no failure")
	for i := 0; i < 2; i++ {
		require.Equal(t, http.StatusUnauthorized, f.do(t, "GET", "/v1/runs", fmt.Sprintf("guess-%d-0123456789", i), nil, nil).StatusCode)
	}
	login, err := f.client.PostForm(f.url+"/ui/login", url.Values{"key": {"guess-ui-0123456789"}})
	require.NoError(t, err)
	require.NoError(t, login.Body.Close())
	require.Equal(t, http.StatusUnauthorized, login.StatusCode, "the third failure, through the web UI")

	var got errorAnswer
	resp := f.do(t, "GET", "/v1/runs", "guess-4-0123456789", nil, &got)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, CodeRateLimited, got.Error.Code)
	require.Contains(t, got.Error.Message, "failed authentications")
	require.Equal(t, "20", resp.Header.Get("Retry-After"), "one failure back every 60/3 s")
	resp = f.do(t, "GET", "/v1/runs", f.keyB, nil, &got)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a key never seen: no lookup at all while the address is limited")
	// Another client behind the same address (a NAT), whose key
	// authenticated before the guesses: not locked out with them.
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/v1/runs", f.keyA, nil, nil).StatusCode, "a proven key passes")
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/healthz", "", nil, nil).StatusCode, "routes without a key still answer")
}

func TestHealthNeedsNoKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var got healthResponse
	resp := f.do(t, "GET", "/healthz", "", nil, &got)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", got.Status)
}

func TestOffloadStoresTheResultAndAnswersAReference(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	text := strings.Repeat("ERROR disk /dev/sda1 full at step 42\n", 400)
	body, _ := json.Marshal(compressRequest{Text: text, ToolName: "bash", Model: "gpt-4o", Mode: ModeOffload, Session: "tools"})
	var got compressResponse
	resp := f.do(t, "POST", "/v1/results:compress", f.keyA, body, &got)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "stored", got.Status)

	require.Equal(t, got.SHA256, got.ID, "the offload's id is its SHA-256")
	id, ok := strategy.ParseReference(got.Reference)
	require.True(t, ok, got.Reference)
	require.Equal(t, got.ID, id)
	require.NotContains(t, got.Reference, "tenants/", "the reference names the id, not the storage key")
	require.Contains(t, got.Reference, "ERROR disk /dev/sda1 full", "the reference previews the result")
	require.Less(t, got.CharsAfter, got.CharsBefore)
	require.Greater(t, got.Tokens, 0)
	// The object is under the caller's tenant.
	stored, err := f.blob.GetVerified(context.Background(), blob.ContentKey("tenant-a", blob.KindOffload, got.ID), got.SHA256)
	require.NoError(t, err)
	require.Equal(t, text, string(stored))

	// The offload is searchable in its session, by its tenant only; a hit
	// carries the id, not the key.
	var hits struct {
		Hits []map[string]any `json:"hits"`
	}
	resp = f.do(t, "GET", "/v1/sessions/tools/search?q=sda1", f.keyA, nil, &hits)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, hits.Hits, 1)
	require.Equal(t, got.ID, hits.Hits[0]["id"])
	require.NotContains(t, hits.Hits[0], "key")
	var other errorAnswer
	resp = f.do(t, "GET", "/v1/sessions/tools/search?q=sda1", f.keyB, nil, &other)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, CodeNotFound, other.Error.Code)
}

func TestLogsNeverHoldKeysOrBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	secret := "SECRET-CONVERSATION-TEXT-4711"
	body := []byte(`{"event_id":"e1","preset":"nope","conversation":{"messages":[{"role":"user","content":"` + secret + `"}]}}`)
	f.do(t, "POST", "/v1/sessions/s1/events", f.keyA, body, nil)
	f.do(t, "POST", "/v1/results:compress", f.keyA, []byte(`{"text":"`+secret+`","mode":"offload"}`), nil)
	f.do(t, "GET", "/v1/runs", "wrong-key-"+secret, nil, nil)

	logs := f.logs.String()
	require.Contains(t, logs, `"route":"POST /v1/sessions/{session}/events"`)
	require.Contains(t, logs, `"status":400`)
	require.Contains(t, logs, `"tenant":"tenant-a"`)
	require.NotContains(t, logs, secret)
	require.NotContains(t, logs, f.keyA)
	require.NotContains(t, logs, "wrong-key")
}

// TestRetentionTakesWholeDays: a whole number of days within the bound is
// set and read back.
func TestRetentionTakesWholeDays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, days := range []string{"1", "30", "30.0", "36500"} {
		var got retentionSetting
		resp := f.do(t, "PUT", "/v1/retention", f.keyA, []byte(`{"days":`+days+`}`), &got)
		require.Equal(t, http.StatusOK, resp.StatusCode, days)
		require.True(t, got.Set)
	}
}
