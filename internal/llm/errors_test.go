package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"ms wins over seconds", map[string]string{"Retry-After": "7", "retry-after-ms": "250"}, 250 * time.Millisecond},
		{"ms alone", map[string]string{"retry-after-ms": "1500"}, 1500 * time.Millisecond},
		{"bad ms falls back", map[string]string{"retry-after-ms": "soon", "Retry-After": "2"}, 2 * time.Second},
		{"garbage", map[string]string{"Retry-After": "tomorrow-ish"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0},
		{"huge is capped", map[string]string{"Retry-After": "99999999999"}, maxRetryAfter},
		{"huge ms is capped", map[string]string{"retry-after-ms": "1e30"}, maxRetryAfter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h http.Header
			if tc.header != nil {
				h = http.Header{}
				for k, v := range tc.header {
					h.Set(k, v)
				}
			}
			require.Equal(t, tc.want, parseRetryAfter(h, now))
		})
	}
}

type fakeTimeout struct{}

func (fakeTimeout) Error() string   { return "i/o timeout" }
func (fakeTimeout) Timeout() bool   { return true }
func (fakeTimeout) Temporary() bool { return true }

var _ net.Error = fakeTimeout{}

func TestClassify(t *testing.T) {
	t.Parallel()
	const key = "sk-secret-key-0123456789"
	c := classifier{baseURL: "http://llm.internal:8000/v1", apiKey: key, now: time.Now}
	api := func(status int, code any, msg string) error {
		return fmt.Errorf("wrapped: %w", &openai.APIError{HTTPStatusCode: status, Code: code, Message: msg})
	}
	tests := []struct {
		name      string
		err       error
		header    http.Header
		status    int
		wantKind  ErrorKind
		retryable bool
		contains  string
	}{
		{"429", api(429, "rate_limit_exceeded", "slow down"), http.Header{"Retry-After": {"3"}}, 429, RateLimited, true, "slow down"},
		{"quota", api(429, "insufficient_quota", "You exceeded your current quota"), nil, 429, Auth, false, "quota"},
		{"500", api(500, nil, "boom"), nil, 500, ServerError, true, "boom"},
		{"503 html", &openai.RequestError{HTTPStatusCode: 503, Body: []byte("<html>bad gateway</html>")}, nil, 503, ServerError, true, "bad gateway"},
		{"502 empty", &openai.RequestError{HTTPStatusCode: 502}, nil, 502, ServerError, true, "Bad Gateway"},
		{"409", api(409, nil, "conflict"), nil, 409, ServerError, true, "conflict"},
		{"408", api(408, nil, "took too long"), nil, 408, Timeout, true, "took too long"},
		{"context code", api(400, "context_length_exceeded", "too long"), nil, 400, ContextLength, false, "context length"},
		{"context by message (vLLM)", api(400, nil, "This model's maximum context length is 4096 tokens."), nil, 400, ContextLength, false, "4096"},
		{"413", &openai.RequestError{HTTPStatusCode: 413, Body: []byte("entity too large")}, nil, 413, ContextLength, false, "too large"},
		{"401", api(401, "invalid_api_key", "Incorrect API key provided: "+key), nil, 401, Auth, false, "http://llm.internal:8000/v1"},
		{"403", api(403, nil, "forbidden region"), nil, 403, Auth, false, "http://llm.internal:8000/v1"},
		{"404 model", api(404, "model_not_found", "The model does not exist"), nil, 404, BadRequest, false, "does not exist"},
		{"422", api(422, nil, "invalid"), nil, 422, BadRequest, false, "invalid"},
		{"canceled", fmt.Errorf("post: %w", context.Canceled), nil, 0, Canceled, false, "canceled"},
		{"deadline", &url.Error{Op: "Post", URL: "x", Err: context.DeadlineExceeded}, nil, 0, Timeout, true, "in time"},
		{"net timeout", &url.Error{Op: "Post", URL: "x", Err: fakeTimeout{}}, nil, 0, Timeout, true, "llm.internal"},
		{"refused", &url.Error{Op: "Post", URL: "x", Err: errors.New("connection refused")}, nil, 0, Unknown, true, "connection refused"},
		{"preflight", openai.ErrReasoningModelMaxTokensDeprecated, nil, 0, BadRequest, false, "before sending"},
		{"bad json on 200", &json.SyntaxError{}, nil, 200, ServerError, true, "malformed"},
		{"empty completion", errEmptyCompletion, nil, 200, ServerError, true, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			capture := &responseCapture{}
			if tc.status != 0 {
				h := tc.header
				if h == nil {
					h = http.Header{}
				}
				h.Set("x-request-id", "req_abc")
				capture.set(tc.status, h)
			}
			got := c.classify(tc.err, capture)
			require.Equal(t, tc.wantKind, got.Kind, got.Error())
			require.Equal(t, tc.retryable, got.Retryable())
			require.Contains(t, got.Error(), tc.contains)
			require.NotContains(t, got.Error(), key, "the key never leaks")
			require.ErrorIs(t, got, tc.err, "the cause stays reachable")
			if tc.status >= 400 {
				require.Equal(t, tc.status, got.Status)
				require.Equal(t, "req_abc", got.RequestID)
			}
			if tc.header.Get("Retry-After") != "" {
				require.Equal(t, 3*time.Second, got.RetryAfter)
			}
			require.Equal(t, tc.wantKind, KindOf(fmt.Errorf("activity: %w", got)))
		})
	}
}

func TestClassifyKeepsExistingError(t *testing.T) {
	t.Parallel()
	orig := &Error{Kind: ContextLength, Message: "x"}
	got := classifier{}.classify(fmt.Errorf("w: %w", orig), nil)
	require.Same(t, orig, got)
	require.Equal(t, Unknown, KindOf(errors.New("plain")))
}
