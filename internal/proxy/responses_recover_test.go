package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// responsesHostTools are a Codex-like request's tools: a function tool
// of its own and a built-in one, which has no name.
const responsesHostTools = `{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"web_search"}`

// responsesRecoverBody is a stateless Responses request (as Codex sends
// one) whose input holds a reference, with tools.
func responsesRecoverBody(stream bool, tools string) string {
	return fmt.Sprintf(`{"model":"gpt-5-codex","instructions":"You are Codex.","input":[`+
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the parser. Test log: %s"}]}],`+
		`"tools":[%s],"store":false,"stream":%t,"include":["reasoning.encrypted_content"]}`, referenceNote, tools, stream)
}

// The output items of the tests: the model's reasoning, its call of the
// recover tool, its answer after it, a call of the host's own tool.
const (
	reasoningItem = `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA-1"}`
	recoverItem   = `{"type":"function_call","id":"fc_r","call_id":"call_r","name":"recover_context","arguments":"{\"id\":\"log1\"}","status":"completed"}`
	shellItem     = `{"type":"function_call","id":"fc_s","call_id":"call_s","name":"shell","arguments":"{\"cmd\":\"ls\"}","status":"completed"}`
	reasoning2    = `{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAA-2"}`
	answerItem    = `{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"The test expects a closing paren.","annotations":[]}]}`
)

// echoedTools are the tools a response lists: the request's, as the
// provider echoes them, the offered one included.
var echoedTools = `[` + responsesHostTools + `,` + recoverFunction + `]`

// responseObject is a response with its output items, as the API
// answers a request whole or ends a stream.
func responseObject(id, status string, items ...string) string {
	return fmt.Sprintf(`{"id":%q,"object":"response","status":%q,"store":false,"tools":%s,"output":[%s],"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`,
		id, status, echoedTools, strings.Join(items, ","))
}

// responsesEvents are the events the API streams for a response with
// items: its start, each item announced, its deltas and its end, the
// response's end; sequence numbers from 0.
func responsesEvents(t *testing.T, id string, items ...string) []string {
	t.Helper()
	var evs []string
	add := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = len(evs)
		data, err := json.Marshal(fields)
		require.NoError(t, err)
		evs = append(evs, "event: "+typ+"\ndata: "+string(data)+"\n\n")
	}
	add("response.created", map[string]any{"response": json.RawMessage(responseObject(id, "in_progress"))})
	add("response.in_progress", map[string]any{"response": json.RawMessage(responseObject(id, "in_progress"))})
	for i, raw := range items {
		var it map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &it))
		started := map[string]any{}
		for k, v := range it {
			started[k] = v
		}
		switch it["type"] {
		case "function_call":
			started["arguments"], started["status"] = "", "in_progress"
		case "message":
			started["content"], started["status"] = []any{}, "in_progress"
		}
		add("response.output_item.added", map[string]any{"output_index": i, "item": started})
		switch it["type"] {
		case "function_call":
			args := it["arguments"].(string)
			add("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": it["id"], "delta": args[:len(args)/2]})
			add("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": it["id"], "delta": args[len(args)/2:]})
			add("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": it["id"], "arguments": args})
		case "message":
			text := it["content"].([]any)[0].(map[string]any)["text"]
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			add("response.content_part.added", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "part": part})
			add("response.output_text.delta", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "delta": text})
			add("response.output_text.done", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "text": text})
		}
		add("response.output_item.done", map[string]any{"output_index": i, "item": json.RawMessage(raw)})
	}
	add("response.completed", map[string]any{"response": json.RawMessage(responseObject(id, "completed", items...))})
	return evs
}

// hostEvent is an event of the stream the host read.
type hostEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int            `json:"sequence_number"`
	OutputIndex    *int            `json:"output_index"`
	Item           json.RawMessage `json:"item"`
	Response       struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
	} `json:"response"`
}

// hostEvents reads the stream the host got.
func hostEvents(t *testing.T, stream string) []hostEvent {
	t.Helper()
	var out []hostEvent
	require.NoError(t, readEvents(strings.NewReader(stream), func(ev sseEvent) bool {
		if len(ev.data) == 0 {
			return true // a keep-alive comment
		}
		var v hostEvent
		require.NoError(t, json.Unmarshal(ev.data, &v), string(ev.raw))
		require.Equal(t, ev.name, v.Type, "the event's name is its type")
		out = append(out, v)
		return true
	}))
	return out
}

// requireItems checks items are want, in order, byte for byte but white
// space.
func requireItems(t *testing.T, want []string, got []json.RawMessage, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.JSONEq(t, want[i], string(got[i]), "%s: item %d", what, i)
	}
}

func TestTheProxyAnswersRecoverCallsOnTheResponsesAPI(t *testing.T) {
	t.Parallel()
	const logText = "FAIL parser_test.go:12\nexpected ')' got EOF"
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			tp := newTestProxy(t, nil)
			tp.texts["log1"] = logText
			if stream {
				tp.openai.queue = []func(http.ResponseWriter, *http.Request){
					// A keep-alive comment of the provider passes on.
					sse(append([]string{": upstream keep-alive\n\n"}, responsesEvents(t, "resp_1", reasoningItem, recoverItem)...)...),
					sse(responsesEvents(t, "resp_2", reasoning2, answerItem)...),
				}
			} else {
				tp.openai.queue = []func(http.ResponseWriter, *http.Request){
					jsonAnswer(responseObject("resp_1", "completed", reasoningItem, recoverItem)),
					jsonAnswer(responseObject("resp_2", "completed", reasoning2, answerItem)),
				}
			}
			body := responsesRecoverBody(stream, responsesHostTools)
			resp := tp.post(t, "/proxy/openai/v1/responses", body, map[string]string{
				HeaderContextLimit: "100000", HeaderSession: "s1", "Authorization": "Bearer sk-agent"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got := readAll(t, resp)
			require.Contains(t, got, "The test expects a closing paren.")
			require.NotContains(t, got, RecoverTool, "the host never sees the tool, nor its echo in the response's tools")
			require.Contains(t, got, `"name":"shell"`, "the host's own tools are echoed as they were")

			// The upstream: the tool offered after the host's tools, then
			// one follow-up with the agent's headers whose input ends
			// with the model's items and the stored text.
			require.Equal(t, 2, tp.openai.count(), "one follow-up request")
			first, second := tp.openai.calls[0], tp.openai.calls[1]
			require.Equal(t, "/v1/responses", second.Path)
			require.Equal(t, []string{"shell", "", RecoverTool}, toolNames(t, first.Body), "the tool is offered after the host's own, built-ins kept")
			require.Contains(t, string(first.Body), `"name":"recover_context","description":`, "a flat function tool")
			require.Equal(t, "Bearer sk-agent", second.Header.Get("Authorization"), "the follow-up carries the agent's key")
			require.Empty(t, second.Header.Get(HeaderKey))
			require.Equal(t, toolNames(t, first.Body), toolNames(t, second.Body))
			sent, more := inputOf(t, first.Body), inputOf(t, second.Body)
			require.Equal(t, sent, more[:len(sent)], "the follow-up extends the input")
			answer, err := json.Marshal(map[string]any{"type": "function_call_output", "call_id": "call_r", "output": logText})
			require.NoError(t, err)
			requireItems(t, []string{reasoningItem, recoverItem, string(answer)}, more[len(sent):],
				"the model's items as it produced them, then the stored text")
			require.NotContains(t, string(second.Body), `"messages"`, "a Responses follow-up has no messages")
			require.Equal(t, []string{"acme/s1/log1/"}, tp.recovers, "read for the proxy's tenant and session")

			// Counted once, by its state, as on the other routes: the
			// follow-up is the proxy's own request.
			rec := httptest.NewRecorder()
			tp.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			word, _, _ := strings.Cut(resp.Header.Get(HeaderState), ";")
			require.Contains(t, rec.Body.String(), fmt.Sprintf(`compactor_proxy_requests_total{state=%q,upstream="openai"} 1`, word))
			require.Equal(t, 1, strings.Count(rec.Body.String(), `compactor_proxy_requests_total{state=`))

			if !stream {
				require.Contains(t, resp.Header.Get(HeaderState), "recovered 1")
				var v struct {
					ID     string            `json:"id"`
					Output []json.RawMessage `json:"output"`
				}
				require.NoError(t, json.Unmarshal([]byte(got), &v))
				require.Equal(t, "resp_2", v.ID, "the answer after the recovery")
				requireItems(t, []string{reasoning2, answerItem}, v.Output, "the host's answer")
				return
			}
			require.Contains(t, resp.Header.Get(HeaderState), RecoverTool+" offered")
			require.Contains(t, got, ": upstream keep-alive")
			evs := hostEvents(t, got)
			counts := map[string]int{}
			var added []int
			for i, ev := range evs {
				counts[ev.Type]++
				require.NotNil(t, ev.SequenceNumber, ev.Type)
				require.Equal(t, i, *ev.SequenceNumber, "sequence numbers follow on across the rounds (event %d, %s)", i, ev.Type)
				if ev.Type == "response.output_item.added" {
					added = append(added, *ev.OutputIndex)
				}
			}
			require.Equal(t, 1, counts["response.created"], "one response for the host")
			require.Equal(t, 1, counts["response.in_progress"])
			require.Equal(t, 1, counts["response.completed"])
			require.Equal(t, "response.completed", evs[len(evs)-1].Type, "the stream ends with the response")
			require.Equal(t, []int{0, 1, 2}, added, "the follow-up's items are numbered on from the host's")
			// Each item's events carry its host index: rs_1 0, rs_2 1,
			// the answer 2.
			for _, ev := range evs {
				if ev.Type == "response.output_text.delta" {
					require.Equal(t, 2, *ev.OutputIndex)
				}
			}
			final := evs[len(evs)-1].Response
			require.Equal(t, "resp_2", final.ID, "the provider's response that holds the whole exchange")
			requireItems(t, []string{reasoningItem, reasoning2, answerItem}, final.Output, "the final response lists every item the host got")
		})
	}
}

func TestAResponsesRecoverCallBesideAHostCallIsLeftOut(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			tp := newTestProxy(t, nil)
			tp.texts["log1"] = "log"
			if stream {
				tp.openai.next = sse(responsesEvents(t, "resp_1", reasoningItem, recoverItem, shellItem)...)
			} else {
				tp.openai.next = jsonAnswer(responseObject("resp_1", "completed", reasoningItem, recoverItem, shellItem))
			}
			resp := tp.post(t, "/proxy/openai/v1/responses", responsesRecoverBody(stream, responsesHostTools), map[string]string{HeaderContextLimit: "100000"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got := readAll(t, resp)
			require.NotContains(t, got, RecoverTool)
			require.Equal(t, 1, tp.openai.count(), "no follow-up: the host answers its own call")
			require.Empty(t, tp.recovers)
			if !stream {
				require.Contains(t, resp.Header.Get(HeaderState), "calls left out")
				var v struct {
					Output []json.RawMessage `json:"output"`
				}
				require.NoError(t, json.Unmarshal([]byte(got), &v))
				requireItems(t, []string{reasoningItem, shellItem}, v.Output, "the host's answer")
				return
			}
			evs := hostEvents(t, got)
			for i, ev := range evs {
				require.Equal(t, i, *ev.SequenceNumber, "no gap where the recover call's events were")
				if ev.Type == "response.output_item.added" && strings.Contains(string(ev.Item), "call_s") {
					require.Equal(t, 1, *ev.OutputIndex, "the host's call, numbered down past the recover call")
				}
			}
			last := evs[len(evs)-1]
			require.Equal(t, "response.completed", last.Type)
			requireItems(t, []string{reasoningItem, shellItem}, last.Response.Output, "the final response")
		})
	}
}

func TestAResponsesHostWithItsOwnRecoverToolIsLeftAlone(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	own := responsesHostTools + `,{"type":"function","name":"recover_context","parameters":{"type":"object"}}`
	body := responsesRecoverBody(false, own)
	tp.openai.next = jsonAnswer(`{"id":"resp_1","object":"response","status":"completed","output":[` + recoverItem + `]}`)
	resp := tp.post(t, "/proxy/openai/v1/responses", body, map[string]string{HeaderContextLimit: "100000"})
	require.Contains(t, readAll(t, resp), RecoverTool, "the host answers its own tool")
	require.Equal(t, body, string(tp.openai.last().Body), "nothing added")
	require.Equal(t, 1, tp.openai.count())
	require.Empty(t, tp.recovers)
}

func TestAResponsesStreamThatFailsEndsWithTheProvidersError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// round is the first round's stream, which fails; says is what
		// the host's last event says.
		round func(t *testing.T) func(http.ResponseWriter, *http.Request)
		says  string
	}{
		{
			name: "an error event",
			round: func(t *testing.T) func(http.ResponseWriter, *http.Request) {
				evs := responsesEvents(t, "resp_1", reasoningItem, recoverItem)
				return sse(append(evs[:len(evs)-1], "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"Overloaded\",\"sequence_number\":99}\n\n")...)
			},
			says: "Overloaded",
		},
		{
			name: "response.failed",
			round: func(t *testing.T) func(http.ResponseWriter, *http.Request) {
				evs := responsesEvents(t, "resp_1", reasoningItem, recoverItem)
				failed := strings.ReplaceAll(evs[len(evs)-1], "response.completed", "response.failed")
				return sse(append(evs[:len(evs)-1], failed)...)
			},
			says: `"type":"response.failed"`,
		},
		{
			name: "a stream that ends before its response",
			round: func(t *testing.T) func(http.ResponseWriter, *http.Request) {
				evs := responsesEvents(t, "resp_1", reasoningItem, recoverItem)
				return sse(evs[:len(evs)-1]...)
			},
			says: "ended before its response did",
		},
		{
			name: "a stream that breaks off",
			round: func(t *testing.T) func(http.ResponseWriter, *http.Request) {
				evs := responsesEvents(t, "resp_1", reasoningItem, recoverItem)
				return func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					for _, ev := range evs[:4] {
						fmt.Fprint(w, ev)
					}
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler)
				}
			},
			says: "broke off",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := newTestProxy(t, nil)
			tp.texts["log1"] = "log"
			tp.openai.next = tc.round(t)
			resp := tp.post(t, "/proxy/openai/v1/responses", responsesRecoverBody(true, responsesHostTools), map[string]string{HeaderContextLimit: "100000"})
			got := readAll(t, resp)
			require.NotContains(t, got, RecoverTool)
			require.Equal(t, 1, tp.openai.count(), "no follow-up after the provider's error")
			require.Empty(t, tp.recovers)
			evs := hostEvents(t, got)
			last := evs[len(evs)-1]
			require.Contains(t, []string{"error", "response.failed"}, last.Type, "the host is told the answer is not whole")
			require.NotContains(t, got, "response.completed")
			require.Contains(t, got[strings.LastIndex(got, "event: "):], tc.says)
		})
	}
}

func TestAFailedResponsesFollowUpEndsTheHostsStream(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.texts["log1"] = "log"
	tp.openai.queue = []func(http.ResponseWriter, *http.Request){
		sse(responsesEvents(t, "resp_1", reasoningItem, recoverItem)...),
		func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
		},
	}
	resp := tp.post(t, "/proxy/openai/v1/responses", responsesRecoverBody(true, responsesHostTools), map[string]string{HeaderContextLimit: "100000"})
	got := readAll(t, resp)
	require.NotContains(t, got, RecoverTool)
	require.Equal(t, 2, tp.openai.count())
	evs := hostEvents(t, got)
	last := evs[len(evs)-1]
	require.Equal(t, "response.completed", last.Type, "the answer before the follow-up, ended")
	requireItems(t, []string{reasoningItem}, last.Response.Output, "the call left out")
	for i, ev := range evs {
		require.Equal(t, i, *ev.SequenceNumber)
	}
}

func TestResponsesFollowUpInput(t *testing.T) {
	t.Parallel()
	bare := `{"type":"reasoning","id":"rs_9","summary":[]}`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{
			name: "stateless: a reasoning item without its content is left out",
			body: `{"model":"gpt-5","store":false,"input":[{"role":"user","content":"hi"}]}`,
			want: []string{`{"role":"user","content":"hi"}`, reasoningItem, recoverItem},
		},
		{
			name: "stored: the provider finds it by id",
			body: `{"model":"gpt-5","input":[{"role":"user","content":"hi"}]}`,
			want: []string{`{"role":"user","content":"hi"}`, bare, reasoningItem, recoverItem},
		},
		{
			name: "a text input is the user message it stands for",
			body: `{"model":"gpt-5","input":"hi"}`,
			want: []string{`{"type":"message","role":"user","content":"hi"}`, bare, reasoningItem, recoverItem},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := responsesReply{}.extend([]byte(tc.body), []json.RawMessage{json.RawMessage(bare), json.RawMessage(reasoningItem), json.RawMessage(recoverItem)})
			require.NoError(t, err)
			requireItems(t, tc.want, inputOf(t, out), tc.name)
		})
	}
	_, err := responsesReply{}.extend([]byte(`{"model":"gpt-5"}`), nil)
	require.ErrorContains(t, err, "neither a list of items nor a text")
}

func TestResponsesOfferAndCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body    string
		offered bool
	}{
		{`{"model":"gpt-5","input":[]}`, true},
		{`{"model":"gpt-5","input":[],"tools":[{"type":"web_search"},{"type":"custom","name":"apply_patch"}]}`, true},
		{`{"model":"gpt-5","input":[],"tools":[{"type":"custom","name":"recover_context"}]}`, false},
		{`{"model":"gpt-5","input":[],"previous_response_id":"resp_1"}`, false},
		{`{"model":"gpt-5","input":[],"conversation":"conv_1"}`, false},
	} {
		out, ok := responsesReply{}.offer([]byte(tc.body))
		require.Equal(t, tc.offered, ok, tc.body)
		if ok {
			names := toolNames(t, out)
			require.Equal(t, RecoverTool, names[len(names)-1], tc.body)
		}
	}
	resp := responseObject("resp_1", "completed", reasoningItem,
		`{"type":"web_search_call","id":"ws_1","status":"completed"}`, recoverItem,
		`{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"}`,
		`{"type":"local_shell_call","call_id":"c3","action":{"type":"exec","command":["ls"]}}`)
	calls, host, err := responsesReply{}.calls([]byte(resp))
	require.NoError(t, err)
	require.Equal(t, []recoverCall{{id: "call_r", input: json.RawMessage(`{"id":"log1"}`)}}, calls)
	require.Equal(t, 2, host, "the custom and the shell call are the host's; the web search is the provider's")
}

func TestAResponsesRecoverLoopEndsAsOneStream(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.texts["log1"] = "log"
	var thoughts []string
	for k := range maxRecoverRounds + 2 {
		rs := fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[],"encrypted_content":"gAAAA-%d"}`, k, k)
		thoughts = append(thoughts, rs)
		tp.openai.queue = append(tp.openai.queue, sse(responsesEvents(t, fmt.Sprintf("resp_%d", k), rs, recoverItem)...))
	}
	resp := tp.post(t, "/proxy/openai/v1/responses", responsesRecoverBody(true, responsesHostTools), map[string]string{HeaderContextLimit: "100000"})
	got := readAll(t, resp)
	require.NotContains(t, got, RecoverTool)
	require.Equal(t, maxRecoverRounds, tp.openai.count(), "the last round's call is left out")

	evs := hostEvents(t, got)
	var added []int
	for i, ev := range evs {
		require.Equal(t, i, *ev.SequenceNumber, "sequence numbers follow on across every round")
		if ev.Type == "response.output_item.added" {
			added = append(added, *ev.OutputIndex)
		}
	}
	require.Equal(t, []int{0, 1, 2, 3}, added, "each round's reasoning numbered on")
	require.Equal(t, 1, strings.Count(got, "event: response.created"))
	require.Equal(t, 1, strings.Count(got, "event: response.completed"))
	requireItems(t, thoughts[:maxRecoverRounds], evs[len(evs)-1].Response.Output, "the final response lists every round's item")

	// The last follow-up carries every round before it, each call
	// answered.
	sent := inputOf(t, tp.openai.calls[0].Body)
	last := inputOf(t, tp.openai.last().Body)
	var types []string
	for _, it := range last[len(sent):] {
		var v responseItem
		require.NoError(t, json.Unmarshal(it, &v))
		types = append(types, v.Type)
	}
	require.Equal(t, strings.Repeat("reasoning function_call function_call_output ", maxRecoverRounds-1), strings.Join(types, " ")+" ")
}
