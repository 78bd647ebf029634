// Package anthropic counts Claude conversations with Anthropic's
// token-counting endpoint, POST {base}/v1/messages/count_tokens, so that a
// Claude run's final size is the provider's count rather than o200k_base
// times a factor (tokens.Factors).
//
// It speaks the endpoint with net/http: headers x-api-key and
// anthropic-version 2023-06-01, a JSON body of model, system, messages and
// tools, an answer {"input_tokens": N}. The official Go SDK is served
// here, but its current line (v2) speaks API version 2026-10-21 with
// bearer authentication and reads credentials, profiles and extra headers
// from the environment and the disk; the line that speaks 2023-06-01 (v1)
// is frozen. This package needs one POST whose body it builds itself (the
// body's SHA-256 keys the cache) and no SDK retries (a count that cannot
// be had at once falls back to the estimate), so the SDK would add
// seventeen modules for the headers alone.
package anthropic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Protocol constants of the token-counting endpoint.
const (
	// DefaultBaseURL is ANTHROPIC_BASE_URL when it is unset.
	DefaultBaseURL = "https://api.anthropic.com"
	// APIVersion is the anthropic-version header sent with every call.
	APIVersion = "2023-06-01"
	// countPath is the endpoint, under the base URL.
	countPath = "/v1/messages/count_tokens"
)

// Defaults of a Counter.
const (
	// DefaultTimeout bounds one count, retry included
	// (ANTHROPIC_COUNT_TIMEOUT).
	DefaultTimeout = 10 * time.Second
	// DefaultCacheEntries bounds the cache of counts: an entry is a
	// 32-byte digest and an int, so 16Ki entries hold under 2 MB.
	DefaultCacheEntries = 1 << 14
	// maxRetryWait is the longest wait before the one retry of a count
	// that failed for a passing reason; a longer retry-after pauses the
	// counter instead (the caller falls back meanwhile).
	maxRetryWait = 2 * time.Second
	// defaultRetryWait is the wait before the retry when the answer named
	// none.
	defaultRetryWait = 500 * time.Millisecond
	// maxPause bounds a pause asked by retry-after.
	maxPause = time.Minute
	// authPause is the pause after the key was refused: every count
	// would fail the same way until an operator changes it.
	authPause = time.Minute
	// maxAnswerBytes bounds the answer read: {"input_tokens": N} or an
	// error object.
	maxAnswerBytes = 64 << 10
)

// Config configures a Counter.
type Config struct {
	// APIKey is sent as x-api-key (ANTHROPIC_API_KEY). Required.
	APIKey string
	// BaseURL is the API's root (ANTHROPIC_BASE_URL); "" is
	// DefaultBaseURL.
	BaseURL string
	// Timeout bounds one count, retry included; 0 is DefaultTimeout.
	Timeout time.Duration
	// CacheEntries bounds the cache of counts; 0 is DefaultCacheEntries.
	CacheEntries int
	// HTTPClient makes the calls; nil is a client of its own.
	HTTPClient *http.Client
}

// Counter counts Claude conversations with the endpoint, remembering each
// answer by the SHA-256 of its request body. It implements
// tokens.ProviderCounter and is safe for concurrent use.
type Counter struct {
	key     string
	url     string
	timeout time.Duration
	http    *http.Client
	cache   *lru.Cache[[sha256.Size]byte, int]
	now     func() time.Time

	mu          sync.Mutex
	pausedUntil time.Time
}

var _ tokens.ProviderCounter = (*Counter)(nil)

// New returns a Counter; an empty key is an error (leave the counter out
// instead: Claude runs are then estimated).
func New(cfg Config) (*Counter, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic token counter: no API key")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("anthropic token counter: base URL %q is not http(s)", base)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	entries := cfg.CacheEntries
	if entries <= 0 {
		entries = DefaultCacheEntries
	}
	cache, err := lru.New[[sha256.Size]byte, int](entries)
	if err != nil {
		return nil, fmt.Errorf("anthropic token counter cache: %w", err)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &Counter{key: cfg.APIKey, url: base + countPath, timeout: timeout, http: client, cache: cache, now: time.Now}, nil
}

// Handles reports whether model is a Claude model.
func (c *Counter) Handles(model string) bool {
	return tokens.IsClaude(model)
}

// CountConversation returns the input tokens Anthropic counts for sending
// conv to model: from the cache when the same request was counted before,
// else from one call (and at most one retry, when the endpoint was busy
// and asks to wait at most 2 s) within the counter's timeout. While the
// endpoint asked to wait longer, or after it refused the key, counts fail
// at once without a call. Errors name the HTTP status and Anthropic's
// error type, never the key nor the conversation's text.
func (c *Counter) CountConversation(ctx context.Context, model string, conv conversation.Conversation) (int, error) {
	body, err := RequestBody(model, conv)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256(body)
	if n, ok := c.cache.Get(sum); ok {
		return n, nil
	}
	if until := c.paused(); !until.IsZero() {
		return 0, &Error{Paused: true, RetryAfter: until.Sub(c.now())}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	n, err := c.call(ctx, body)
	var e *Error
	if err != nil && errors.As(err, &e) && e.Retryable() {
		if wait, ok := retryWait(ctx, e); ok {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0, fmt.Errorf("count tokens: %w", err)
			case <-t.C:
			}
			n, err = c.call(ctx, body)
		}
	}
	if err != nil {
		c.pauseAfter(err)
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	c.cache.Add(sum, n)
	return n, nil
}

// retryWait is how long to wait before retrying after e, and whether to
// retry at all: only within maxRetryWait and before ctx's deadline.
func retryWait(ctx context.Context, e *Error) (time.Duration, bool) {
	wait := e.RetryAfter
	if wait <= 0 {
		wait = defaultRetryWait
	}
	if wait > maxRetryWait {
		return 0, false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return 0, false
	}
	return wait, true
}

// paused is the end of the current pause, or zero.
func (c *Counter) paused() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pausedUntil.After(c.now()) {
		return c.pausedUntil
	}
	return time.Time{}
}

// pauseAfter pauses the counter after a failed count: for the wait a busy
// endpoint asked (at most maxPause), or authPause after the key was
// refused.
func (c *Counter) pauseAfter(err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	var d time.Duration
	switch {
	case e.Auth():
		d = authPause
	case e.Retryable() && e.RetryAfter > 0:
		d = min(e.RetryAfter, maxPause)
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := c.now().Add(d); until.After(c.pausedUntil) {
		c.pausedUntil = until
	}
}

// call makes one request and reads its answer.
func (c *Counter) call(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("x-api-key", c.key)
	req.Header.Set("anthropic-version", APIVersion)
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// A *url.Error names the method and the URL (no key: it is a
		// header) and the cause; a timeout is retryable like a busy
		// endpoint, though the retry rarely fits in what is left.
		return 0, &Error{Cause: err}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return 0, &Error{Status: resp.StatusCode, Cause: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		return 0, errorOf(resp, data)
	}
	var answer struct {
		InputTokens *int `json:"input_tokens"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.InputTokens == nil || *answer.InputTokens < 0 {
		return 0, &Error{Status: resp.StatusCode, Type: "malformed_answer"}
	}
	return *answer.InputTokens, nil
}
