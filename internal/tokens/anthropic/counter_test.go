package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

const (
	testKey = "sk-ant-test-0123456789"
	// secret is a phrase of the conversations the tests send: no error
	// may repeat it.
	secret = "the launch code is 7421"
)

// answer is what the fake endpoint says to one call.
type answer struct {
	status     int
	retryAfter string
	errType    string
	delay      time.Duration
}

// fakeEndpoint is Anthropic's count_tokens as the tests need it: it checks
// the headers and the body's shape as the real endpoint does, answers
// {"input_tokens": N} with N = 10 × the body's length / 100 + 1 by
// default, or the next scripted answer.
type fakeEndpoint struct {
	t      *testing.T
	srv    *httptest.Server
	calls  atomic.Int32
	mu     sync.Mutex
	script []answer
	bodies []map[string]json.RawMessage
}

func newFake(t *testing.T, script ...answer) *fakeEndpoint {
	t.Helper()
	f := &fakeEndpoint{t: t, script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEndpoint) fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

func (f *fakeEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages/count_tokens" {
		f.fail(w, http.StatusNotFound, "not_found_error", "no such route "+r.URL.Path)
		return
	}
	if r.Header.Get("x-api-key") != testKey {
		f.fail(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") != "2023-06-01" || r.Header.Get("content-type") != "application/json" {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version and content-type are required")
		return
	}
	data, err := io.ReadAll(r.Body)
	require.NoError(f.t, err)
	var body map[string]json.RawMessage
	if err := json.Unmarshal(data, &body); err != nil {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON")
		return
	}
	if msg := checkShape(body); msg != "" {
		f.fail(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	var a answer
	if len(f.script) > 0 {
		a, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-r.Context().Done():
			return
		}
	}
	if a.status != 0 && a.status != http.StatusOK {
		if a.retryAfter != "" {
			w.Header().Set("retry-after", a.retryAfter)
		}
		// The real endpoint's messages may quote the request: the
		// counter must not repeat them.
		f.fail(w, a.status, a.errType, "about: "+secret)
		return
	}
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": len(data)/100*10 + 1})
}

// checkShape is what the real endpoint refuses: another field than
// model, system, messages, tools; no model; messages not a list of
// {role, content} with alternating user and assistant roles.
func checkShape(body map[string]json.RawMessage) string {
	for k := range body {
		switch k {
		case "model", "system", "messages", "tools":
		default:
			return k + ": Extra inputs are not permitted"
		}
	}
	var model string
	if json.Unmarshal(body["model"], &model) != nil || model == "" {
		return "model: Field required"
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return "messages: Input should be a valid list"
	}
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" || len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d: role and content are required", i)
		}
		if i > 0 && msgs[i-1].Role == m.Role {
			return fmt.Sprintf("messages.%d: roles must alternate", i)
		}
	}
	return ""
}

func newCounter(t *testing.T, f *fakeEndpoint, timeout time.Duration) *Counter {
	t.Helper()
	c, err := New(Config{APIKey: testKey, BaseURL: f.srv.URL + "/", Timeout: timeout})
	require.NoError(t, err)
	return c
}

// anthropicConv is a Claude conversation in Anthropic's format, with
// extra to tell conversations apart.
func anthropicConv(t *testing.T, extra string) conversation.Conversation {
	t.Helper()
	raw := `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are terse.",
	 "tools":[{"name":"read","description":"read a file","input_schema":{"type":"object"}}],
	 "messages":[{"role":"user","content":"` + secret + `. ` + extra + `"},
	 {"role":"assistant","content":[{"type":"tool_use","id":"tu_1","name":"read","input":{"path":"a.go"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":"package main"}]}]}`
	conv, err := conversation.Parse([]byte(raw), conversation.FormatAnthropic)
	require.NoError(t, err)
	return conv
}

func TestCountUsesTheEndpointAndCachesByContent(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := newCounter(t, f, 0)
	ctx := context.Background()

	n, err := c.CountConversation(ctx, "claude-sonnet-4-5", anthropicConv(t, "one"))
	require.NoError(t, err)
	require.Positive(t, n)
	require.EqualValues(t, 1, f.calls.Load())

	// The body is the request the agent sends, less what count_tokens
	// refuses (max_tokens).
	body := f.bodies[0]
	require.JSONEq(t, `"claude-sonnet-4-5"`, string(body["model"]))
	require.JSONEq(t, `"You are terse."`, string(body["system"]))
	require.JSONEq(t, `[{"name":"read","description":"read a file","input_schema":{"type":"object"}}]`, string(body["tools"]))
	require.NotContains(t, body, "max_tokens")

	again, err := c.CountConversation(ctx, "claude-sonnet-4-5", anthropicConv(t, "one"))
	require.NoError(t, err)
	require.Equal(t, n, again)
	require.EqualValues(t, 1, f.calls.Load(), "the same content is counted from the cache")

	_, err = c.CountConversation(ctx, "claude-sonnet-4-5", anthropicConv(t, "two"))
	require.NoError(t, err)
	require.EqualValues(t, 2, f.calls.Load(), "other content is counted again")
	_, err = c.CountConversation(ctx, "claude-opus-4-1", anthropicConv(t, "one"))
	require.NoError(t, err)
	require.EqualValues(t, 3, f.calls.Load(), "another model is another request")
}

func TestCountErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script []answer
		// wantErr: the count fails; calls: how many reached the endpoint
		// (a retry makes 2); next: whether the call after it reaches
		// the endpoint (false: the counter is paused).
		wantErr   bool
		errType   string
		retryable bool
		calls     int32
		paused    bool
	}{
		{name: "429 with a long retry-after pauses", script: []answer{{status: 429, errType: "rate_limit_error", retryAfter: "30"}},
			wantErr: true, errType: "rate_limit_error", retryable: true, calls: 1, paused: true},
		{name: "429 with a short retry-after is retried once", script: []answer{{status: 429, errType: "rate_limit_error", retryAfter: "0.05"}},
			calls: 2},
		{name: "529 overloaded is retried once, then fails", script: []answer{{status: 529, errType: "overloaded_error"}, {status: 529, errType: "overloaded_error"}},
			wantErr: true, errType: "overloaded_error", retryable: true, calls: 2},
		{name: "500 api_error is retried once", script: []answer{{status: 500, errType: "api_error"}},
			calls: 2},
		{name: "400 invalid_request is not retried", script: []answer{{status: 400, errType: "invalid_request_error"}},
			wantErr: true, errType: "invalid_request_error", calls: 1},
		{name: "401 authentication pauses", script: []answer{{status: 401, errType: "authentication_error"}},
			wantErr: true, errType: "authentication_error", calls: 1, paused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.script...)
			c := newCounter(t, f, 5*time.Second)
			n, err := c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "x"))
			require.EqualValues(t, tc.calls, f.calls.Load())
			if !tc.wantErr {
				require.NoError(t, err)
				require.Positive(t, n)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), testKey)
			require.NotContains(t, err.Error(), secret)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.errType, e.Type)
			require.Equal(t, tc.retryable, e.Retryable())

			_, err = c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "y"))
			if tc.paused {
				require.EqualValues(t, tc.calls, f.calls.Load(), "a paused counter makes no call")
				require.ErrorAs(t, err, &e)
				require.True(t, e.Paused)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, tc.calls+1, f.calls.Load())
		})
	}
}

func TestCountTimesOut(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer{delay: 2 * time.Second})
	c := newCounter(t, f, 100*time.Millisecond)
	start := time.Now()
	_, err := c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "slow"))
	require.Error(t, err)
	require.Less(t, time.Since(start), time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotContains(t, err.Error(), testKey)
	require.NotContains(t, err.Error(), secret)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.True(t, e.Retryable())
}

func TestCountWithAWrongKeyOrNoEndpoint(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c, err := New(Config{APIKey: "sk-ant-wrong", BaseURL: f.srv.URL})
	require.NoError(t, err)
	_, err = c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "k"))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.True(t, e.Auth())
	require.NotContains(t, err.Error(), "sk-ant-wrong")

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c, err = New(Config{APIKey: testKey, BaseURL: closed.URL, Timeout: time.Second})
	require.NoError(t, err)
	_, err = c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "k"))
	require.ErrorAs(t, err, &e)
	require.Zero(t, e.Status)
	require.NotContains(t, err.Error(), testKey)
}

// TestMeasureFallsBackToTheEstimate: whatever the endpoint does, a
// Claude conversation gets a size; token_counting says which.
func TestMeasureFallsBackToTheEstimate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		model   string
		script  []answer
		timeout time.Duration
		want    string
		calls   int32
	}{
		{name: "answered", model: "claude-sonnet-4-5", want: tokens.CountingProvider, calls: 1},
		{name: "overloaded", model: "claude-sonnet-4-5", script: []answer{{status: 529, errType: "overloaded_error", retryAfter: "20"}},
			want: tokens.CountingEstimate, calls: 1},
		{name: "rate limited", model: "claude-sonnet-4-5", script: []answer{{status: 429, errType: "rate_limit_error", retryAfter: "60"}},
			want: tokens.CountingEstimate, calls: 1},
		{name: "timed out", model: "claude-sonnet-4-5", script: []answer{{delay: 2 * time.Second}}, timeout: 100 * time.Millisecond,
			want: tokens.CountingEstimate, calls: 1},
		{name: "an OpenAI model", model: "gpt-4o", want: tokens.CountingEncoding},
		{name: "another vendor", model: "gemini-2.5-pro", want: tokens.CountingEstimate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.script...)
			c := newCounter(t, f, tc.timeout)
			conv := anthropicConv(t, tc.name)
			m, err := tokens.MeasureConversation(context.Background(), c, tc.model, tokens.O200kBase, 0, conv, func() int { return 77 })
			require.Equal(t, tc.want, m.Counting)
			require.EqualValues(t, tc.calls, f.calls.Load())
			if tc.want == tokens.CountingProvider {
				require.NoError(t, err)
				require.NotEqual(t, 77, m.Size)
				return
			}
			require.Equal(t, 77, m.Size)
			if tc.calls > 0 {
				require.Error(t, err)
				require.NotContains(t, err.Error(), testKey)
				require.NotContains(t, err.Error(), secret)
			}
		})
	}
}

func TestNewNeedsAKeyAndAnHTTPBase(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.Error(t, err)
	_, err = New(Config{APIKey: testKey, BaseURL: "api.anthropic.com"})
	require.Error(t, err)
	c, err := New(Config{APIKey: testKey})
	require.NoError(t, err)
	require.Equal(t, "https://api.anthropic.com/v1/messages/count_tokens", c.url)
	require.True(t, c.Handles("anthropic/Claude-Opus-4-1"))
	require.False(t, c.Handles("gpt-4o"))
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"-1", 0},
		{"soon", 0},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.header != "" {
			h.Set("retry-after", tc.header)
		}
		require.Equal(t, tc.want, retryAfter(h, now), tc.header)
	}
}

func TestErrorRetryable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err       Error
		retryable bool
		auth      bool
	}{
		{Error{Status: 429, Type: "rate_limit_error"}, true, false},
		{Error{Status: 529, Type: "overloaded_error"}, true, false},
		{Error{Status: 503}, true, false},
		{Error{Status: 408}, true, false},
		{Error{Status: 400, Type: "invalid_request_error"}, false, false},
		{Error{Status: 413, Type: "request_too_large"}, false, false},
		{Error{Status: 404, Type: "not_found_error"}, false, false},
		{Error{Status: 401, Type: "authentication_error"}, false, true},
		{Error{Status: 403, Type: "permission_error"}, false, true},
		{Error{Status: 200, Type: "malformed_answer"}, false, false},
		{Error{Cause: errors.New("connection refused")}, true, false},
		{Error{Paused: true, RetryAfter: time.Second}, false, false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.retryable, tc.err.Retryable(), tc.err.Error())
		require.Equal(t, tc.auth, tc.err.Auth(), tc.err.Error())
	}
}

func TestMalformedAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"tokens": 3}`)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = c.CountConversation(context.Background(), "claude-sonnet-4-5", anthropicConv(t, "m"))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "malformed_answer", e.Type)
	require.True(t, strings.HasPrefix(err.Error(), "count tokens: HTTP 200"))
}
