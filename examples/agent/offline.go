package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// The offline mode: the loop against ScriptedModel, a model that needs no
// LLM, so that the example shows an offload and its recovery on the dev
// stack alone.

// OfflineContextLimit is the context, in tokens, the offline mode
// declares: small, so that the one test log the scripted model asks for
// puts the conversation over the threshold (0.5) and the agent compacts.
const OfflineContextLimit = 4000

// OfflineOverrides are the preset overrides the offline mode sends with its
// threshold events. The default preset (adaptive) offloads a result in its
// offload pass only when it is over 5,000 tokens (offload.min_tokens); the
// test log is about 3,000, the size of a real tool result, so the example
// lowers that threshold to 1,000. (In this small context the default preset
// would offload the log anyway, through the budget ladder, whose
// budget.offload_min_tokens is 1,000, because the conversation is over 90%
// of the limit; a larger context is not.)
const OfflineOverrides = `{"offload":{"min_tokens":1000}}`

// OfflineRecoverLines bounds a recovery in the offline mode: the whole log
// would put the small context over its threshold again.
const OfflineRecoverLines = 40

// TestTool is the local tool the scripted model calls first; its result is
// TestLog.
const TestTool = "run_tests"

// OfflineConversation is the task the offline mode starts from when given
// no conversation.
func OfflineConversation() []byte {
	return []byte(`{"messages":[` +
		`{"role":"system","content":"You are a coding agent. Use the tools; read back offloaded results with recover_context."},` +
		`{"role":"user","content":"Run the test suite and tell me how the slowest package did."}]}`)
}

// TestLog is the result of the test tool: a deterministic go test -v log
// of about 3,000 tokens, plain text that the default post-processing
// leaves as it is (no table delimiters, no error lines).
func TestLog() string {
	var b strings.Builder
	for i := range 80 {
		pkg := fmt.Sprintf("github.com/acme/shop/internal/pkg%03d", i)
		fmt.Fprintf(&b, "=== RUN   TestCheckout%03d/cart_with_%d_items\n", i, i%7+1)
		fmt.Fprintf(&b, "--- PASS: TestCheckout%03d (%d.%02ds) ok %s %d.%03ds\n", i, i%3, i%100, pkg, i%5, (i*37)%1000)
	}
	b.WriteString("PASS\nok  \tgithub.com/acme/shop\t41.207s")
	return b.String()
}

// OfflineTool is the agent's test tool in the offline mode.
func OfflineTool() LocalTool {
	return LocalTool{
		Def: openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: TestTool, Description: "Run the test suite and return its log.",
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
		}},
		Run: func(context.Context, string) string { return TestLog() },
	}
}

// RunOffline runs the loop against a ScriptedModel started for the run,
// with the test tool; what cfg leaves unset takes the offline defaults
// (model "scripted", OfflineContextLimit, OfflineOverrides,
// OfflineRecoverLines, threshold 0.5, 10 turns). A nil conversation is
// OfflineConversation.
func RunOffline(ctx context.Context, cfg Config, conversation []byte) (Report, error) {
	model, err := StartScriptedModel()
	if err != nil {
		return Report{}, err
	}
	defer model.Close()
	oc := openai.DefaultConfig("offline")
	oc.BaseURL = model.URL()
	cfg.LLM = openai.NewClientWithConfig(oc)
	if cfg.Model == "" {
		cfg.Model = "scripted"
	}
	if cfg.ContextLimit == 0 {
		cfg.ContextLimit = OfflineContextLimit
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = 0.5
	}
	if cfg.Overrides == nil {
		cfg.Overrides = json.RawMessage(OfflineOverrides)
	}
	if cfg.MaxRecoverLines == 0 {
		cfg.MaxRecoverLines = OfflineRecoverLines
	}
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = 10
	}
	cfg.LocalTools = append(cfg.LocalTools, OfflineTool())
	if conversation == nil {
		conversation = OfflineConversation()
	}
	return Run(ctx, cfg, conversation)
}

// ScriptedModel is an OpenAI-compatible Chat Completions server that plays
// an agent's model without an LLM. Every answer follows from the
// conversation it is sent, so a compaction between two calls changes what
// it does next:
//
//  1. no tool result yet: it calls the test tool (TestTool);
//  2. an offload reference it has not recovered ("… recover_context tool,
//     id: ID", as a compacted conversation holds it): it calls
//     recover_context with that id;
//  3. otherwise it answers, quoting the first line it recovered.
type ScriptedModel struct {
	srv *http.Server
	url string
	seq atomic.Int64
}

// StartScriptedModel serves a ScriptedModel on a free local port.
func StartScriptedModel() (*ScriptedModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	m := &ScriptedModel{url: "http://" + ln.Addr().String() + "/v1"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.handle)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		// Serve returns ErrServerClosed once Close is called.
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// URL is the API base URL, ending in /v1.
func (m *ScriptedModel) URL() string { return m.url }

// Close stops the server.
func (m *ScriptedModel) Close() error { return m.srv.Close() }

// referenceID finds the offload references of a compacted conversation
// (internal/strategy.Reference writes them).
var referenceID = regexp.MustCompile(`recover_context tool, id: ([A-Za-z0-9._-]+)`)

func (m *ScriptedModel) handle(w http.ResponseWriter, r *http.Request) {
	reqID := fmt.Sprintf("req_%06d", m.seq.Add(1))
	var req openai.ChatCompletionRequest
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	switch {
	case err != nil:
		writeAPIError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. ("+err.Error()+")")
		return
	case req.Model == "":
		writeAPIError(w, http.StatusBadRequest, "you must provide a model parameter")
		return
	case len(req.Messages) == 0:
		writeAPIError(w, http.StatusBadRequest, "[] is too short - 'messages'")
		return
	case req.Stream:
		writeAPIError(w, http.StatusBadRequest, "the scripted model does not stream")
		return
	}
	call, args, answer, err := script(req)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	message := map[string]any{"role": "assistant", "content": answer}
	finish := "stop"
	if call != "" {
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_" + reqID, "type": "function",
			"function": map[string]any{"name": call, "arguments": args},
		}}}
		finish = "tool_calls"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-" + reqID, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": 20, "total_tokens": len(body)/4 + 20},
	})
}

// script decides the next move from the conversation: a tool call (call,
// its JSON arguments) or an answer.
func script(req openai.ChatCompletionRequest) (call, args, answer string, err error) {
	offered := map[string]bool{}
	for _, t := range req.Tools {
		if t.Function != nil {
			offered[t.Function.Name] = true
		}
	}
	asked := map[string]bool{}     // offload ids recover_context was called with
	results := map[string]string{} // tool results by call id
	var recoverCalls []string      // recover_context call ids, in order
	var named []string
	toolResults := 0
	for _, msg := range req.Messages {
		text := contentText(msg)
		for _, sub := range referenceID.FindAllStringSubmatch(text, -1) {
			named = append(named, sub[1])
		}
		if msg.Role == "tool" {
			toolResults++
			results[msg.ToolCallID] = text
		}
		for _, tc := range msg.ToolCalls {
			var a struct {
				ID string `json:"id"`
			}
			if tc.Function.Name == "recover_context" && json.Unmarshal([]byte(tc.Function.Arguments), &a) == nil {
				asked[a.ID] = true
				recoverCalls = append(recoverCalls, tc.ID)
			}
		}
	}
	if toolResults == 0 && len(named) == 0 {
		if !offered[TestTool] {
			return "", "", "", fmt.Errorf("the scripted model needs the %s tool", TestTool)
		}
		return TestTool, "{}", "", nil
	}
	for _, id := range named {
		if !asked[id] {
			if !offered["recover_context"] {
				return "", "", "", errors.New("the scripted model needs the recover_context tool")
			}
			data, _ := json.Marshal(map[string]string{"id": id})
			return "recover_context", string(data), "", nil
		}
	}
	if n := len(recoverCalls); n > 0 {
		if text, ok := results[recoverCalls[n-1]]; ok {
			first, _, _ := strings.Cut(text, "\n")
			return "", "", "The test log was offloaded when my context was compacted, and I read it back with recover_context. It starts: " + first, nil
		}
	}
	return "", "", "The test log was never offloaded, so there was nothing to recover: the preset kept it in the context.", nil
}

// contentText flattens a message content: a string, or the text parts of
// a list (go-openai decodes either).
func contentText(msg openai.ChatCompletionMessage) string {
	if len(msg.MultiContent) == 0 {
		return msg.Content
	}
	var b strings.Builder
	for _, p := range msg.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func writeAPIError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": message, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The client may be gone; nothing useful can be done about it here.
	_ = json.NewEncoder(w).Encode(v)
}
