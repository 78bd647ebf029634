// Package agent is a runnable example of an agent platform integrating the
// orchestrator: an agent loop against any OpenAI-compatible endpoint that
// sends a threshold event when its conversation nears the model's limit,
// swaps in the compacted conversation, and serves the agent's
// recover_context calls through the API, so that the model can read back
// what was offloaded.
//
// Run it with `go run ./examples/agent/cmd/agent -h`; the e2e tests run it
// against the real stack (e2e/example_test.go).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/ctxcompact/orchestrator/client"
)

// Config is what the example needs.
type Config struct {
	// API is the orchestrator (its client, with the tenant's key), Session
	// the agent session's name.
	API     *client.Client
	Session string
	// LLM is the agent's model endpoint and Model its name.
	LLM   *openai.Client
	Model string
	// ContextLimit is the model's context in tokens; Threshold the share
	// of it at which the agent asks for a compaction (auto-summarize: 0.5).
	ContextLimit int
	Threshold    float64
	// Overrides are the preset overrides sent with every threshold event
	// (api/openapi.yaml), e.g. {"offload":{"min_tokens":1000}}; nil
	// keeps the deployment's.
	Overrides json.RawMessage
	// LocalTools are tools the agent runs itself, offered to the model
	// beside the recovery tools the API defines.
	LocalTools []LocalTool
	// MaxTurns bounds the loop.
	MaxTurns int
	// MaxRecoverLines bounds what one recovery puts back into the
	// context: a whole offloaded result would overflow it again.
	MaxRecoverLines int
	// Log receives one line per step; nil is silent.
	Log func(format string, args ...any)
}

// LocalTool is a tool the agent runs in its own process.
type LocalTool struct {
	Def openai.Tool
	// Run answers one call with the call's JSON arguments.
	Run func(ctx context.Context, arguments string) string
}

// Report is what the loop did.
type Report struct {
	Turns     int
	Events    []string // run ids of the compactions
	Recovered []string // offload ids read back through the tool
	Final     string   // the model's last answer
}

// Run runs the agent loop on conversation (OpenAI Chat Completions JSON,
// `{"messages": [...]}`) until the model answers without a tool call or
// MaxTurns is reached.
func Run(ctx context.Context, cfg Config, conversation []byte) (Report, error) {
	var rep Report
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	msgs, err := decode(conversation)
	if err != nil {
		return rep, err
	}
	toolDefs, err := cfg.API.Tools(ctx, "openai")
	if err != nil {
		return rep, fmt.Errorf("get recovery tools: %w", err)
	}
	var tools []openai.Tool
	for _, raw := range toolDefs {
		var t openai.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return rep, fmt.Errorf("decode tool definition: %w", err)
		}
		tools = append(tools, t)
	}
	for _, lt := range cfg.LocalTools {
		tools = append(tools, lt.Def)
	}
	for rep.Turns < cfg.MaxTurns {
		rep.Turns++
		if estimate(msgs) > int(float64(cfg.ContextLimit)*cfg.Threshold) {
			compacted, runID, err := compact(ctx, cfg, msgs, rep.Turns)
			if err != nil {
				return rep, err
			}
			logf("turn %d: compacted %d → %d messages (run %s)", rep.Turns, len(msgs), len(compacted), runID)
			msgs = compacted
			rep.Events = append(rep.Events, runID)
		}
		resp, err := cfg.LLM.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: cfg.Model, Messages: msgs, Tools: tools})
		if err != nil {
			return rep, fmt.Errorf("turn %d: model: %w", rep.Turns, err)
		}
		if len(resp.Choices) == 0 {
			return rep, fmt.Errorf("turn %d: model answered no choice", rep.Turns)
		}
		answer := resp.Choices[0].Message
		msgs = append(msgs, answer)
		if len(answer.ToolCalls) == 0 {
			rep.Final = answer.Content
			logf("turn %d: answer (%d characters)", rep.Turns, len(answer.Content))
			return rep, nil
		}
		for _, call := range answer.ToolCalls {
			out, id := serveTool(ctx, cfg, call)
			if id != "" {
				rep.Recovered = append(rep.Recovered, id)
			}
			logf("turn %d: %s → %d characters", rep.Turns, call.Function.Name, len(out))
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: call.ID, Content: out})
		}
	}
	return rep, nil
}

// compact sends a threshold event and returns the compacted conversation.
func compact(ctx context.Context, cfg Config, msgs []openai.ChatCompletionMessage, turn int) ([]openai.ChatCompletionMessage, string, error) {
	body, err := json.Marshal(map[string]any{"messages": msgs})
	if err != nil {
		return nil, "", fmt.Errorf("encode conversation: %w", err)
	}
	ev := client.Event{EventID: fmt.Sprintf("%s-turn-%d", cfg.Session, turn), Kind: "threshold", Model: cfg.Model,
		ContextLimit: cfg.ContextLimit, Conversation: body, Overrides: cfg.Overrides, WaitSeconds: 60}
	res, acc, err := cfg.API.Submit(ctx, cfg.Session, ev)
	if err != nil {
		return nil, "", fmt.Errorf("threshold event: %w", err)
	}
	if res == nil {
		// Still running after the wait: wait for it, then fetch its output.
		run, err := cfg.API.WaitFinal(ctx, acc.RunID)
		if err != nil {
			return nil, "", fmt.Errorf("wait for run %s: %w", acc.RunID, err)
		}
		// The answer is the run's whole outcome, conversation included.
		res = &run.Result
	}
	if res.Status != "succeeded" && res.Status != "over_limit" {
		return nil, "", fmt.Errorf("run %s ended %s: %s", res.RunID, res.Status, res.Error)
	}
	compacted, err := decode(res.Conversation)
	if err != nil {
		return nil, "", fmt.Errorf("compacted conversation: %w", err)
	}
	return compacted, res.RunID, nil
}

// serveTool answers one tool call of the model; id is the offload it
// recovered, if any.
func serveTool(ctx context.Context, cfg Config, call openai.ToolCall) (out, id string) {
	for _, lt := range cfg.LocalTools {
		if lt.Def.Function != nil && lt.Def.Function.Name == call.Function.Name {
			return lt.Run(ctx, call.Function.Arguments), ""
		}
	}
	var args struct {
		ID    string `json:"id"`
		Lines string `json:"lines"`
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
		return "error: arguments are not JSON: " + err.Error(), ""
	}
	switch call.Function.Name {
	case "recover_context":
		data, err := cfg.API.Recover(ctx, cfg.Session, args.ID, args.Lines)
		var ae *client.Error
		if errors.As(err, &ae) {
			return "error: " + ae.Message, ""
		}
		if err != nil {
			return "error: " + err.Error(), ""
		}
		text := string(data)
		if lines := strings.SplitAfter(text, "\n"); args.Lines == "" && cfg.MaxRecoverLines > 0 && len(lines) > cfg.MaxRecoverLines {
			text = strings.Join(lines[:cfg.MaxRecoverLines], "") + fmt.Sprintf(
				"\n[… %d more lines: call recover_context with lines, e.g. %d-%d]", len(lines)-cfg.MaxRecoverLines,
				cfg.MaxRecoverLines+1, 2*cfg.MaxRecoverLines)
		}
		return text, args.ID
	case "search_context":
		hits, err := cfg.API.Search(ctx, cfg.Session, args.Query)
		if err != nil {
			return "error: " + err.Error(), ""
		}
		data, _ := json.Marshal(hits)
		return string(data), ""
	}
	return "error: unknown tool " + call.Function.Name, ""
}

// decode reads an OpenAI conversation, `{"messages": [...]}` or a bare
// array of messages.
func decode(data []byte) ([]openai.ChatCompletionMessage, error) {
	var doc struct {
		Messages []openai.ChatCompletionMessage `json:"messages"`
	}
	if strings.HasPrefix(strings.TrimSpace(string(data)), "[") {
		if err := json.Unmarshal(data, &doc.Messages); err != nil {
			return nil, fmt.Errorf("decode conversation: %w", err)
		}
		return doc.Messages, nil
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode conversation: %w", err)
	}
	return doc.Messages, nil
}

// estimate is a cheap token estimate (4 characters a token): the agent
// only needs to know when to ask; the service counts exactly.
func estimate(msgs []openai.ChatCompletionMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.ToolCallID)
		for _, p := range m.MultiContent {
			n += len(p.Text)
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Arguments)
		}
	}
	return n / 4
}
