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
// request and answers with a short response object, or, while streams
// holds any, streams the next one's output items as the API does.
type responsesUpstream struct {
	mu      sync.Mutex
	bodies  [][]byte
	heads   []http.Header
	streams [][]string
}

func (u *responsesUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.heads = append(u.heads, r.Header.Clone())
	var items []string
	if len(u.streams) > 0 {
		items, u.streams = u.streams[0], u.streams[1:]
	}
	n := len(u.bodies)
	u.mu.Unlock()
	if items == nil {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`)
		return
	}
	// The stream of a response with items: its start, each item
	// announced, a function call's arguments as a delta, each item's
	// end, the response's end; sequence numbers from 0.
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_%d", n)
	seq := 0
	send := func(typ, fields string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, fields)
		w.(http.Flusher).Flush()
		seq++
	}
	start := fmt.Sprintf(`"response":{"id":%q,"object":"response","status":"in_progress","output":[],"tools":%s}`, id, toolsOf(body))
	send("response.created", start)
	send("response.in_progress", start)
	for i, item := range items {
		var it struct {
			Type      string `json:"type"`
			Arguments string `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(item), &it); err != nil {
			panic(err) // the test's own items
		}
		send("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item))
		if it.Type == "function_call" {
			delta, _ := json.Marshal(it.Arguments)
			send("response.function_call_arguments.delta", fmt.Sprintf(`"output_index":%d,"delta":%s`, i, delta))
		}
		send("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item))
	}
	send("response.completed", fmt.Sprintf(`"response":{"id":%q,"object":"response","status":"completed","output":[%s],"tools":%s,"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`,
		id, strings.Join(items, ","), toolsOf(body)))
}

// toolsOf is a request's tools, which a response echoes.
func toolsOf(body []byte) json.RawMessage {
	var v struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &v) != nil || v.Tools == nil {
		return json.RawMessage("[]")
	}
	return v.Tools
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
// provider as they were; each compaction is a run of kind proxy. Then
// the model, streaming as Codex has it, calls the recover tool the proxy
// offers beside the references its compacted input names, and reads
// the stored text back verbatim; the host reads one stream, without the
// tool.
func TestProxyCompactsAResponsesSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
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
	var prevSent []byte
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
		prevItems, prevSent = v.Input, sent
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

	// The compacted input names cut content by id; the host has no
	// recover tool, so the proxy offers its own, a flat function tool,
	// and answers the model's call from the store.
	id := recoverRef.FindSubmatch(prevSent)
	require.NotNil(t, id, "the compacted input names cut content")
	require.Contains(t, string(prevSent), `{"type":"function","name":"recover_context","description":`, "the proxy offers the tool beside the reference")
	call := fmt.Sprintf(`{"type":"function_call","id":"fc_r1","call_id":"call_r1","name":"recover_context","arguments":%q,"status":"completed"}`,
		fmt.Sprintf(`{"id":%q}`, id[1]))
	reasoning := `{"type":"reasoning","id":"rs_r1","summary":[],"encrypted_content":"gAAAA-recover"}`
	after := `{"type":"message","id":"msg_r2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Read it back: the cut content is here.","annotations":[]}]}`
	up.mu.Lock()
	up.streams = [][]string{{reasoning, call}, {after}}
	calls := len(up.bodies)
	up.mu.Unlock()
	instructions, items := asItems(t, msgs)
	items = append(items, json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":"What did the part that was cut say?"}]}`))
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "instructions": instructions, "input": items,
		"store": false, "stream": true, "include": []string{"reasoning.encrypted_content"}})
	require.NoError(t, err)
	stream, state := proxyStream(t, srv, "/proxy/openai/v1/responses", body, key, "codex-11742", limit)
	require.Contains(t, stream, "Read it back")
	require.NotContains(t, stream, "recover_context", "the host never sees the proxy's tool")
	require.Contains(t, state, "recover_context offered")

	// The host read one response: its events numbered on, its items
	// numbered on across the follow-up, its end listing what it got.
	var seqs, indexes []int
	var final struct {
		Output []json.RawMessage `json:"output"`
	}
	for _, chunk := range strings.Split(strings.TrimSpace(stream), "\n\n") {
		_, data, ok := strings.Cut(chunk, "data: ")
		if !ok {
			continue // a keep-alive comment
		}
		var ev struct {
			Type           string          `json:"type"`
			SequenceNumber int             `json:"sequence_number"`
			OutputIndex    *int            `json:"output_index"`
			Response       json.RawMessage `json:"response"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &ev), chunk)
		seqs = append(seqs, ev.SequenceNumber)
		if ev.Type == "response.output_item.added" {
			indexes = append(indexes, *ev.OutputIndex)
		}
		if ev.Type == "response.completed" {
			require.NoError(t, json.Unmarshal(ev.Response, &final))
		}
	}
	for i, n := range seqs {
		require.Equal(t, i, n, "sequence numbers follow on across the follow-up")
	}
	require.Equal(t, []int{0, 1}, indexes, "the reasoning, then the answer after the recovery")
	require.Len(t, final.Output, 2)
	require.JSONEq(t, reasoning, string(final.Output[0]))
	require.JSONEq(t, after, string(final.Output[1]))

	up.mu.Lock()
	require.Len(t, up.bodies, calls+2, "the request and the proxy's follow-up")
	followUp, followHead := up.bodies[calls+1], up.heads[calls+1]
	up.mu.Unlock()
	require.Equal(t, "Bearer sk-agent-own-key", followHead.Get("Authorization"), "the follow-up carries the agent's key")
	require.Empty(t, followHead.Get(proxy.HeaderKey))
	var fu struct {
		Input []json.RawMessage `json:"input"`
	}
	require.NoError(t, json.Unmarshal(followUp, &fu))
	require.Greater(t, len(fu.Input), 3)
	added := fu.Input[len(fu.Input)-3:]
	require.JSONEq(t, reasoning, string(added[0]), "the model's reasoning goes back with its encrypted content")
	require.JSONEq(t, call, string(added[1]), "the model's call goes back as it made it")
	var answer struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(added[2], &answer))
	require.Equal(t, "function_call_output", answer.Type)
	require.Equal(t, "call_r1", answer.CallID)
	requireRecovered(t, e, "codex-11742", string(id[1]), answer.Output)
}

// proxyStream is proxyPost for a streamed answer: the stream as the host
// read it, and its X-Compactor-State.
func proxyStream(t *testing.T, srv *httptest.Server, path string, body []byte, key, session string, limit int) (string, string) {
	t.Helper()
	stream, state := proxyPost(t, srv, path, body, key, session, limit)
	return string(stream), state
}
