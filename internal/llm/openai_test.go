package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
	"github.com/stretchr/testify/require"
)

const source = "user: the nightly job crashed again, see /var/log/etl/nightly.log\n" +
	"tool: ERROR 2026-01-29T02:14:07Z worker-7 failed: pq: relation \"orders_2025\" does not exist (SQLSTATE 42P01)\n" +
	"tool: retried 3 times, last exit code 137, job id job-8f3a91c\n" +
	"assistant: The table orders_2025 was dropped by migration 0042_archive_orders.sql.\n"

func newClient(t *testing.T, s *llmtest.Server, mutate func(*llm.Config)) *llm.OpenAI {
	t.Helper()
	cfg := llm.Config{BaseURL: s.URL(), APIKey: "sk-test", Model: "gpt-4o-mini"}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := llm.NewOpenAI(cfg)
	require.NoError(t, err)
	return c
}

func TestSummarizeSuccess(t *testing.T) {
	t.Parallel()
	s := llmtest.New(llmtest.WithRequireKey("sk-test"))
	defer s.Close()
	c := newClient(t, s, nil)

	resp, err := c.Summarize(context.Background(), llm.Request{
		Prompt: llm.PromptResult, Text: source, Context: "thought: find the cause; action: read_log", TargetChars: 400,
	})
	require.NoError(t, err)
	p, err := llm.LoadPrompt(llm.PromptResult)
	require.NoError(t, err)
	require.Equal(t, p.Version, resp.PromptVersion)
	require.Equal(t, "gpt-4o-mini", resp.Model)
	require.False(t, resp.Offline)
	require.NotEmpty(t, resp.Text)
	require.Contains(t, source, strings.Split(resp.Text, "\n")[0], "the fake extracts from the user content")

	calls := s.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, 200, calls[0].Status)
	// Usage is parsed from the wire: the fake counts 4 characters a token.
	require.Equal(t, (calls[0].PromptChars+3)/4, resp.PromptTokens)
	require.Equal(t, (len(resp.Text)+3)/4, resp.CompletionTokens)
	// max_tokens = TargetChars/4 × 1.2.
	require.Equal(t, 120, calls[0].MaxTokens)
	require.NotNil(t, calls[0].Temperature, "temperature is sent, not dropped by omitempty")
	require.Less(t, *calls[0].Temperature, 1e-6)
}

func TestMaxTokensOnTheWire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		req    llm.Request
		factor float64
		want   int
	}{
		{"offload-compact default", llm.Request{Prompt: llm.PromptHistory, TargetTokens: 8000}, 0, 9600},
		{"explicit 1.2", llm.Request{Prompt: llm.PromptHistory, TargetTokens: 500}, 1.2, 600},
		{"from chars", llm.Request{Prompt: llm.PromptChunk, TargetChars: 5000}, 0, 1500},
		{"other factor", llm.Request{Prompt: llm.PromptChunk, TargetTokens: 1000}, 2, 2000},
		{"brief without target", llm.Request{Prompt: llm.PromptBrief}, 0, 0},
		{"reasoning model", llm.Request{Prompt: llm.PromptHistory, TargetTokens: 1000, Model: "o3-mini"}, 0, 1200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.New()
			defer s.Close()
			c := newClient(t, s, func(cfg *llm.Config) { cfg.MaxTokensFactor = tc.factor })
			tc.req.Text = source
			resp, err := c.Summarize(context.Background(), tc.req)
			require.NoError(t, err)
			calls := s.Calls()
			require.Len(t, calls, 1)
			require.Equal(t, tc.want, calls[0].MaxTokens)
			if tc.req.Model != "" {
				require.Equal(t, tc.req.Model, calls[0].Model, "per-request model override")
				require.Equal(t, tc.req.Model, resp.Model)
				require.Nil(t, calls[0].Temperature, "reasoning models take no temperature")
			}
		})
	}
}

func TestFaultClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []llmtest.Option
		cfg        func(*llm.Config)
		down       bool
		emptyText  bool
		wantKind   llm.ErrorKind
		retryable  bool
		status     int
		retryAfter time.Duration
		check      func(t *testing.T, e *llm.Error, s *llmtest.Server)
	}{
		{name: "429 Retry-After 7", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault429{RetryAfter: 7 * time.Second})},
			wantKind: llm.RateLimited, retryable: true, status: 429, retryAfter: 7 * time.Second},
		{name: "429 retry-after-ms", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault429{RetryAfter: 7 * time.Second, RetryAfterMS: 1500 * time.Millisecond})},
			wantKind: llm.RateLimited, retryable: true, status: 429, retryAfter: 1500 * time.Millisecond},
		{name: "429 Retry-After date", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault429{RetryAfter: 30 * time.Second, HTTPDate: true})},
			wantKind: llm.RateLimited, retryable: true, status: 429,
			check: func(t *testing.T, e *llm.Error, _ *llmtest.Server) {
				// An HTTP date has one-second resolution and counts from now.
				require.Greater(t, e.RetryAfter, 20*time.Second)
				require.LessOrEqual(t, e.RetryAfter, 30*time.Second)
			}},
		{name: "429 without header", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault429{})},
			wantKind: llm.RateLimited, retryable: true, status: 429},
		{name: "500", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault500{})},
			wantKind: llm.ServerError, retryable: true, status: 500},
		{name: "down", down: true, wantKind: llm.ServerError, retryable: true, status: 503,
			check: func(t *testing.T, _ *llm.Error, s *llmtest.Server) { require.Equal(t, 503, s.Calls()[0].Status) }},
		{name: "timeout", opts: []llmtest.Option{llmtest.WithScript(llmtest.FaultTimeout{})},
			cfg: func(c *llm.Config) { c.Timeout = 200 * time.Millisecond }, wantKind: llm.Timeout, retryable: true},
		{name: "scripted context length", opts: []llmtest.Option{llmtest.WithScript(llmtest.FaultContextLength{})},
			wantKind: llm.ContextLength, retryable: false, status: 400,
			check: func(t *testing.T, e *llm.Error, _ *llmtest.Server) {
				require.Equal(t, "context_length_exceeded", e.Code)
			}},
		{name: "context limit", opts: []llmtest.Option{llmtest.WithContextLimit(100)},
			wantKind: llm.ContextLength, retryable: false, status: 400},
		{name: "scripted 401", opts: []llmtest.Option{llmtest.WithScript(llmtest.Fault401{})},
			wantKind: llm.Auth, retryable: false, status: 401},
		{name: "wrong key", opts: []llmtest.Option{llmtest.WithRequireKey("sk-right-key-000000")},
			cfg:      func(c *llm.Config) { c.APIKey = "sk-wrong-key-987654321" },
			wantKind: llm.Auth, retryable: false, status: 401},
		{name: "no key", opts: []llmtest.Option{llmtest.WithRequireKey("sk-right-key-000000")},
			cfg:      func(c *llm.Config) { c.APIKey = "" },
			wantKind: llm.Auth, retryable: false, status: 401},
		{name: "empty text is refused before sending", emptyText: true, wantKind: llm.BadRequest, retryable: false,
			check: func(t *testing.T, _ *llm.Error, s *llmtest.Server) { require.Empty(t, s.Calls()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.New(tc.opts...)
			defer s.Close()
			s.SetDown(tc.down)
			c := newClient(t, s, tc.cfg)
			text := source
			if tc.emptyText {
				text = ""
			}
			_, err := c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: text, TargetTokens: 50})
			require.Error(t, err)
			var e *llm.Error
			require.True(t, errors.As(err, &e), "%T: %v", err, err)
			require.Equal(t, tc.wantKind, e.Kind, e.Error())
			require.Equal(t, tc.retryable, e.Retryable())
			require.Equal(t, tc.status, e.Status)
			switch {
			case tc.status != 0:
				require.Equal(t, fmt.Sprintf("http %d", tc.status), e.Cause, "an answer's cause is its status")
			case tc.wantKind == llm.Timeout:
				require.Equal(t, "timeout", e.Cause)
			case tc.emptyText:
				require.Empty(t, e.Cause, "no call was made")
			}
			if tc.retryAfter > 0 {
				require.Equal(t, tc.retryAfter, e.RetryAfter)
			}
			if tc.status != 0 {
				require.NotEmpty(t, e.RequestID, "x-request-id is kept for support")
			}
			if e.Kind == llm.Auth {
				require.Contains(t, e.Error(), s.URL(), "the message names the endpoint")
				require.NotContains(t, e.Error(), "sk-wrong-key-987654321")
				require.NotContains(t, e.Error(), "sk-right-key-000000")
			}
			if tc.check != nil {
				tc.check(t, e, s)
			}
		})
	}
}

// TestRefusedConnectionSaysSo: a summarizer whose port refuses
// connections fails with the cause webhook deliveries report, in the
// error's field and in its text, without the endpoint's address in the
// cause.
func TestRefusedConnectionSaysSo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c, err := llm.NewOpenAI(llm.Config{BaseURL: "http://" + addr + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini"})
	require.NoError(t, err)
	_, err = c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: source, TargetTokens: 50})
	var e *llm.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, llm.Unknown, e.Kind)
	require.Equal(t, "refused", e.Cause)
	require.True(t, e.Retryable())
	require.True(t, strings.HasPrefix(e.Error(), "llm unknown (refused): "), e.Error())
}

func TestNoClientRetries(t *testing.T) {
	t.Parallel()
	s := llmtest.New(llmtest.WithScript(llmtest.Fault500{}, llmtest.Fault429{RetryAfter: time.Second}))
	defer s.Close()
	c := newClient(t, s, nil)
	_, err := c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: source, TargetTokens: 50})
	require.Equal(t, llm.ServerError, llm.KindOf(err))
	require.Len(t, s.Calls(), 1, "one attempt per call: Temporal owns retries")
	_, err = c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: source, TargetTokens: 50})
	require.Equal(t, llm.RateLimited, llm.KindOf(err))
	require.Len(t, s.Calls(), 2)
	_, err = c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptChunk, Text: source, TargetTokens: 50})
	require.NoError(t, err)
}

func TestServerComesBack(t *testing.T) {
	t.Parallel()
	s := llmtest.New()
	defer s.Close()
	c := newClient(t, s, nil)
	req := llm.Request{Prompt: llm.PromptBrief, Text: source}
	s.SetDown(true)
	_, err := c.Summarize(context.Background(), req)
	var e *llm.Error
	require.ErrorAs(t, err, &e)
	require.True(t, e.Retryable())
	s.SetDown(false)
	_, err = c.Summarize(context.Background(), req)
	require.NoError(t, err)
}

func TestKeyIsRedactedFromEchoes(t *testing.T) {
	t.Parallel()
	// A server that echoes the full key must not get it into our messages.
	const key = "sk-live-abcdefghijklmnop"
	s := llmtest.New(llmtest.WithRequireKey("sk-other"))
	defer s.Close()
	c := newClient(t, s, func(cfg *llm.Config) { cfg.APIKey = key })
	_, err := c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptBrief, Text: source})
	require.Error(t, err)
	require.NotContains(t, err.Error(), key)
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := llmtest.New(llmtest.WithScript(llmtest.FaultTimeout{}))
	defer s.Close()
	c := newClient(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Summarize(ctx, llm.Request{Prompt: llm.PromptBrief, Text: source})
		done <- err
	}()
	require.Eventually(t, func() bool { return s.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	err := <-done
	require.Equal(t, llm.Canceled, llm.KindOf(err))
	var e *llm.Error
	require.ErrorAs(t, err, &e)
	require.False(t, e.Retryable())
}

func TestConcurrentCallsRunInParallel(t *testing.T) {
	t.Parallel()
	// The server holds every call until the test has seen them all in
	// flight, so the check needs no timing.
	s := llmtest.New(llmtest.WithLatency(time.Hour))
	defer s.Close()
	c := newClient(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Summarize(ctx, llm.Request{Prompt: llm.PromptChunk, Text: source, TargetTokens: 50})
		}()
	}
	require.Eventually(t, func() bool { return s.InFlight() == n }, 10*time.Second, 5*time.Millisecond)
	cancel()
	wg.Wait()
	require.Equal(t, n, s.MaxConcurrent())
	for _, err := range errs {
		require.Equal(t, llm.Canceled, llm.KindOf(err))
	}
}

func TestNewOpenAIConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     llm.Config
		wantErr string
	}{
		{"no base url", llm.Config{Model: "m"}, "BaseURL is empty"},
		{"bad url", llm.Config{BaseURL: "llm.internal:8000", Model: "m"}, "not an http(s) URL"},
		{"no model", llm.Config{BaseURL: "http://x/v1"}, "Model is empty"},
		{"negative timeout", llm.Config{BaseURL: "http://x/v1", Model: "m", Timeout: -time.Second}, "Timeout"},
		{"negative factor", llm.Config{BaseURL: "http://x/v1", Model: "m", MaxTokensFactor: -1}, "MaxTokensFactor"},
		{"NaN factor", llm.Config{BaseURL: "http://x/v1", Model: "m", MaxTokensFactor: math.NaN()}, "MaxTokensFactor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := llm.NewOpenAI(tc.cfg)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestTextIsSentAsGoOpenAIWouldEncodeIt: the user text reaches the
// provider whole, encoded in the body exactly as json.Marshal encodes it,
// with a Content-Length that is the body's, and no trace of the
// placeholder that stood for it.
func TestTextIsSentAsGoOpenAIWouldEncodeIt(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for i := 0; sb.Len() < 300<<10; i++ {
		fmt.Fprintf(&sb, "line %d of <output> & \"quotes\" \\ tabs\t, é日本😀 \u2028 and /var/log/%d.log\n", i, i)
	}
	text := sb.String()
	var mu sync.Mutex
	var bodies [][]byte
	var lengths []int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, lengths = append(bodies, body), append(lengths, r.ContentLength)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	c, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "sk-test", Model: "gpt-4o-mini"})
	require.NoError(t, err)
	_, err = c.Summarize(context.Background(), llm.Request{Prompt: llm.PromptHistory, Text: text, TargetTokens: 500})
	require.NoError(t, err)
	require.Len(t, bodies, 1)
	require.Equal(t, int64(len(bodies[0])), lengths[0])
	require.NotContains(t, string(bodies[0]), "ctxcompact-text-")
	encoded, err := json.Marshal(text)
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(bodies[0], encoded), "the text, as json.Marshal encodes it")
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(bodies[0], &req))
	require.Len(t, req.Messages, 2)
	require.Equal(t, "user", req.Messages[1].Role)
	require.Equal(t, text, req.Messages[1].Content)
}

// TestSummarizeSendsTheTextWithoutCopies: a call with a text of 5 MB
// allocates a fraction of the text (the request without it, the answer:
// 0.05×), where go-openai's encoding of the whole request allocated 2.8×
// here (9.5× for a real transcript, which has more to escape) and held up
// to four copies of it at once.
func TestSummarizeSendsTheTextWithoutCopies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	c, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "sk-test", Model: "gpt-4o-mini"})
	require.NoError(t, err)
	var sb strings.Builder
	for i := 0; sb.Len() < 5<<20; i++ {
		fmt.Fprintf(&sb, "[tool result]\n<returncode>0</returncode>\n<output>./django/db/models/fields/%d.py: \"ok\"</output>\n\n", i)
	}
	text := sb.String()
	req := llm.Request{Prompt: llm.PromptHistory, Text: text, TargetTokens: 4000}
	_, err = c.Summarize(context.Background(), req) // warm: connections, pools
	require.NoError(t, err)
	alloc := memtest.Allocated(func() { _, err = c.Summarize(context.Background(), req) })
	require.NoError(t, err)
	t.Logf("a call with %d bytes of text allocated %.2f MB", len(text), float64(alloc)/(1<<20))
	require.Less(t, alloc, uint64(len(text))/2, "a call with %d bytes of text allocated %d", len(text), alloc)
}
