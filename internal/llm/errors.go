package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ctxcompact/orchestrator/internal/netcause"
)

// ErrorKind says what went wrong with an LLM call, coarsely enough to decide
// whether to retry.
type ErrorKind string

// The error kinds.
const (
	// RateLimited is HTTP 429 (not quota exhaustion, which is Auth).
	RateLimited ErrorKind = "rate_limited"
	// ServerError is HTTP 5xx, or a malformed or empty answer.
	ServerError ErrorKind = "server_error"
	// Timeout is a client timeout, a deadline, or HTTP 408.
	Timeout ErrorKind = "timeout"
	// ContextLength means the prompt is larger than the model accepts.
	ContextLength ErrorKind = "context_length"
	// Auth is HTTP 401/403 or an exhausted quota: the account cannot use the
	// endpoint until someone changes its configuration.
	Auth ErrorKind = "auth"
	// BadRequest is any other 4xx, or a request rejected before sending.
	BadRequest ErrorKind = "bad_request"
	// Canceled means the caller's context was canceled.
	Canceled ErrorKind = "canceled"
	// Unknown is anything else, typically a network failure.
	Unknown ErrorKind = "unknown"
)

// maxRetryAfter caps a server's Retry-After so that a wrong header cannot
// park a run for days.
const maxRetryAfter = time.Hour

// Error is every error a Summarizer returns.
type Error struct {
	Kind ErrorKind
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// RetryAfter is the server's wish from retry-after-ms or Retry-After.
	RetryAfter time.Duration
	// Code is the OpenAI error code, e.g. "context_length_exceeded".
	Code string
	// RequestID is the provider's x-request-id, for support tickets.
	RequestID string
	// Cause is why the call failed, in the words webhook deliveries use
	// (netcause): "refused", "timeout", "dns", "tls", "connection reset",
	// "connection failed" when no answer came, "http 503" when one did;
	// "" when the call was not made (a request refused before sending, a
	// malformed answer).
	Cause string
	// Message is safe to log and store: it never holds the API key.
	Message string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm ")
	b.WriteString(string(e.Kind))
	if e.Cause != "" && e.Status == 0 {
		b.WriteString(" (" + e.Cause + ")")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying the same request again can succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case RateLimited, ServerError, Timeout, Unknown:
		return true
	default:
		return false
	}
}

// KindOf returns the kind of an *Error in err's chain, or Unknown.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Unknown
}

// badRequest wraps a request the summarizer refuses before any call.
func badRequest(err error) *Error {
	return &Error{Kind: BadRequest, Message: err.Error(), Err: err}
}

// responseCapture holds the status and headers of the last HTTP response of
// one Summarize call. go-openai's errors carry the status but not the
// headers, and Retry-After lives in the headers.
type responseCapture struct {
	mu     sync.Mutex
	status int
	header http.Header
}

func (c *responseCapture) set(status int, h http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = status
	c.header = h
}

func (c *responseCapture) get() (int, http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header
}

type captureKey struct{}

func withCapture(ctx context.Context, c *responseCapture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// captureTransport stashes each response's headers in the responseCapture
// found in the request's context, and sends the request's text in place
// of its placeholder (see withStreamedText).
type captureTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req, err := withText(req)
	if err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		if c, ok := req.Context().Value(captureKey{}).(*responseCapture); ok {
			c.set(resp.StatusCode, resp.Header.Clone())
		}
	}
	return resp, err
}

// parseRetryAfter reads retry-after-ms (OpenAI's precise header) first, then
// Retry-After as seconds or as an HTTP date.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	clamp := func(d time.Duration) time.Duration {
		return min(max(d, 0), maxRetryAfter)
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(ms) && !math.IsInf(ms, 0) && ms >= 0 {
			return clamp(time.Duration(math.Min(ms, float64(maxRetryAfter/time.Millisecond)) * float64(time.Millisecond)))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(s) && !math.IsInf(s, 0) && s >= 0 {
			return clamp(time.Duration(math.Min(s, float64(maxRetryAfter/time.Second)) * float64(time.Second)))
		}
		if t, err := http.ParseTime(v); err == nil {
			return clamp(t.Sub(now))
		}
	}
	return 0
}

// classifier turns any error of a chat completion call into an *Error. It
// knows the endpoint and the key so that messages can name the former and
// never contain the latter.
type classifier struct {
	baseURL string
	apiKey  string
	now     func() time.Time
}

// redact scrubs text from a provider or a transport error before it can
// reach Postgres, logs or Temporal: the configured API key and anything
// shaped like a credential are replaced, control characters dropped, and
// the text cut to maxDetail bytes on a character boundary (providers echo
// the request, and the prompt is conversation text).
func (c classifier) redact(s string) string {
	if c.apiKey != "" {
		s = strings.ReplaceAll(s, c.apiKey, "[redacted]")
	}
	return Scrub(s)
}

// maxDetail bounds the provider's words kept in an error.
const maxDetail = 300

var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_-]{8,}`),
	regexp.MustCompile(`(?i)\b(api[_-]?key|access[_-]?token|token|secret|password)("?\s*[:=]\s*"?)[^\s"',;}&]+`),
}

// endpointURL is a URL in an error: the operator's endpoint (its host,
// port and path), which a tenant reading its run's steps must not see.
var endpointURL = regexp.MustCompile(`(?i)\b(https?|wss?)://[^\s"'<>)]+`)

// endpointHost is a host a network error names ("dial tcp 10.0.0.7:8000",
// "lookup llm.internal").
var endpointHost = regexp.MustCompile(`\b(dial tcp[46]?|dial udp[46]?|lookup) [^\s:]+(:[0-9]+)?`)

// Scrub removes credentials, URLs and control characters from text and
// bounds it to maxDetail bytes.
func Scrub(s string) string {
	s = endpointURL.ReplaceAllString(s, "[endpoint]")
	s = endpointHost.ReplaceAllString(s, "$1 [endpoint]")
	for _, re := range secretShapes {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			if sub := re.FindStringSubmatch(m); len(sub) == 3 && sub[2] != "" {
				return sub[1] + sub[2] + "[redacted]"
			}
			return "[redacted]"
		})
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return ' '
		case r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// classify is the one place that maps failures to kinds.
func (c classifier) classify(err error, capture *responseCapture) *Error {
	var already *Error
	if errors.As(err, &already) {
		return already
	}
	status, header := 0, http.Header(nil)
	if capture != nil {
		status, header = capture.get()
	}
	out := &Error{Err: err, Status: status}
	if header != nil {
		out.RequestID = header.Get("x-request-id")
	}

	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	apiMessage := ""
	switch {
	case errors.As(err, &apiErr):
		out.Status = apiErr.HTTPStatusCode
		out.Code = codeString(apiErr.Code)
		apiMessage = apiErr.Message
	case errors.As(err, &reqErr):
		out.Status = reqErr.HTTPStatusCode
		apiMessage = string(reqErr.Body)
	}
	apiMessage = c.redact(apiMessage)

	defer func() {
		switch {
		case out.Status != 0 && (out.Status < 200 || out.Status >= 300):
			out.Cause = netcause.HTTP(out.Status)
		case out.Kind == Canceled, out.Kind == Timeout, out.Kind == Unknown:
			out.Cause = netcause.Of(err)
		}
	}()
	switch {
	case errors.Is(err, context.Canceled):
		out.Kind = Canceled
		out.Message = "call canceled by the caller"
	case errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		out.Kind = Timeout
		out.Message = fmt.Sprintf("no answer from %s in time", c.baseURL)
	case out.Status != 0 && (out.Status < 200 || out.Status >= 300):
		c.classifyStatus(out, apiMessage)
		out.RetryAfter = parseRetryAfter(header, c.now())
	case isPreflight(err):
		out.Kind = BadRequest
		out.Message = "request rejected before sending: " + c.redact(err.Error())
	case isDecodeError(err):
		// A 2xx whose body is not a completion: a broken proxy or server.
		out.Kind = ServerError
		out.Message = fmt.Sprintf("malformed response from %s: %s", c.baseURL, c.redact(err.Error()))
	default:
		out.Kind = Unknown
		out.Message = fmt.Sprintf("call to %s failed: %s", c.baseURL, c.redact(err.Error()))
	}
	return out
}

// classifyStatus maps an HTTP error status (and the OpenAI code) to a kind.
func (c classifier) classifyStatus(out *Error, apiMessage string) {
	detail := apiMessage
	if detail == "" {
		detail = http.StatusText(out.Status)
	}
	lower := strings.ToLower(apiMessage)
	switch {
	case out.Code == "context_length_exceeded" || out.Status == http.StatusRequestEntityTooLarge ||
		(out.Status == http.StatusBadRequest && mentionsContextLength(lower)):
		out.Kind = ContextLength
		out.Message = "prompt exceeds the model's context length: " + detail
	case out.Status == http.StatusUnauthorized || out.Status == http.StatusForbidden:
		out.Kind = Auth
		out.Message = fmt.Sprintf("the endpoint %s refused the credentials (HTTP %d): check the API key configured for it; server said: %s",
			c.baseURL, out.Status, detail)
	case out.Status == http.StatusTooManyRequests && (out.Code == "insufficient_quota" || strings.Contains(lower, "exceeded your current quota")):
		// Retrying cannot refill a quota; someone must act on the account.
		out.Kind = Auth
		out.Message = fmt.Sprintf("the quota of the account at %s is exhausted: %s", c.baseURL, detail)
	case out.Status == http.StatusTooManyRequests:
		out.Kind = RateLimited
		out.Message = "rate limited: " + detail
	case out.Status == http.StatusRequestTimeout:
		out.Kind = Timeout
		out.Message = "server timed out: " + detail
	case out.Status == http.StatusConflict:
		// OpenAI documents 409 as a transient conflict worth retrying.
		out.Kind = ServerError
		out.Message = "conflict: " + detail
	case out.Status >= 500:
		out.Kind = ServerError
		out.Message = "server error: " + detail
	case out.Status >= 400:
		out.Kind = BadRequest
		out.Message = "request rejected: " + detail
	default:
		out.Kind = Unknown
		out.Message = fmt.Sprintf("unexpected HTTP status %d: %s", out.Status, detail)
	}
}

// mentionsContextLength catches servers (vLLM, llama.cpp, proxies) that
// report an oversized prompt as a plain 400 without OpenAI's code.
func mentionsContextLength(lowerMessage string) bool {
	for _, s := range []string{"maximum context length", "context length", "context window", "too many tokens", "prompt is too long"} {
		if strings.Contains(lowerMessage, s) {
			return true
		}
	}
	return false
}

func codeString(code any) string {
	switch v := code.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isPreflight reports go-openai's own refusals, raised before any request.
func isPreflight(err error) bool {
	for _, target := range []error{
		openai.ErrChatCompletionInvalidModel,
		openai.ErrChatCompletionStreamNotSupported,
		openai.ErrReasoningModelMaxTokensDeprecated,
		openai.ErrReasoningModelLimitationsLogprobs,
		openai.ErrReasoningModelLimitationsOther,
		openai.ErrReasoningSamplingUnsupported,
		openai.ErrReasoningEffortUnsupported,
		openai.ErrReasoningToolsRequireResponses,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func isDecodeError(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ) ||
		errors.Is(err, errEmptyCompletion)
}

// errEmptyCompletion marks a 2xx answer without a usable choice.
var errEmptyCompletion = errors.New("completion has no content")
