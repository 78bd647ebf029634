// Package llmtest is an OpenAI-compatible chat completions server for tests:
// the real wire protocol (request and response JSON, error JSON, status
// codes, Retry-After headers) with latency and fault injection. Its answers
// are deterministic extractive summaries of the user content, so quality and
// drift checks see real identifiers. Offered the recover_context tool, it
// plays an agent's model: it calls the tool for each offload reference in
// the conversation it has not recovered yet.
package llmtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// DefaultMaxTokens is the completion budget when a request sets none.
const DefaultMaxTokens = 1024

// Fault is one injected failure, consumed by one call (see WithScript).
type Fault interface {
	fault()
}

// Fault429 answers 429 rate_limit_exceeded. A zero RetryAfter sends no
// Retry-After header; HTTPDate sends it as a date instead of seconds;
// RetryAfterMS sends OpenAI's retry-after-ms header.
type Fault429 struct {
	RetryAfter   time.Duration
	HTTPDate     bool
	RetryAfterMS time.Duration
}

// Fault500 answers 500 server_error.
type Fault500 struct{}

// FaultTimeout never answers: the handler waits until the client gives up
// (or the server closes).
type FaultTimeout struct{}

// FaultContextLength answers 400 context_length_exceeded.
type FaultContextLength struct{}

// Fault401 answers 401 invalid_api_key.
type Fault401 struct{}

func (Fault429) fault()           {}
func (Fault500) fault()           {}
func (FaultTimeout) fault()       {}
func (FaultContextLength) fault() {}
func (Fault401) fault()           {}

// Call records one request the server received.
type Call struct {
	Model       string
	PromptChars int // characters of all message contents
	// PromptSHA256 is the digest of the messages' contents in order: two
	// calls with the same prompt have the same one.
	PromptSHA256 string
	// Judge marks a drift judge's call (llm.JudgeSchema).
	Judge       bool
	MaxTokens   int // max_tokens or max_completion_tokens, 0 when unset
	Temperature *float64
	Status      int
	At          time.Time
}

// Option configures a Server.
type Option func(*Server)

// WithLatency delays every answer by d (cut short when the client leaves).
func WithLatency(d time.Duration) Option {
	return func(s *Server) { s.latency = d }
}

// WithFailureRate fails a fraction p of calls, drawn from a generator seeded
// with seed, as an even mix of 429 (Retry-After: 1) and 500.
func WithFailureRate(p float64, seed int64) Option {
	return func(s *Server) {
		s.failRate = p
		s.rng = rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	}
}

// WithScript queues faults for the next calls, one per call, in order.
func WithScript(faults ...Fault) Option {
	return func(s *Server) { s.script = append(s.script, faults...) }
}

// WithContextLimit rejects prompts longer than chars characters with 400
// context_length_exceeded.
func WithContextLimit(chars int) Option {
	return func(s *Server) { s.contextLimit = chars }
}

// WithRequireKey rejects calls without "Authorization: Bearer key" with 401.
func WithRequireKey(key string) Option {
	return func(s *Server) { s.requireKey = key }
}

// Answer writes a model's answer in place of the server's extractive
// one: system and user are the request's system prompt and user text,
// judge says the request asks for a drift verdict (llm.JudgeSchema).
// An empty answer leaves the server's own.
type Answer func(system, user string, judge bool) string

// WithAnswer makes the server answer like a given model, such as a lazy
// one that writes vague summaries and passes every check.
func WithAnswer(a Answer) Option {
	return func(s *Server) { s.answer = a }
}

// Server is a running fake. Close it when done.
type Server struct {
	ts *httptest.Server

	answer Answer

	latency      time.Duration
	failRate     float64
	contextLimit int
	requireKey   string

	mu            sync.Mutex
	rng           *rand.Rand
	script        []Fault
	down          bool
	calls         []Call
	seq           int
	inFlight      int
	maxConcurrent int

	closing   chan struct{}
	closeOnce sync.Once
}

// New starts a server.
func New(opts ...Option) *Server {
	s := &Server{closing: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleCompletion)
	mux.HandleFunc("POST /chat/completions", s.handleCompletion)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, http.StatusNotFound, s.nextRequestID(), apiError{
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
		}, nil)
	})
	s.ts = httptest.NewServer(mux)
	return s
}

// URL is the API base URL, ending in /v1.
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Close stops the server, releasing calls that hang in FaultTimeout.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.ts.Close()
}

// SetDown makes every call fail with 503 (true) until set back (false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Enqueue adds faults to the script at run time, like WithScript.
func (s *Server) Enqueue(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, faults...)
}

// Calls returns a copy of the calls received so far, in arrival order of
// their completion.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// InFlight is the number of calls being handled now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// MaxConcurrent is the largest number of calls in flight at once.
func (s *Server) MaxConcurrent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxConcurrent
}

type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatRequest struct {
	Model               *string       `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`
	Temperature         *float64      `json:"temperature"`
	Stream              bool          `json:"stream"`
	Tools               []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// RecoverTool is the tool the server, playing an agent's model, calls
// when it is offered it and the conversation holds a reference it has not
// recovered yet ("… recover_context tool, id: <id>").
const RecoverTool = "recover_context"

var referenceID = regexp.MustCompile(RecoverTool + ` tool, id: ([0-9a-f]{64})`)

// agentToolCall returns the id an agent would recover next: named by a
// reference in the conversation, with the tool offered, and not asked for
// by an earlier call.
func agentToolCall(req chatRequest) (string, bool) {
	offered := false
	for _, t := range req.Tools {
		offered = offered || t.Function.Name == RecoverTool
	}
	if !offered {
		return "", false
	}
	asked := map[string]bool{}
	var named []string
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			var args struct {
				ID string `json:"id"`
			}
			if tc.Function.Name == RecoverTool && json.Unmarshal([]byte(tc.Function.Arguments), &args) == nil {
				asked[args.ID] = true
			}
		}
		text, _ := contentText(m.Content)
		for _, sub := range referenceID.FindAllStringSubmatch(text, -1) {
			named = append(named, sub[1])
		}
	}
	for _, id := range named {
		if !asked[id] {
			return id, true
		}
	}
	return "", false
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func strPtr(s string) *string { return &s }

// contentText flattens a message content: a string, or a list of parts of
// which the text parts count.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor a list of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

func (s *Server) nextRequestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("req_%06d", s.seq)
}

func (s *Server) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight++
	s.maxConcurrent = max(s.maxConcurrent, s.inFlight)
}

func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// pickFault decides, under the lock, whether this call fails: outage first,
// then the script, then the random failure rate.
func (s *Server) pickFault() (down bool, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return true, nil
	}
	if len(s.script) > 0 {
		f, s.script = s.script[0], s.script[1:]
		return false, f
	}
	if s.rng != nil && s.failRate > 0 && s.rng.Float64() < s.failRate {
		if s.rng.IntN(2) == 0 {
			return false, Fault429{RetryAfter: time.Second}
		}
		return false, Fault500{}
	}
	return false, nil
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) {
	s.enter()
	defer s.leave()
	reqID := s.nextRequestID()
	call := Call{At: time.Now()}
	defer func() { s.record(call) }()

	// The body is read before any wait: net/http notices a client that
	// leaves (and cancels r.Context) only once the body is consumed.
	var req chatRequest
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if req.Model != nil {
		call.Model = *req.Model
	}
	call.MaxTokens = req.MaxTokens
	if req.MaxCompletionTokens > 0 {
		call.MaxTokens = req.MaxCompletionTokens
	}
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			call.Status = 499 // client closed the request, nginx's convention
			return
		case <-s.closing:
			t.Stop()
			call.Status = 499
			return
		}
	}
	if err != nil {
		call.Status = s.writeError(w, http.StatusBadRequest, reqID, apiError{
			Message: fmt.Sprintf("We could not parse the JSON body of your request. (%v)", err),
			Type:    "invalid_request_error",
		}, nil)
		return
	}
	call.Temperature = req.Temperature
	call.Judge = req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil && req.ResponseFormat.JSONSchema.Name == llm.JudgeSchemaName
	var user strings.Builder
	prompt := sha256.New()
	defer func() { call.PromptSHA256 = hex.EncodeToString(prompt.Sum(nil)) }()
	for i, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			call.Status = s.writeError(w, http.StatusBadRequest, reqID, apiError{
				Message: fmt.Sprintf("Invalid value for 'messages[%d].content': %v.", i, err),
				Type:    "invalid_request_error", Param: strPtr(fmt.Sprintf("messages.[%d].content", i)),
			}, nil)
			return
		}
		call.PromptChars += len([]rune(text))
		prompt.Write([]byte(m.Role + "\x00" + text + "\x00"))
		if m.Role == "user" {
			if user.Len() > 0 {
				user.WriteString("\n\n")
			}
			user.WriteString(text)
		}
	}

	down, fault := s.pickFault()
	if down {
		call.Status = s.writeError(w, http.StatusServiceUnavailable, reqID, apiError{
			Message: "The server is overloaded or not ready yet.", Type: "server_error",
		}, nil)
		return
	}
	if fault != nil {
		call.Status = s.writeFault(w, r, reqID, fault, call.Model)
		return
	}
	if s.requireKey != "" {
		if st := s.checkKey(w, r, reqID); st != 0 {
			call.Status = st
			return
		}
	}
	switch {
	case req.Model == nil || *req.Model == "":
		call.Status = s.writeError(w, http.StatusBadRequest, reqID, apiError{
			Message: "you must provide a model parameter", Type: "invalid_request_error",
		}, nil)
		return
	case len(req.Messages) == 0:
		call.Status = s.writeError(w, http.StatusBadRequest, reqID, apiError{
			Message: "[] is too short - 'messages'", Type: "invalid_request_error", Param: strPtr("messages"),
		}, nil)
		return
	case req.Stream:
		call.Status = s.writeError(w, http.StatusBadRequest, reqID, apiError{
			Message: "llmtest does not stream", Type: "invalid_request_error", Param: strPtr("stream"),
		}, nil)
		return
	}
	if s.contextLimit > 0 && call.PromptChars > s.contextLimit {
		call.Status = s.writeContextLength(w, reqID, call.PromptChars)
		return
	}

	if id, ok := agentToolCall(req); ok {
		call.Status = http.StatusOK
		s.writeJSON(w, http.StatusOK, reqID, map[string]any{
			"id": "chatcmpl-" + reqID, "object": "chat.completion", "created": time.Now().Unix(), "model": call.Model,
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "tool_calls", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
					"id": "call_" + reqID, "type": "function",
					"function": map[string]any{"name": RecoverTool, "arguments": `{"id":"` + id + `"}`},
				}}},
			}},
			"usage": map[string]int{"prompt_tokens": approxTokens(call.PromptChars), "completion_tokens": 20, "total_tokens": approxTokens(call.PromptChars) + 20},
		}, nil)
		return
	}

	maxTokens := call.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	content := textcut.KeepLines(user.String(), maxTokens*4)
	if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil && rf.JSONSchema.Name == llm.JudgeSchemaName {
		// A drift judge: the verdict in the schema asked for, decided by
		// the deterministic checks over the summary in the system prompt.
		system := ""
		for _, m := range req.Messages {
			if m.Role == "system" {
				system, _ = contentText(m.Content)
			}
		}
		_, after, _ := strings.Cut(system, "<summary>\n")
		summary, _, _ := strings.Cut(after, "\n</summary>")
		content = llm.HeuristicVerdict(user.String(), summary)
	}
	if s.answer != nil {
		system := ""
		for _, m := range req.Messages {
			if m.Role == "system" {
				system, _ = contentText(m.Content)
			}
		}
		judge := req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil && req.ResponseFormat.JSONSchema.Name == llm.JudgeSchemaName
		if a := s.answer(system, user.String(), judge); a != "" {
			content = a
		}
	}
	completionTokens := approxTokens(len(content))
	promptTokens := approxTokens(call.PromptChars)
	resp := map[string]any{
		"id":                 "chatcmpl-" + reqID,
		"object":             "chat.completion",
		"created":            time.Now().Unix(),
		"model":              call.Model,
		"system_fingerprint": "fp_llmtest",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]int{
			"prompt_tokens":     promptTokens,
			"completion_tokens": completionTokens,
			"total_tokens":      promptTokens + completionTokens,
		},
	}
	call.Status = http.StatusOK
	s.writeJSON(w, http.StatusOK, reqID, resp, nil)
}

func approxTokens(chars int) int { return (chars + 3) / 4 }

// checkKey answers 401 like OpenAI does for a missing or wrong key, echoing
// only a masked key. It returns the status written, 0 when the key is right.
func (s *Server) checkKey(w http.ResponseWriter, r *http.Request, reqID string) int {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return s.writeError(w, http.StatusUnauthorized, reqID, apiError{
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
			Type:    "invalid_request_error",
		}, nil)
	}
	if got != s.requireKey {
		return s.writeError(w, http.StatusUnauthorized, reqID, apiError{
			Message: fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", maskKey(got)),
			Type:    "invalid_request_error", Code: strPtr("invalid_api_key"),
		}, nil)
	}
	return 0
}

func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

func (s *Server) writeContextLength(w http.ResponseWriter, reqID string, promptChars int) int {
	return s.writeError(w, http.StatusBadRequest, reqID, apiError{
		Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
			approxTokens(s.contextLimit), approxTokens(promptChars)),
		Type: "invalid_request_error", Param: strPtr("messages"), Code: strPtr("context_length_exceeded"),
	}, nil)
}

func (s *Server) writeFault(w http.ResponseWriter, r *http.Request, reqID string, f Fault, model string) int {
	switch f := f.(type) {
	case Fault429:
		h := http.Header{}
		if f.RetryAfter > 0 {
			if f.HTTPDate {
				h.Set("Retry-After", time.Now().Add(f.RetryAfter).UTC().Format(http.TimeFormat))
			} else {
				h.Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
			}
		}
		if f.RetryAfterMS > 0 {
			h.Set("retry-after-ms", strconv.FormatInt(f.RetryAfterMS.Milliseconds(), 10))
		}
		return s.writeError(w, http.StatusTooManyRequests, reqID, apiError{
			Message: fmt.Sprintf("Rate limit reached for %s in organization org-llmtest on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in %s.", model, f.RetryAfter),
			Type:    "requests", Code: strPtr("rate_limit_exceeded"),
		}, h)
	case Fault500:
		return s.writeError(w, http.StatusInternalServerError, reqID, apiError{
			Message: "The server had an error while processing your request. Sorry about that!",
			Type:    "server_error",
		}, nil)
	case FaultTimeout:
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return 499
	case FaultContextLength:
		return s.writeError(w, http.StatusBadRequest, reqID, apiError{
			Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.",
			Type:    "invalid_request_error", Param: strPtr("messages"), Code: strPtr("context_length_exceeded"),
		}, nil)
	case Fault401:
		return s.writeError(w, http.StatusUnauthorized, reqID, apiError{
			Message: "Incorrect API key provided: sk-***********abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
			Type:    "invalid_request_error", Code: strPtr("invalid_api_key"),
		}, nil)
	default:
		return s.writeError(w, http.StatusInternalServerError, reqID, apiError{
			Message: fmt.Sprintf("llmtest: unknown fault %T", f), Type: "server_error",
		}, nil)
	}
}

func (s *Server) writeError(w http.ResponseWriter, status int, reqID string, e apiError, h http.Header) int {
	s.writeJSON(w, status, reqID, map[string]apiError{"error": e}, h)
	return status
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, reqID string, v any, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", reqID)
	w.WriteHeader(status)
	// The client may be gone; nothing useful can be done about it here.
	_ = json.NewEncoder(w).Encode(v)
}
