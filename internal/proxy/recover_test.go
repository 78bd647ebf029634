package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
)

// referenceNote is a cut a compaction left in a conversation, naming the
// recover tool and an id.
const referenceNote = "[… 4000 characters cut by the budget check; recover the whole result with the recover_context tool, id: log1]"

// recoverBody is a request of the protocol at path whose conversation
// holds a reference, with the host's own bash tool.
func recoverBody(openai, stream bool, hostTools string) string {
	if hostTools == "" {
		hostTools = `{"name":"bash","input_schema":{"type":"object"}}`
		if openai {
			hostTools = `{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}`
		}
	}
	if openai {
		return fmt.Sprintf(`{"model":"gpt-4o","stream":%t,"messages":[{"role":"system","content":"You are a coding agent."},`+
			`{"role":"user","content":"Fix the parser. Test log: %s"}],"tools":[%s]}`, stream, referenceNote, hostTools)
	}
	return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":%t,"system":"You are a coding agent.",`+
		`"messages":[{"role":"user","content":"Fix the parser. Test log: %s"}],"tools":[%s]}`, stream, referenceNote, hostTools)
}

// sse writes events as one SSE stream.
func sse(events ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			fmt.Fprint(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

// jsonAnswer writes body as a JSON answer.
func jsonAnswer(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_upstream")
		fmt.Fprint(w, body)
	}
}

func anthropicEvent(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

func openAIDelta(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + "}]}\n\n"
}

// toolNames are the tool names of a request body, either protocol.
func toolNames(t *testing.T, body []byte) []string {
	t.Helper()
	var v struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	var names []string
	for _, tl := range v.Tools {
		names = append(names, tl.Name+tl.Function.Name)
	}
	return names
}

func TestTheProxyAnswersRecoverCallsItself(t *testing.T) {
	t.Parallel()
	const logText = "FAIL parser_test.go:12\nexpected ')' got EOF"
	anthropicCall := `{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"log1"}}`
	for _, tc := range []struct {
		name    string
		openai  bool
		stream  bool
		answers []func(http.ResponseWriter, *http.Request)
		// final is what the host must read; the recover call must not
		// be in it.
		final []string
	}{
		{
			name: "anthropic whole",
			answers: []func(http.ResponseWriter, *http.Request){
				jsonAnswer(`{"type":"message","role":"assistant","content":[{"type":"text","text":"Reading the log."},` + anthropicCall + `],"stop_reason":"tool_use"}`),
				jsonAnswer(`{"type":"message","role":"assistant","content":[{"type":"text","text":"The test expects a closing paren."}],"stop_reason":"end_turn"}`),
			},
			final: []string{"The test expects a closing paren.", `"end_turn"`},
		},
		{
			name: "anthropic stream", stream: true,
			answers: []func(http.ResponseWriter, *http.Request){
				sse(anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}`),
					anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`),
					anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I need the log."}}`),
					anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-abc"}}`),
					anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
					anthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{}}}`),
					anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"id\":"}}`),
					anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"log1\"}"}}`),
					anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
					anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`),
					anthropicEvent("message_stop", `{"type":"message_stop"}`)),
				sse(anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_2","role":"assistant","content":[]}}`),
					anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
					anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The test expects a closing paren."}}`),
					anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
					anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`),
					anthropicEvent("message_stop", `{"type":"message_stop"}`)),
			},
			// The follow-up's text block comes after the thinking block
			// the host already has: index 1, not 0.
			final: []string{`"index":1,"content_block":{"type":"text"`, "The test expects a closing paren.", `"end_turn"`, "I need the log."},
		},
		{
			name: "openai whole", openai: true,
			answers: []func(http.ResponseWriter, *http.Request){
				jsonAnswer(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"recover_context","arguments":"{\"id\":\"log1\"}"}}]},"finish_reason":"tool_calls"}]}`),
				jsonAnswer(`{"id":"c2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"The test expects a closing paren."},"finish_reason":"stop"}]}`),
			},
			final: []string{"The test expects a closing paren.", `"stop"`},
		},
		{
			name: "openai stream", openai: true, stream: true,
			answers: []func(http.ResponseWriter, *http.Request){
				sse(openAIDelta(`{"role":"assistant","content":"Reading the log."}`, ""),
					openAIDelta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"recover_context","arguments":""}}]}`, ""),
					openAIDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"id\":\"log1\"}"}}]}`, ""),
					openAIDelta(`{}`, "tool_calls"), "data: [DONE]\n\n"),
				sse(openAIDelta(`{"role":"assistant","content":"The test expects a closing paren."}`, ""),
					openAIDelta(`{}`, "stop"), "data: [DONE]\n\n"),
			},
			final: []string{"Reading the log.", "The test expects a closing paren.", `"stop"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := newTestProxy(t, nil)
			tp.texts["log1"] = logText
			up, path := tp.anthropic, "/proxy/anthropic/v1/messages"
			if tc.openai {
				up, path = tp.openai, "/proxy/openai/v1/chat/completions"
			}
			up.queue = tc.answers
			body := recoverBody(tc.openai, tc.stream, "")
			resp := tp.post(t, path, body, map[string]string{HeaderContextLimit: "100000", HeaderSession: "s1"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got := readAll(t, resp)
			for _, want := range tc.final {
				require.Contains(t, got, want)
			}
			require.NotContains(t, got, RecoverTool, "the host never sees the tool it does not know")
			switch {
			case tc.stream && tc.openai:
				require.Equal(t, 1, strings.Count(got, "[DONE]"), "one end for the host")
			case tc.stream:
				require.Equal(t, 1, strings.Count(got, "event: message_start"), "one message for the host")
				require.Equal(t, 1, strings.Count(got, "event: message_stop"))
			default:
				require.Contains(t, resp.Header.Get(HeaderState), "recovered 1")
			}

			require.Equal(t, 2, up.count(), "one follow-up request")
			first, second := up.calls[0], up.calls[1]
			require.Equal(t, []string{"bash", RecoverTool}, toolNames(t, first.Body), "the tool is offered after the host's own")
			require.Equal(t, "sk-ant-agent", second.Header.Get("X-Api-Key"), "the follow-up carries the agent's key")
			require.Empty(t, second.Header.Get(HeaderKey))
			msgs, sent := convtest.Messages(t, second.Body), convtest.Messages(t, first.Body)
			require.Equal(t, sent, msgs[:len(sent)], "the follow-up extends the request")
			added := msgs[len(sent):]
			require.Contains(t, string(added[0]), `"assistant"`)
			require.Contains(t, string(added[0]), RecoverTool, "the model's call goes back as it made it")
			answer := strings.Join(func() []string {
				var s []string
				for _, m := range added[1:] {
					s = append(s, string(m))
				}
				return s
			}(), "")
			require.Contains(t, answer, `FAIL parser_test.go:12\nexpected ')' got EOF`)
			if tc.name == "anthropic stream" {
				require.Contains(t, string(added[0]), `"signature":"sig-abc"`, "a thinking block goes back with its signature")
				require.Contains(t, string(added[0]), `"input":{"id":"log1"}`)
			}
			require.Equal(t, []string{"acme/s1/log1/"}, tp.recovers, "read for the proxy's tenant and session")
		})
	}
}

func TestARecoverCallBesideTheHostsOwnIsLeftOut(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.texts["log1"] = "log"
	tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){sse(
		anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1"}}`),
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_r","name":"recover_context","input":{}}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"id\":\"log1\"}"}}`),
		anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"bash","input":{}}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\":\"ls\"}"}}`),
		anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
		anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`),
		anthropicEvent("message_stop", `{"type":"message_stop"}`))}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, true, ""), map[string]string{HeaderContextLimit: "100000"})
	got := readAll(t, resp)
	require.NotContains(t, got, RecoverTool)
	require.Contains(t, got, `"index":0,"content_block":{"type":"tool_use","id":"toolu_b","name":"bash"`, "the host's call, numbered first")
	require.Contains(t, got, `"stop_reason":"tool_use"`)
	require.Contains(t, got, "message_stop")
	require.Equal(t, 1, tp.anthropic.count(), "no follow-up: the host answers its own call")
}

func TestAHostWithItsOwnRecoverToolIsLeftAlone(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	own := `{"name":"recover_context","input_schema":{"type":"object"}}`
	body := recoverBody(false, false, own)
	tp.anthropic.next = jsonAnswer(`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"log1"}}]}`)
	resp := tp.post(t, "/proxy/anthropic/v1/messages", body, map[string]string{HeaderContextLimit: "100000"})
	require.Contains(t, readAll(t, resp), RecoverTool, "the host answers its own tool")
	require.Equal(t, body, string(tp.anthropic.last().Body), "nothing added")
	require.Empty(t, tp.recovers)
}

func TestAnUnknownRecoverIDIsAnsweredAsAnError(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){
		jsonAnswer(`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"nope"}}]}`),
		jsonAnswer(`{"type":"message","content":[{"type":"text","text":"It is gone."}]}`),
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, false, ""), map[string]string{HeaderContextLimit: "100000"})
	require.Contains(t, readAll(t, resp), "It is gone.")
	msgs := convtest.Messages(t, tp.anthropic.last().Body)
	last := string(msgs[len(msgs)-1])
	require.Contains(t, last, `"is_error":true`)
	require.Contains(t, last, "id: not found")
}

func TestARecoverLoopEnds(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.texts["log1"] = "log"
	call := jsonAnswer(`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"log1"}}],"stop_reason":"tool_use"}`)
	for range maxRecoverRounds + 2 {
		tp.anthropic.queue = append(tp.anthropic.queue, call)
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, false, ""), map[string]string{HeaderContextLimit: "100000"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, readAll(t, resp), RecoverTool)
	require.Contains(t, resp.Header.Get(HeaderState), "calls left out")
	require.Equal(t, maxRecoverRounds, tp.anthropic.count())
}

func TestRecoverUpstreamErrorsReachTheAgent(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.anthropic.next = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, false, ""), map[string]string{HeaderContextLimit: "100000"})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "7", resp.Header.Get("Retry-After"))
	require.Contains(t, readAll(t, resp), "slow down")
}

func TestCutAnswer(t *testing.T) {
	t.Parallel()
	short := "a\nb"
	require.Equal(t, short, cutAnswer(short, "", 2, maxRecoverChars))
	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprintf("line %04d of the build log", i+1))
	}
	long := strings.Join(lines, "\n")
	got := cutAnswer(long, "", 5000, maxRecoverChars)
	require.LessOrEqual(t, len(got), maxRecoverChars+200)
	shown := strings.Count(got, "of the build log")
	require.True(t, strings.HasPrefix(got, "line 0001"))
	require.Contains(t, got, fmt.Sprintf("lines %d-5000 follow: call recover_context with lines, e.g. %d-", shown+1, shown+1))
	got = cutAnswer(long, "100-5000", 5000, maxRecoverChars)
	require.Contains(t, got, fmt.Sprintf("lines %d-5000 follow", 100+shown))
	got = cutAnswer(strings.Repeat("é", maxRecoverChars), "", 1, maxRecoverChars)
	require.True(t, utf8.ValidString(got), "one long line is cut on a rune boundary")
	require.Contains(t, got, "the rest of line 1 is longer than one answer holds")
}

func TestARecoveredTextIsCutToTheRoomLeft(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	var lines []string
	for i := range 400 {
		lines = append(lines, fmt.Sprintf("line %03d: FAIL test_parser_%03d expected ')' got EOF", i+1, i))
	}
	tp.texts["log1"] = strings.Join(lines, "\n")
	tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){
		jsonAnswer(`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"log1"}}]}`),
		jsonAnswer(`{"type":"message","content":[{"type":"text","text":"Read."}]}`),
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, false, ""), map[string]string{HeaderContextLimit: "1500", HeaderSession: "s1"})
	require.Contains(t, readAll(t, resp), "Read.")
	msgs := convtest.Messages(t, tp.anthropic.last().Body)
	var v struct {
		Content []struct {
			Content string `json:"content"`
			IsError bool   `json:"is_error"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(msgs[len(msgs)-1], &v))
	got := v.Content[0].Content
	require.False(t, v.Content[0].IsError, got)
	require.True(t, strings.HasPrefix(got, "line 001: FAIL"))
	require.Contains(t, got, "follow: call recover_context with lines")
	require.Less(t, len(got), len(tp.texts["log1"])/2, "the 1,500-token window holds a part only")
}

func TestACountIncludesTheOfferedTool(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	body := recoverBody(false, false, "")
	resp := tp.post(t, "/proxy/anthropic/v1/messages/count_tokens", body, map[string]string{HeaderContextLimit: "100000"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := tp.anthropic.last()
	require.Equal(t, "/v1/messages/count_tokens", got.Path)
	require.Equal(t, []string{"bash", RecoverTool}, toolNames(t, got.Body), "counted as the turn will go")
}

func TestAFailedFollowUpGivesTheHostTheAnswerBeforeIt(t *testing.T) {
	t.Parallel()
	refuse := func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"type":"error","error":{"type":"api_error","message":"overloaded"}}`)
	}
	t.Run("whole", func(t *testing.T) {
		t.Parallel()
		tp := newTestProxy(t, nil)
		tp.texts["log1"] = "log"
		tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){
			jsonAnswer(`{"type":"message","content":[{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{"id":"log1"}}],"stop_reason":"tool_use"}`),
			refuse,
		}
		resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, false, ""), map[string]string{HeaderContextLimit: "100000"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := readAll(t, resp)
		require.Contains(t, got, "Reading it.")
		require.NotContains(t, got, RecoverTool)
		require.Contains(t, got, `"stop_reason":"end_turn"`, "no call is left for the host to answer")
		require.Contains(t, resp.Header.Get(HeaderState), "follow-up failed")
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		tp := newTestProxy(t, nil)
		tp.texts["log1"] = "log"
		tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){sse(
			anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1"}}`),
			anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\n\n"}}`),
			anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
			anthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{}}}`),
			anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"id\":\"log1\"}"}}`),
			anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
			anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`),
			anthropicEvent("message_stop", `{"type":"message_stop"}`)), refuse}
		resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, true, ""), map[string]string{HeaderContextLimit: "100000"})
		got := readAll(t, resp)
		require.NotContains(t, got, RecoverTool)
		require.Contains(t, got, `"stop_reason":"end_turn"`)
		require.Equal(t, 1, strings.Count(got, "event: message_stop"), "the host's message ends once")
		// The white-space text block went to the host as the model sent
		// it, but not back to the model, which refuses one.
		require.Equal(t, 2, tp.anthropic.count())
		msgs := convtest.Messages(t, tp.anthropic.last().Body)
		require.NotContains(t, string(msgs[len(msgs)-2]), `"text"`, "no blank text block in the follow-up")
	})
}

func TestAStreamThatBreaksOffEndsWithAnError(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.anthropic.next = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1"}}`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, true, ""), map[string]string{HeaderContextLimit: "100000"})
	got := readAll(t, resp)
	require.Contains(t, got, "event: error", "the host is told the answer is not whole")
	require.Contains(t, got, "broke off")
}

func TestAnErrorEventEndsTheRecoverFlow(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	tp.texts["log1"] = "log"
	tp.anthropic.queue = []func(http.ResponseWriter, *http.Request){sse(
		anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1"}}`),
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"recover_context","input":{}}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"id\":\"log1\"}"}}`),
		anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
		anthropicEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))}
	resp := tp.post(t, "/proxy/anthropic/v1/messages", recoverBody(false, true, ""), map[string]string{HeaderContextLimit: "100000"})
	got := readAll(t, resp)
	require.Contains(t, got, "overloaded_error")
	require.NotContains(t, got, RecoverTool)
	require.Equal(t, 1, tp.anthropic.count(), "no follow-up after the provider's error")
}

func TestARecoverAnswerDoesNotNeedACount(t *testing.T) {
	t.Parallel()
	p, err := New(Config{AnthropicURL: "http://127.0.0.1:1"}, Deps{
		Recover: func(context.Context, string, string, string, string) ([]byte, int, error) {
			return []byte("the log"), 1, nil
		}})
	require.NoError(t, err)
	tn := turn{proto: anthropicProtocol{}, tenant: "acme", session: "s1", limit: 10000, req: request{model: "claude-sonnet-4-5"}}
	got := p.answer(t.Context(), tn, []byte("not a conversation"), []recoverCall{{id: "toolu_1", input: json.RawMessage(`{"id":"log1"}`)}})
	require.Len(t, got, 1)
	require.False(t, got[0].isErr, got[0].text)
	require.Equal(t, "the log", got[0].text)
}
