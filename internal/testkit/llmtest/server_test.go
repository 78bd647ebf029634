package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type errorBody struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func post(t *testing.T, ctx context.Context, url, key string, body any) (*http.Response, []byte) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp, buf.Bytes()
}

func chat(model, user string, maxTokens int) map[string]any {
	return map[string]any{
		"model": model,
		"messages": []map[string]any{
			{"role": "system", "content": "Summarize."},
			{"role": "user", "content": user},
		},
		"max_tokens": maxTokens,
	}
}

const sample = "The build failed in internal/store/runs.go at line 42.\n" +
	"Error: pq: duplicate key value violates unique constraint \"runs_pkey\"\n" +
	"The fix landed in commit 3f9a2c1 and the test suite now passes 118 of 118 tests.\n"

func TestCompletionProtocol(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()

	for _, url := range []string{s.URL() + "/chat/completions", strings.TrimSuffix(s.URL(), "/v1") + "/chat/completions"} {
		resp, body := post(t, context.Background(), url, "", chat("gpt-4o-mini", sample, 100))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.NotEmpty(t, resp.Header.Get("x-request-id"))

		var c completion
		require.NoError(t, json.Unmarshal(body, &c))
		require.True(t, strings.HasPrefix(c.ID, "chatcmpl-"), c.ID)
		require.Equal(t, "chat.completion", c.Object)
		require.NotZero(t, c.Created)
		require.Equal(t, "gpt-4o-mini", c.Model)
		require.Len(t, c.Choices, 1)
		require.Equal(t, "assistant", c.Choices[0].Message.Role)
		require.Equal(t, "stop", c.Choices[0].FinishReason)
		require.NotEmpty(t, c.Choices[0].Message.Content)
		require.LessOrEqual(t, len(c.Choices[0].Message.Content), 100*4)
		require.Contains(t, sample, strings.Split(c.Choices[0].Message.Content, "\n")[0],
			"the completion is extracted from the user content")
		require.Positive(t, c.Usage.PromptTokens)
		require.Positive(t, c.Usage.CompletionTokens)
		require.Equal(t, c.Usage.PromptTokens+c.Usage.CompletionTokens, c.Usage.TotalTokens)
	}

	calls := s.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "gpt-4o-mini", calls[0].Model)
	require.Equal(t, 100, calls[0].MaxTokens)
	require.Equal(t, len("Summarize.")+len(sample), calls[0].PromptChars)
	require.Equal(t, http.StatusOK, calls[0].Status)
}

func TestCompletionIsDeterministic(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	_, a := post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 30))
	_, b := post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 30))
	var ca, cb completion
	require.NoError(t, json.Unmarshal(a, &ca))
	require.NoError(t, json.Unmarshal(b, &cb))
	require.Equal(t, ca.Choices[0].Message.Content, cb.Choices[0].Message.Content)
	require.LessOrEqual(t, len(ca.Choices[0].Message.Content), 30*4)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []Option
		key        string
		body       any
		wantStatus int
		wantCode   string
		wantType   string
		wantHeader map[string]string
	}{
		{name: "429 retry-after seconds", opts: []Option{WithScript(Fault429{RetryAfter: 7 * time.Second})},
			wantStatus: 429, wantCode: "rate_limit_exceeded", wantType: "requests", wantHeader: map[string]string{"Retry-After": "7"}},
		{name: "429 retry-after-ms", opts: []Option{WithScript(Fault429{RetryAfterMS: 1500 * time.Millisecond})},
			wantStatus: 429, wantCode: "rate_limit_exceeded", wantType: "requests", wantHeader: map[string]string{"retry-after-ms": "1500"}},
		{name: "500", opts: []Option{WithScript(Fault500{})}, wantStatus: 500, wantType: "server_error"},
		{name: "scripted context length", opts: []Option{WithScript(FaultContextLength{})},
			wantStatus: 400, wantCode: "context_length_exceeded", wantType: "invalid_request_error"},
		{name: "context limit", opts: []Option{WithContextLimit(20)},
			wantStatus: 400, wantCode: "context_length_exceeded", wantType: "invalid_request_error"},
		{name: "scripted 401", opts: []Option{WithScript(Fault401{})}, wantStatus: 401, wantCode: "invalid_api_key", wantType: "invalid_request_error"},
		{name: "missing key", opts: []Option{WithRequireKey("sk-good-0000")}, wantStatus: 401, wantType: "invalid_request_error"},
		{name: "wrong key", opts: []Option{WithRequireKey("sk-good-0000")}, key: "sk-bad-key-1234567",
			wantStatus: 401, wantCode: "invalid_api_key", wantType: "invalid_request_error"},
		{name: "no model", body: map[string]any{"messages": []map[string]string{{"role": "user", "content": "x"}}},
			wantStatus: 400, wantType: "invalid_request_error"},
		{name: "bad json", body: json.RawMessage(`{"model":`), wantStatus: 400, wantType: "invalid_request_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.opts...)
			defer s.Close()
			body := tc.body
			if body == nil {
				body = chat("gpt-4o-mini", sample, 50)
			}
			var resp *http.Response
			var raw []byte
			if r, ok := body.(json.RawMessage); ok {
				req, err := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(r))
				require.NoError(t, err)
				resp, err = http.DefaultClient.Do(req)
				require.NoError(t, err)
				var buf bytes.Buffer
				_, err = buf.ReadFrom(resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				raw = buf.Bytes()
			} else {
				resp, raw = post(t, context.Background(), s.URL()+"/chat/completions", tc.key, body)
			}
			require.Equal(t, tc.wantStatus, resp.StatusCode, string(raw))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.NotEmpty(t, resp.Header.Get("x-request-id"))
			for k, v := range tc.wantHeader {
				require.Equal(t, v, resp.Header.Get(k), k)
			}
			var e errorBody
			require.NoError(t, json.Unmarshal(raw, &e))
			require.NotNil(t, e.Error, string(raw))
			require.NotEmpty(t, e.Error.Message)
			require.Equal(t, tc.wantType, e.Error.Type)
			if tc.wantCode != "" {
				require.NotNil(t, e.Error.Code)
				require.Equal(t, tc.wantCode, *e.Error.Code)
			}
			if tc.key != "" {
				require.NotContains(t, e.Error.Message, tc.key, "a wrong key is echoed masked only")
			}
			require.Equal(t, tc.wantStatus, s.Calls()[0].Status)
		})
	}
}

func TestScriptIsConsumedInOrder(t *testing.T) {
	t.Parallel()
	s := New(WithScript(Fault500{}, Fault429{}))
	defer s.Close()
	s.Enqueue(FaultContextLength{})
	var got []int
	for range 4 {
		resp, _ := post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 10))
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{500, 429, 400, 200}, got)
}

func TestSetDown(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	s.SetDown(true)
	resp, _ := post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 10))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	s.SetDown(false)
	resp, _ = post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 10))
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestFailureRateIsDeterministic(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []int {
		s := New(WithFailureRate(0.5, seed))
		defer s.Close()
		var out []int
		for range 40 {
			resp, _ := post(t, context.Background(), s.URL()+"/chat/completions", "", chat("m", sample, 10))
			out = append(out, resp.StatusCode)
		}
		return out
	}
	a, b := run(42), run(42)
	require.Equal(t, a, b, "the same seed gives the same sequence")
	counts := map[int]int{}
	for _, st := range a {
		counts[st]++
	}
	require.Len(t, counts, 3, "a mix of 200, 429 and 500: %v", counts)
	require.Positive(t, counts[http.StatusOK])
	require.Positive(t, counts[http.StatusTooManyRequests])
	require.Positive(t, counts[http.StatusInternalServerError])
	require.NotEqual(t, a, run(7), "another seed gives another sequence")
}

func TestConcurrencyIsCounted(t *testing.T) {
	t.Parallel()
	// The latency only keeps the calls open; the test cancels them once all
	// are in flight, so no timing decides the outcome.
	s := New(WithLatency(time.Hour))
	defer s.Close()
	const n = 5
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _ := json.Marshal(chat("m", fmt.Sprintf("call %d", i), 10))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(raw))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool { return s.InFlight() == n }, 10*time.Second, 5*time.Millisecond)
	cancel()
	wg.Wait()
	require.Eventually(t, func() bool { return s.InFlight() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, n, s.MaxConcurrent())
	require.Len(t, s.Calls(), n)
}

func TestTimeoutFaultHangsUntilClientLeaves(t *testing.T) {
	t.Parallel()
	s := New(WithScript(FaultTimeout{}))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		raw, _ := json.Marshal(chat("m", sample, 10))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(raw))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return s.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return len(s.Calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 499, s.Calls()[0].Status)
}

func TestUnknownPath(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	resp, raw := post(t, context.Background(), s.URL()+"/completions", "", chat("m", sample, 10))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var e errorBody
	require.NoError(t, json.Unmarshal(raw, &e))
	require.Contains(t, e.Error.Message, "/v1/completions")
}
