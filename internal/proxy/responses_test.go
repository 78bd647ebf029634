package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// responsesBody is a stateless Responses request as Codex sends one:
// instructions, then turns of input items (a user message, the model's
// encrypted reasoning, a function call and its output, an answer, the
// user's go-ahead).
func responsesBody(turns int) string {
	items := []string{`{"type":"message","role":"user","content":[{"type":"input_text","text":"Task: fix the parser."}]}`}
	for i := range turns {
		items = append(items,
			fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[],"encrypted_content":"gAAAA-%d"}`, i, i),
			fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"shell","arguments":"{\"cmd\":\"sed -n %d,%dp parser.py\"}"}`, i, i, i*40, i*40+40),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":%q}`, i, "Turn "+fmt.Sprint(i)+": "+strings.Repeat("the build fails in module parser again ", 8)),
			fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Step %d read."}]}`, i),
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"Go on."}]}`)
	}
	return fmt.Sprintf(`{"model":"gpt-5-codex","instructions":"You are Codex.","input":[%s],"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}}],"store":false,"stream":false,"include":["reasoning.encrypted_content"]}`,
		strings.Join(items, ","))
}

func inputOf(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var v struct {
		Input []json.RawMessage `json:"input"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	return v.Input
}

func TestResponsesInputIsCompactedLikeAChat(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "1100", HeaderSession: "codex-1", "Authorization": "Bearer sk-agent"}
	first := responsesBody(8)
	resp := tp.post(t, "/proxy/openai/v1/responses", first, h)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get(HeaderState), "compacting", "the first request crosses the trigger")
	require.Equal(t, first, string(tp.openai.last().Body), "the crossing request goes as it came")
	tp.settle(t, 1)

	// The run reads the items as a chat: the user's task, the calls
	// paired with their outputs, no reasoning.
	ev := tp.compactor.submitted()[0]
	var doc struct {
		Messages []chatMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(ev.Conversation, &doc))
	require.Equal(t, "user", doc.Messages[0].Role)
	require.Equal(t, "Task: fix the parser.", *doc.Messages[0].Content)
	require.Equal(t, "assistant", doc.Messages[1].Role)
	require.Equal(t, "call_0", doc.Messages[1].ToolCalls[0].ID)
	require.Equal(t, "tool", doc.Messages[2].Role)
	require.Equal(t, "call_0", doc.Messages[2].ToolCallID)
	require.NotContains(t, string(ev.Conversation), "gAAAA", "encrypted reasoning is the provider's, never the run's")

	// The next turn appends its items: it goes as the output's items and
	// the appended ones, byte for byte; the instructions stay the host's.
	var second string
	require.Eventually(t, func() bool {
		second = responsesBody(9)
		return strings.HasPrefix(tp.post(t, "/proxy/openai/v1/responses", second, h).Header.Get(HeaderState), "spliced")
	}, 5*time.Second, 10*time.Millisecond)
	got := tp.openai.last().Body
	require.Contains(t, string(got), `"instructions":"You are Codex."`)
	in := inputOf(t, got)
	host := inputOf(t, []byte(second))
	appended := host[len(inputOf(t, []byte(first))):]
	require.Equal(t, appended, in[len(in)-len(appended):], "the appended items go as the host sent them, reasoning included")
	require.Contains(t, string(in[0]), "Summary by run-1", "the output comes first, as input items")
	require.Less(t, len(in), len(host))
	for _, it := range in[:len(in)-len(appended)] {
		var v responseItem
		require.NoError(t, json.Unmarshal(it, &v))
		require.Contains(t, []string{"message", "function_call", "function_call_output"}, v.Type, string(it))
		require.NotContains(t, string(it), `"id":"fc_`, "the output's calls carry no item ids")
	}
	_, err := itemsToChat(in)
	require.NoError(t, err, "what goes upstream reads back")

	// The count answers for the spliced request, instructions included.
	require.Less(t, len(got), len(second))
}

func TestResponsesThatCannotBeReadGoAsTheyCame(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil)
	h := map[string]string{HeaderContextLimit: "1000"}
	for _, tc := range []struct{ body, says string }{
		{`{"model":"gpt-4o","previous_response_id":"resp_1","input":[{"role":"user","content":"go on"}]}`, "previous_response_id"},
		{`{"model":"gpt-4o","input":"hello"}`, "not a list of items"},
		{`{"model":"gpt-4o","input":[{"type":"web_search_call","id":"ws_1","status":"completed"}]}`, `input item 0 is of type "web_search_call"`},
		{`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:"}]}]}`, `"input_image" is not compacted yet`},
	} {
		resp := tp.post(t, "/proxy/openai/v1/responses", tc.body, h)
		require.Equal(t, http.StatusOK, resp.StatusCode, tc.says)
		require.Contains(t, resp.Header.Get(HeaderState), tc.says)
		require.True(t, strings.HasPrefix(resp.Header.Get(HeaderState), "forwarded"))
		require.Equal(t, tc.body, string(tp.openai.last().Body))
	}
	require.Empty(t, tp.compactor.submitted())
}

func TestChatAndItemsConvertBothWays(t *testing.T) {
	t.Parallel()
	items := []json.RawMessage{
		json.RawMessage(`{"role":"developer","content":"Be brief."}`),
		json.RawMessage(`{"type":"message","role":"user","content":"hi"}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Reading."}]}`),
		json.RawMessage(`{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"}`),
		json.RawMessage(`{"type":"function_call","call_id":"c2","name":"shell","arguments":"{\"a\":1}"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"one"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"two"}]}`),
	}
	msgs, err := itemsToChat(items)
	require.NoError(t, err)
	require.Len(t, msgs, 5, "the calls join the assistant message before them")
	require.Equal(t, "system", msgs[0].Role)
	require.Len(t, msgs[2].ToolCalls, 2)
	raw := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		raw[i], err = json.Marshal(m)
		require.NoError(t, err)
	}
	back, err := chatToItems(raw)
	require.NoError(t, err)
	again, err := itemsToChat(back)
	require.NoError(t, err)
	require.Equal(t, msgs, again, "chat → items → chat is the same conversation")
}
