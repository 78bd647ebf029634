package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// responsesUpstream is a fake OpenAI Responses endpoint: it keeps every
// request and answers with a short response object.
type responsesUpstream struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (u *responsesUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`)
}

// asItems writes a recorded chat transcript as the Responses input items
// a stateless host (Codex) sends: the system prompt as instructions, an
// encrypted reasoning item before each assistant turn. Written here, apart
// from the proxy's own conversion, so that the test does not check the
// proxy against itself.
func asItems(t *testing.T, msgs []json.RawMessage) (instructions string, items []json.RawMessage) {
	t.Helper()
	for i, raw := range msgs {
		var m struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
		require.NoError(t, json.Unmarshal(raw, &m), "message %d", i)
		add := func(v any) {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			items = append(items, b)
		}
		switch m.Role {
		case "system":
			if i == 0 {
				instructions = m.Content
				continue
			}
			add(map[string]any{"type": "message", "role": "developer", "content": m.Content})
		case "user":
			add(map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": m.Content}}})
		case "assistant":
			add(map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", i), "summary": []any{}, "encrypted_content": fmt.Sprintf("gAAAA-encrypted-%d", i)})
			if m.Content != "" {
				add(map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": m.Content}}})
			}
			for _, c := range m.ToolCalls {
				add(map[string]any{"type": "function_call", "id": "fc_" + c.ID, "call_id": c.ID, "name": c.Function.Name, "arguments": c.Function.Arguments})
			}
		case "tool":
			add(map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.Content})
		}
	}
	return instructions, items
}

// itemsChat reads input items back as a chat conversation for the
// checks: messages, calls and their outputs; reasoning is the provider's.
func itemsChat(t *testing.T, what string, instructions string, items []json.RawMessage) conversation.Conversation {
	t.Helper()
	msgs := []any{map[string]any{"role": "system", "content": instructions}}
	for _, raw := range items {
		var it struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Output    string          `json:"output"`
		}
		require.NoError(t, json.Unmarshal(raw, &it), what)
		text := func() string {
			var s string
			if json.Unmarshal(it.Content, &s) == nil {
				return s
			}
			var parts []struct {
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(it.Content, &parts), what)
			var b strings.Builder
			for _, p := range parts {
				b.WriteString(p.Text)
			}
			return b.String()
		}
		switch it.Type {
		case "reasoning":
		case "message":
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			msgs = append(msgs, map[string]any{"role": role, "content": text()})
		case "function_call":
			call := map[string]any{"id": it.CallID, "type": "function", "function": map[string]any{"name": it.Name, "arguments": it.Arguments}}
			if last, ok := msgs[len(msgs)-1].(map[string]any); ok && last["role"] == "assistant" {
				calls, _ := last["tool_calls"].([]any)
				last["tool_calls"] = append(calls, call)
				continue
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}})
		case "function_call_output":
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": it.CallID, "content": it.Output})
		default:
			t.Fatalf("%s: unexpected item type %q", what, it.Type)
		}
	}
	doc, err := json.Marshal(map[string]any{"messages": msgs})
	require.NoError(t, err)
	conv, err := conversation.Parse(doc, conversation.FormatOpenAI)
	require.NoError(t, err, what)
	return conv
}

// TestProxyCompactsAResponsesSession drives the recorded SWE-agent
// session as a stateless Responses host would (Codex: instructions, the
// whole input each turn, encrypted reasoning items) through
// /proxy/openai/v1/responses on the whole stack, against a 16,000-token
// limit. Every request the provider gets reads back as a conversation
// whose calls pair, under the limit, with the task verbatim; the
// reasoning items the host appended since a compaction reach the
// provider as they were; each compaction is a run of kind proxy.
func TestProxyCompactsAResponsesSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, offline())
	up := &responsesUpstream{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	const limit = 16000
	srv, key := proxyServer(t, e, proxy.Config{OpenAIURL: upstream.URL + "/v1", WaitFor: 2 * time.Minute, Target: proxy.DefaultTarget})

	msgs, task := recording(t)
	counter, err := tokens.New(tokens.EncodingForModel("gpt-4o"))
	require.NoError(t, err)

	turns, spliced := 0, 0
	var prevItems []json.RawMessage
	for i := 2; i < len(msgs); i++ {
		var role struct {
			Role string `json:"role"`
		}
		require.NoError(t, json.Unmarshal(msgs[i], &role))
		if role.Role != "assistant" {
			continue
		}
		instructions, items := asItems(t, msgs[:i])
		body, err := json.Marshal(map[string]any{"model": "gpt-4o", "instructions": instructions, "input": items,
			"store": false, "include": []string{"reasoning.encrypted_content"}})
		require.NoError(t, err)
		_, state := proxyPost(t, srv, "/proxy/openai/v1/responses", body, key, "codex-11742", limit)
		require.NotContains(t, state, "degraded", "turn %d", i)
		require.NotContains(t, state, "not compacted", "turn %d", i)
		turns++

		up.mu.Lock()
		sent := up.bodies[len(up.bodies)-1]
		up.mu.Unlock()
		what := fmt.Sprintf("turn %d (%s)", i, state)
		var v struct {
			Instructions string            `json:"instructions"`
			Input        []json.RawMessage `json:"input"`
		}
		require.NoError(t, json.Unmarshal(sent, &v), what)
		require.Equal(t, instructions, v.Instructions, "%s: the instructions are the host's", what)
		conv := itemsChat(t, what, v.Instructions, v.Input)
		require.NoError(t, conversation.CheckPairing(conv), what)
		require.LessOrEqual(t, tokens.Conversation(counter, conv), limit, what)
		require.True(t, hasUserText(conv, task), "%s: the task verbatim", what)
		if strings.HasPrefix(state, "spliced") {
			spliced++
			// What the host appended since the compaction went as it
			// came, its reasoning items included.
			require.Equal(t, items[len(items)-1], v.Input[len(v.Input)-1], what)
		} else {
			require.Equal(t, body, sent, "%s: forwarded byte for byte", what)
		}
		prevItems = v.Input
	}
	require.NotEmpty(t, prevItems)
	require.Greater(t, spliced, turns/3, "most turns after the first compaction go spliced")
	runs, err := e.store.ListRuns(context.Background(), store.RunFilter{Tenant: e.tenant, Session: "codex-11742"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(runs), 2, "the session compacted more than once")
	for _, r := range runs {
		require.Equal(t, "proxy", r.Trigger, r.ID)
		require.NotEqual(t, store.RunFailed, r.Status, r.ID)
	}
	t.Logf("%d turns, %d spliced, %d runs", turns, spliced, len(runs))
}
