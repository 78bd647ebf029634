package conversation

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A call and its pending id, to build OpenAI cases that need one.
const openAICall = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		format Format
		doc    string
		index  int
		field  string
		reason string
	}{
		// Malformed JSON reports line and column.
		{"syntax", FormatOpenAI, "{\n  \"messages\": [\n    {\"role\": \"user\",, }\n  ]\n}", -1, "", "malformed JSON at line 3, column 21"},
		{"truncated", FormatAnthropic, `{"messages": [`, -1, "", "malformed JSON at line 1, column 14"},
		{"empty input", FormatReAct, ``, -1, "", "malformed JSON"},
		{"trailing garbage", FormatOpenAI, `[] x`, -1, "", "malformed JSON at line 1, column 4"},

		// Invalid UTF-8 anywhere, with the path of the string.
		{"utf8 content", FormatOpenAI, "[{\"role\":\"user\",\"content\":\"ok\"},\n{\"role\":\"user\",\"content\":\"bad \xff\"}]", 1, "content", "invalid UTF-8 at line 2, column 31"},
		{"utf8 arguments", FormatOpenAI, `{"messages":[` + `{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":\"` + "\xc3\x28" + `\"}"}}]}]}`, 0, "tool_calls[0].function.arguments", "invalid UTF-8"},
		{"utf8 key", FormatOpenAI, "[{\"role\":\"user\",\"content\":\"x\",\"k\xfe\":1}]", 0, "k\uFFFD", "invalid UTF-8"},
		{"utf8 top extra", FormatOpenAI, "{\"model\":\"\xff\",\"messages\":[]}", -1, "model", "invalid UTF-8"},
		{"utf8 anthropic system", FormatAnthropic, "{\"system\":[{\"type\":\"text\",\"text\":\"\xe2\x82\"}],\"messages\":[]}", -1, "system[0].text", "invalid UTF-8"},
		{"utf8 react result", FormatReAct, "{\"execution\":{\"tool_calls\":[{\"thought\":\"t\",\"action\":{},\"result\":\"\xed\xa0\x80\"}]}}", -1, "execution.tool_calls[0].result", "invalid UTF-8"},

		// Top level.
		{"openai scalar", FormatOpenAI, `"hello"`, -1, "", "top level must be"},
		{"openai no messages", FormatOpenAI, `{"model":"x"}`, -1, "messages", "missing"},
		{"openai messages not array", FormatOpenAI, `{"messages":{}}`, -1, "messages", "must be an array, got object"},
		{"anthropic messages null", FormatAnthropic, `{"messages":null}`, -1, "messages", "must be an array, got null"},
		{"anthropic system number", FormatAnthropic, `{"system":3,"messages":[]}`, -1, "system", "must be a string or an array of text blocks"},
		{"anthropic system image", FormatAnthropic, `{"system":[{"type":"image","source":{}}],"messages":[]}`, -1, "system[0].type", "text blocks"},
		{"react execution string", FormatReAct, `{"execution":"x"}`, -1, "execution", "must be an object"},
		{"react tool_calls object", FormatReAct, `{"execution":{"tool_calls":{}}}`, -1, "execution.tool_calls", "must be an array"},
		{"react scalar", FormatReAct, `3`, -1, "", "top level must be"},

		// Wrong types and unknown roles.
		{"message not object", FormatOpenAI, `[{"role":"user","content":"x"}, 5]`, 1, "", "must be an object, got number"},
		{"role missing", FormatOpenAI, `[{"content":"x"}]`, 0, "role", "missing"},
		{"role not string", FormatOpenAI, `[{"role":1,"content":"x"}]`, 0, "role", "must be a string, got number"},
		{"role unknown", FormatOpenAI, `[{"role":"bot","content":"x"}]`, 0, "role", `unknown role "bot"`},
		{"anthropic role unknown", FormatAnthropic, `{"messages":[{"role":"bot","content":"x"}]}`, 0, "role", `unknown role "bot" (want user, assistant or system)`},
		{"content number", FormatOpenAI, `[{"role":"user","content":5}]`, 0, "content", "must be a string, an array of parts or null, got number"},
		{"part not object", FormatOpenAI, `[{"role":"user","content":["x"]}]`, 0, "content[0]", "must be an object, got string"},
		{"part without type", FormatOpenAI, `[{"role":"user","content":[{"text":"x"}]}]`, 0, "content[0].type", "missing"},
		{"text part without text", FormatOpenAI, `[{"role":"user","content":[{"type":"text","text":null}]}]`, 0, "content[0].text", "must be a string, got null"},
		{"tool_calls object", FormatOpenAI, `[{"role":"assistant","content":"x","tool_calls":{}}]`, 0, "tool_calls", "must be an array, got object"},
		{"tool_calls on user", FormatOpenAI, `[{"role":"user","content":"x","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}]`, 0, "tool_calls", "only assistant messages"},
		{"arguments object", FormatOpenAI, `[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a"},` + `{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"a":1}}}]}]`, 3, "tool_calls[0].function.arguments", "must be a string, got object"},
		{"call id missing", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":""}}]}]`, 0, "tool_calls[0].id", "missing"},
		{"call name missing", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"arguments":""}}]}]`, 0, "tool_calls[0].function.name", "missing"},
		{"call function null", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":null}]}]`, 0, "tool_calls[0].function", "must be an object, got null"},
		{"tool without call id", FormatOpenAI, `[` + openAICall + `,{"role":"tool","content":"x"}]`, 1, "tool_call_id", "missing"},
		{"tool content number", FormatOpenAI, `[` + openAICall + `,{"role":"tool","tool_call_id":"c1","content":1}]`, 1, "content", "must be a string or an array of parts"},
		{"anthropic block type missing", FormatAnthropic, `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, 0, "content[0].type", "missing"},
		{"anthropic tool_use no input", FormatAnthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n"}]}]}`, 0, "content[0].input", "missing"},
		{"anthropic is_error string", FormatAnthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}]}`, 1, "content[0].is_error", "must be a boolean, got string"},
		{"anthropic result item text", FormatAnthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":1}]}]}]}`, 1, "content[0].content[0].text", "must be a string, got number"},
		{"anthropic thinking number", FormatAnthropic, `{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":2}]}]}`, 0, "content[0].thinking", "must be a string, got number"},
		{"react turn not object", FormatReAct, `{"execution":{"tool_calls":[{"thought":"a","action":{}},[]]}}`, -1, "execution.tool_calls[1]", "must be an object, got array"},
		{"react thought number", FormatReAct, `[{"thought":1,"action":{}}]`, -1, "[0].thought", "must be a string, got number"},

		// Messages with no content at all.
		{"user empty", FormatOpenAI, `[{"role":"user","content":""}]`, 0, "content", "must not be empty"},
		{"user empty parts", FormatOpenAI, `[{"role":"user","content":[]}]`, 0, "content", "must not be empty"},
		{"user null", FormatOpenAI, `[{"role":"user","content":null}]`, 0, "content", "null, and the message has no tool calls"},
		{"assistant missing", FormatOpenAI, `[{"role":"user","content":"x"},{"role":"assistant"}]`, 1, "content", "missing, and the message has no tool calls"},
		{"assistant empty no calls", FormatOpenAI, `[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[]}]`, 1, "content", "empty, and the message has no tool calls"},
		{"system null", FormatOpenAI, `[{"role":"system","content":null}]`, 0, "content", "null"},
		{"tool null", FormatOpenAI, `[` + openAICall + `,{"role":"tool","tool_call_id":"c1","content":null}]`, 1, "content", "must not be null"},
		{"anthropic user empty", FormatAnthropic, `{"messages":[{"role":"user","content":""}]}`, 0, "content", "must not be empty"},
		{"anthropic assistant empty not last", FormatAnthropic, `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[]},{"role":"user","content":"y"}]}`, 1, "content", "must not be empty"},
		{"anthropic content null", FormatAnthropic, `{"messages":[{"role":"user","content":null}]}`, 0, "content", "must not be null"},
		{"anthropic content missing", FormatAnthropic, `{"messages":[{"role":"user"}]}`, 0, "content", "missing"},

		// Tool pairing at parse time.
		{"orphan result", FormatOpenAI, `[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]`, 1, "tool_call_id", `no earlier tool call has id "nope"`},
		{"second result", FormatOpenAI, `[` + openAICall + `,{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"tool","tool_call_id":"c1","content":"r"}]`, 2, "tool_call_id", `tool call "c1" already has its result in message 1`},
		{"duplicate open id", FormatOpenAI, `[` + openAICall + `,` + openAICall + `]`, 1, "tool_calls[0].id", `duplicate tool call id "c1": the call in message 0`},
		{"duplicate id same message", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}},{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}]`, 0, "tool_calls[1].id", "duplicate tool call id"},
		{"empty call id", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"f","arguments":""}}]}]`, 0, "tool_calls[0].id", "must not be empty"},
		{"result before call", FormatOpenAI, `[{"role":"tool","tool_call_id":"c1","content":"r"},` + openAICall + `]`, 0, "tool_call_id", "no earlier tool call"},
		{"anthropic orphan result", FormatAnthropic, `{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"zz","content":"r"}]}]}`, 2, "content[1].tool_use_id", `no earlier tool call has id "zz"`},
		{"anthropic duplicate id", FormatAnthropic, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}},{"type":"tool_use","id":"t","name":"n","input":{}}]}]}`, 0, "content[1].id", "duplicate tool call id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc), tc.format)
			require.Error(t, err)
			var e *Error
			require.True(t, errors.As(err, &e), "want *Error, got %T: %v", err, err)
			require.Equal(t, tc.index, e.Index, "index in %v", err)
			require.Equal(t, tc.field, e.Field, "field in %v", err)
			require.Contains(t, e.Reason, tc.reason)
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  Error
		want string
	}{
		{Error{Index: 3, Field: "tool_calls[0].function.arguments", Reason: "must be a string"}, "message 3: tool_calls[0].function.arguments: must be a string"},
		{Error{Index: 0, Reason: "must be an object"}, "message 0: must be an object"},
		{Error{Index: -1, Field: "messages", Reason: "missing"}, "messages: missing"},
		{Error{Index: -1, Reason: "malformed JSON"}, "malformed JSON"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, tc.err.Error())
	}
	_, err := Parse([]byte(`[{"role":"bot","content":"x"}]`), FormatOpenAI)
	require.EqualError(t, err, `parse openai conversation: message 0: role: unknown role "bot" (want system, developer, user, assistant or tool)`)
}

func TestParseUnknownFormat(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`[]`), Format("gemini"))
	require.ErrorContains(t, err, `unknown format "gemini"`)
}

func TestDetect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		want Format
		err  string
	}{
		{"openai object", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, FormatOpenAI, ""},
		{"openai array", `[{"role":"user","content":"x"}]`, FormatOpenAI, ""},
		{"openai parts", `[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{}}]}]`, FormatOpenAI, ""},
		{"empty array", `[]`, FormatOpenAI, ""},
		{"anthropic system", `{"system":"s","messages":[]}`, FormatAnthropic, ""},
		{"anthropic tool_use", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}]}`, FormatAnthropic, ""},
		{"anthropic thinking array", `[{"role":"assistant","content":[{"type":"thinking","thinking":"t"}]}]`, FormatAnthropic, ""},
		{"react execution", `{"execution":{"tool_calls":[]}}`, FormatReAct, ""},
		{"react trace", `{"reasoning_trace":[]}`, FormatReAct, ""},
		{"react turns", `[{"thought":"t","action":{}}]`, FormatReAct, ""},
		{"unknown object", `{"foo":1}`, "", "a JSON object needs messages"},
		{"unknown array", `[1,2]`, "", "array elements have neither role"},
		{"scalar", `true`, "", "top level is a boolean"},
		{"malformed", "[\n{]", "", "malformed JSON at line 2, column 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Detect([]byte(tc.doc))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var e *Error
				require.True(t, errors.As(err, &e))
				_, err = ParseAny([]byte(tc.doc))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	text := func(s string) Block { return Block{Kind: KindText, Text: s} }
	cases := []struct {
		name  string
		c     Conversation
		index int
		field string
	}{
		{"no format", Conversation{}, -2, ""},
		{"openai unknown role", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: "bot", Blocks: []Block{text("x")}}}}, 0, "role"},
		{"openai thinking", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: RoleUser, Blocks: []Block{text("x")}}, {Role: RoleAssistant, Blocks: []Block{{Kind: KindThinking, Text: "t"}}}}}, 1, "blocks[0]"},
		{"openai tool message without result", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: RoleTool, Blocks: []Block{text("x")}}}}, 0, "blocks"},
		{"openai user tool call", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: RoleUser, Blocks: []Block{{Kind: KindToolUse, ToolID: "a"}}}}}, 0, "blocks[0]"},
		{"invalid utf8 text", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: RoleUser, Blocks: []Block{text("ab\xffc")}}}}, 0, "blocks[0].text"},
		{"bad extra json", Conversation{Format: FormatOpenAI, Messages: []Message{{Role: RoleUser, Blocks: []Block{text("x")}, Extra: map[string]json.RawMessage{"k": json.RawMessage("{")}}}}, 0, "k"},
		{"anthropic late system", Conversation{Format: FormatAnthropic, Messages: []Message{{Role: RoleUser, Blocks: []Block{text("x")}}, {Role: RoleSystem, Blocks: []Block{text("s")}}}}, 1, "role"},
		{"anthropic bad input", Conversation{Format: FormatAnthropic, Messages: []Message{{Role: RoleAssistant, Blocks: []Block{{Kind: KindToolUse, ToolID: "a", ToolName: "n", Input: "{oops"}}}}}, 0, "blocks[0].input"},
		{"react user message", Conversation{Format: FormatReAct, Messages: []Message{{Role: RoleUser, Blocks: []Block{text("x")}}}}, 0, "role"},
		{"react result mismatch", Conversation{Format: FormatReAct, Messages: []Message{
			{Role: RoleAssistant, Blocks: []Block{{Kind: KindToolUse, ToolID: "turn-0", Input: "{}"}}},
			{Role: RoleTool, Blocks: []Block{{Kind: KindToolResult, ToolID: "turn-9"}}},
		}}, 1, "blocks[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(tc.c)
			require.Error(t, err)
			if tc.index == -2 {
				return
			}
			var e *Error
			require.True(t, errors.As(err, &e), "want *Error, got %T: %v", err, err)
			require.Equal(t, tc.index, e.Index, "%v", err)
			require.Equal(t, tc.field, e.Field, "%v", err)
		})
	}
}
