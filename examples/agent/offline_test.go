package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"
)

// TestScriptedModelProtocol: the scripted model speaks Chat Completions
// (read by the go-openai client, and as raw JSON) and plays its script
// from the conversation alone: the test tool first, recover_context for
// an offload reference, then an answer quoting what was recovered.
func TestScriptedModelProtocol(t *testing.T) {
	t.Parallel()
	m, err := StartScriptedModel()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	oc := openai.DefaultConfig("offline")
	oc.BaseURL = m.URL()
	llm := openai.NewClientWithConfig(oc)

	conv, err := decode(OfflineConversation())
	require.NoError(t, err)
	recoverTool := openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "recover_context", Parameters: json.RawMessage(`{"type":"object"}`)}}
	tools := []openai.Tool{recoverTool, OfflineTool().Def}
	id := strings.Repeat("ab", 32)
	reference := "## Offloaded: run_tests Result\n**Preview:**\n> === RUN\n\n*Recover the full content with the recover_context tool, id: " + id + "*\nTool result is at: offloads/s/" + id
	call := func(id, name, args string) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{
			ID: id, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}}}}
	}
	result := func(id, text string) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: id, Content: text}
	}
	afterTests := append(conv[:len(conv):len(conv)], call("call_1", TestTool, "{}"), result("call_1", TestLog()))
	compacted := append(conv[:len(conv):len(conv)], call("call_1", TestTool, "{}"), result("call_1", reference))
	recovered := append(compacted[:len(compacted):len(compacted)], call("call_2", "recover_context", `{"id":"`+id+`"}`),
		result("call_2", "=== RUN   TestCheckout000/cart_with_1_items\n--- PASS"))

	tests := []struct {
		name     string
		msgs     []openai.ChatCompletionMessage
		tool     string // the tool called, "" for an answer
		args     string
		finish   openai.FinishReason
		contains string // in the answer
	}{
		{"starts with the test tool", conv, TestTool, "{}", openai.FinishReasonToolCalls, ""},
		{"recovers a reference", compacted, "recover_context", `{"id":"` + id + `"}`, openai.FinishReasonToolCalls, ""},
		{"answers with what it recovered", recovered, "", "", openai.FinishReasonStop, "It starts: === RUN   TestCheckout000/cart_with_1_items"},
		{"answers when nothing was offloaded", afterTests, "", "", openai.FinishReasonStop, "never offloaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := llm.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: "scripted", Messages: tc.msgs, Tools: tools})
			require.NoError(t, err)
			require.Equal(t, "chat.completion", resp.Object)
			require.Equal(t, "scripted", resp.Model)
			require.Len(t, resp.Choices, 1)
			got := resp.Choices[0]
			require.Equal(t, tc.finish, got.FinishReason)
			require.Equal(t, openai.ChatMessageRoleAssistant, got.Message.Role)
			if tc.tool == "" {
				require.Empty(t, got.Message.ToolCalls)
				require.Contains(t, got.Message.Content, tc.contains)
				return
			}
			require.Len(t, got.Message.ToolCalls, 1)
			tcall := got.Message.ToolCalls[0]
			require.NotEmpty(t, tcall.ID)
			require.Equal(t, openai.ToolTypeFunction, tcall.Type)
			require.Equal(t, tc.tool, tcall.Function.Name)
			require.JSONEq(t, tc.args, tcall.Function.Arguments)
		})
	}
}

// TestScriptedModelRejects: requests a real endpoint rejects get its
// error JSON and status, so the agent sees what it would see online.
func TestScriptedModelRejects(t *testing.T) {
	t.Parallel()
	m, err := StartScriptedModel()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	tests := []struct {
		name, body, message string
	}{
		{"not JSON", `{`, "could not parse the JSON body"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model parameter"},
		{"no messages", `{"model":"scripted","messages":[]}`, "too short"},
		{"stream", `{"model":"scripted","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "does not stream"},
		{"test tool not offered", `{"model":"scripted","messages":[{"role":"user","content":"hi"}]}`, "needs the run_tests tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Post(m.URL()+"/chat/completions", "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", data)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var body struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(data, &body))
			require.Equal(t, "invalid_request_error", body.Error.Type)
			require.Contains(t, body.Error.Message, tc.message)
		})
	}
}
