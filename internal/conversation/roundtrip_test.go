package conversation

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTripSamples(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file   string
		format Format
	}{
		{"openai_sample.json", FormatOpenAI},
		{"openai_array.json", FormatOpenAI},
		{"anthropic_sample.json", FormatAnthropic},
		{"anthropic_string_system.json", FormatAnthropic},
		{"react_sample.json", FormatReAct},
		{"react_turns.json", FormatReAct},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			data := readFile(t, filepath.Join("testdata", tc.file))
			got, err := Detect(data)
			require.NoError(t, err)
			require.Equal(t, tc.format, got)
			c := roundTrip(t, data, tc.format)
			require.Equal(t, tc.format, c.Format)
			require.NoError(t, CheckPairing(c))
			viaAny, err := ParseAny(data)
			require.NoError(t, err)
			require.Equal(t, c, viaAny)
		})
	}
}

// TestRoundTripInline covers encodings the sample files do not, one per case.
func TestRoundTripInline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		format Format
		doc    string
	}{
		{"openai empty array", FormatOpenAI, `[]`},
		{"openai empty messages", FormatOpenAI, `{"messages": []}`},
		{"openai system empty string", FormatOpenAI, `[{"role":"system","content":""}]`},
		{"openai system empty parts", FormatOpenAI, `[{"role":"system","content":[]}]`},
		{"openai absent content with calls", FormatOpenAI, `[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}]`},
		{"openai empty parts with calls", FormatOpenAI, `[{"role":"assistant","content":[],"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}]`},
		{"openai other call type", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"custom","function":{"name":"f","arguments":"x"}}]}]`},
		{"openai single text part", FormatOpenAI, `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"openai text part extra", FormatOpenAI, `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`},
		{"openai tool name not string", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","name":7,"content":"ok"}]`},
		{"openai tool list with image", FormatOpenAI, `[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"image_url","image_url":{"url":"u"}}]}]`},
		{"openai numbers and escapes", FormatOpenAI, `{"seed": 1e400, "n": 1.50, "messages":[{"role":"user","content":"tab\there \u00e9 \ud83d\ude00 <b>&amp;</b> \u2028"}]}`},
		{"openai unicode keys", FormatOpenAI, `{"m\u00e9ta": {"\u65e5": [1, 2.0, -0]}, "messages":[{"role":"user","content":"x","\u00fc":null}]}`},
		{"anthropic bare array", FormatAnthropic, `[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}]`},
		{"anthropic system empty", FormatAnthropic, `{"system":"","messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic system empty list", FormatAnthropic, `{"system":[],"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic system null", FormatAnthropic, `{"system":null,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic no system", FormatAnthropic, `{"messages":[{"role":"user","content":"hi"}],"stream":false}`},
		{"anthropic empty last assistant list", FormatAnthropic, `{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[]}]}`},
		{"anthropic result null content", FormatAnthropic, `{"system":"s","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":[1,{"b":null}]}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":null,"is_error":null}]}]}`},
		{"anthropic result empty list", FormatAnthropic, `{"system":"s","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":"not an object"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[]}]}]}`},
		{"anthropic server tool blocks", FormatAnthropic, `{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"server_tool_use","id":"srv","name":"web_search","input":{"query":"x"}},{"type":"web_search_tool_result","tool_use_id":"srv","content":[]}]}]}`},
		{"anthropic system among the turns", FormatAnthropic, `{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"system","content":"The date changed."},{"role":"assistant","content":"ok"},{"role":"system","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"go"}]}`},
		{"anthropic system message first, no system field", FormatAnthropic, `{"messages":[{"role":"system","content":"first"},{"role":"user","content":"hi"}]}`},
		{"react minimal", FormatReAct, `{"execution":{"tool_calls":[]}}`},
		{"react no tool calls", FormatReAct, `{"reasoning_trace":[],"execution":{"final_response":"done"}}`},
		{"react null tool calls", FormatReAct, `{"execution":{"tool_calls":null,"final_response":"x"}}`},
		{"react null execution", FormatReAct, `{"execution":null,"reasoning_trace":["a"]}`},
		{"react no execution", FormatReAct, `{"reasoning_trace":[{"step":1}]}`},
		{"react empty turn", FormatReAct, `{"execution":{"tool_calls":[{}]}}`},
		{"react null action", FormatReAct, `[{"thought":"t","action":null,"result":"r"}]`},
		{"react result only", FormatReAct, `[{"result":{"deep":[1,2,{"x":"y"}]}}]`},
		{"react empty array", FormatReAct, `[]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			roundTrip(t, []byte(tc.doc), tc.format)
		})
	}
}

func TestOpenAISampleModel(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/openai_sample.json"), FormatOpenAI)
	require.NoError(t, err)
	require.Equal(t, "", c.Shape)
	require.Contains(t, c.Extra, "model")
	require.Contains(t, c.Extra, "instance_id")
	require.NotContains(t, c.Extra, "messages")
	require.Len(t, c.Messages, 11)

	dev := c.Messages[0]
	require.Equal(t, RoleSystem, dev.Role)
	require.True(t, hasShape(dev.Shape, shapeDeveloper))
	require.True(t, hasShape(dev.Shape, shapeList))

	user := c.Messages[2]
	require.Equal(t, []Kind{KindText, KindImage, KindOther}, kinds(user))
	require.Contains(t, user.Blocks[1].Extra, "image_url")
	require.NotContains(t, user.Blocks[1].Extra, "type")
	require.Contains(t, user.Blocks[2].Extra, "type")
	require.Contains(t, user.Extra, "tool_calls", "tool_calls: null stays in Extra")
	require.Contains(t, user.Extra, "name")

	call := c.Messages[3]
	require.Equal(t, []Kind{KindToolUse, KindToolUse}, kinds(call))
	require.True(t, hasShape(call.Shape, shapeNull))
	require.Equal(t, `{"city": "Paris"}`, call.Blocks[0].Input, "arguments kept verbatim")
	require.Equal(t, "get_weather", call.Blocks[0].ToolName)
	require.Contains(t, call.Blocks[0].Extra, "index")
	require.JSONEq(t, `{"strict": true}`, string(call.Blocks[0].Extra["function"]))
	require.True(t, hasShape(call.Blocks[1].Shape, shapeUntyped))

	named := c.Messages[4]
	require.Equal(t, RoleTool, named.Role)
	require.True(t, hasShape(named.Shape, shapeNamed))
	require.Equal(t, "call_a", named.Blocks[0].ToolID)

	listed := c.Messages[5]
	require.False(t, hasShape(listed.Shape, shapeNamed))
	require.Equal(t, "describe_image", listed.Blocks[0].ToolName, "filled from the call")
	require.Equal(t, "A grey cat\nsitting on a mat", listed.Blocks[0].Text)

	emptyText := c.Messages[6]
	require.Equal(t, []Kind{KindToolUse}, kinds(emptyText), `content "" gives no text block`)
	require.Equal(t, "", c.Messages[7].Blocks[0].Text)

	x := c.ToolIndex()
	require.Len(t, x.Pairs, 4)
	require.Equal(t, ToolPair{ID: "call_a", Use: Pos{3, 0}, Result: Pos{4, 0}}, x.Pairs[0])
	require.Equal(t, ToolPair{ID: "call_a", Use: Pos{6, 0}, Result: Pos{7, 0}}, x.Pairs[2], "a reused id pairs positionally")
	require.Equal(t, ToolPair{ID: "call_c", Use: Pos{10, 1}, Result: NoPos, Pending: true}, x.Pairs[3])
	p, ok := x.Pair(Pos{7, 0})
	require.True(t, ok)
	require.Equal(t, Pos{6, 0}, p.Use)
}

func TestAnthropicSampleModel(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/anthropic_sample.json"), FormatAnthropic)
	require.NoError(t, err)
	require.NotContains(t, c.Extra, "system")
	sys := c.Messages[0]
	require.Equal(t, RoleSystem, sys.Role)
	require.True(t, hasShape(sys.Shape, shapeSystemField))
	require.Len(t, sys.Blocks, 2)
	require.Contains(t, sys.Blocks[1].Extra, "cache_control")

	a := c.Messages[2]
	require.Equal(t, []Kind{KindThinking, KindThinking, KindText, KindToolUse, KindToolUse}, kinds(a))
	require.Equal(t, "I should read the Makefile first.", a.Blocks[0].Text)
	require.Contains(t, a.Blocks[0].Extra, "signature")
	require.Equal(t, shapeRedacted, a.Blocks[1].Shape)
	require.Equal(t, `{"path": "Makefile", "lines": [1, 40]}`, a.Blocks[3].Input, "input kept verbatim")

	results := c.Messages[3]
	require.Equal(t, RoleUser, results.Role, "tool results stay in a user message")
	require.Equal(t, "read_file", results.Blocks[0].ToolName)
	require.Equal(t, "module example.com/x\ngo 1.26", results.Blocks[1].Text)
	require.Equal(t, shapeList, results.Blocks[1].Shape)
	require.Contains(t, results.Blocks[1].Extra, "is_error", "is_error false stays in Extra")
	require.False(t, results.Blocks[1].IsError)

	failed := c.Messages[5]
	require.True(t, failed.Blocks[0].IsError)
	require.Equal(t, []Kind{KindToolResult, KindText, KindImage, KindOther}, kinds(failed))
	require.Equal(t, shapeAbsent, c.Messages[7].Blocks[0].Shape)

	x := c.ToolIndex()
	last := x.Pairs[len(x.Pairs)-1]
	require.Equal(t, "toolu_05", last.ID)
	require.True(t, last.Pending)
	require.NoError(t, CheckPairing(c))
}

func TestReActSampleModel(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/react_sample.json"), FormatReAct)
	require.NoError(t, err)
	require.Len(t, c.Messages, 12)
	for _, k := range []string{"metadata", "reasoning_trace", "execution", "context_compression"} {
		require.Contains(t, c.Extra, k)
	}
	require.JSONEq(t, `{"final_response": "Paris (2.1M), Marseille (0.87M) and Lyon (0.52M).", "duration_seconds": 41.7}`, string(c.Extra["execution"]))

	first := c.Messages[0]
	require.Equal(t, RoleAssistant, first.Role)
	require.Equal(t, []Kind{KindText, KindToolUse}, kinds(first))
	require.Equal(t, ShapeThought, first.Blocks[0].Shape)
	require.Equal(t, "web_search", first.Blocks[1].ToolName)
	require.Equal(t, ReActToolID(0), first.Blocks[1].ToolID)
	require.Equal(t, RoleTool, c.Messages[1].Role)
	require.Equal(t, ReActToolID(0), c.Messages[1].Blocks[0].ToolID)

	require.Equal(t, "fetch_url", c.Messages[2].Blocks[1].ToolName, `"name" field`)
	require.Equal(t, "fetch_url", c.Messages[4].Blocks[1].ToolName, `"tool_name" field`)
	require.Contains(t, c.Messages[2].Extra, "duration_ms")
	dict := c.Messages[3].Blocks[0]
	require.Equal(t, shapeRaw, dict.Shape)
	require.JSONEq(t, `{"status": 200, "population": 2102650, "year": 2023}`, dict.Text)

	require.Equal(t, []Kind{KindToolUse}, kinds(c.Messages[6]), "null thought has no block")
	require.Contains(t, c.Messages[6].Extra, "thought")
	require.Equal(t, `"finish"`, c.Messages[8].Blocks[1].Input)
	require.Equal(t, shapeAbsent, c.Messages[9].Blocks[0].Shape)
	require.Equal(t, "null", c.Messages[11].Blocks[0].Text)
}

func TestReplaceResultRendersString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file   string
		format Format
		msg    int
		want   string
	}{
		{"testdata/react_sample.json", FormatReAct, 3, `"result":"summary"`},
		{"testdata/anthropic_sample.json", FormatAnthropic, 3, `"content":"summary"`},
		{"testdata/openai_sample.json", FormatOpenAI, 5, `"content":"summary"`},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(readFile(t, tc.file), tc.format)
			require.NoError(t, err)
			out := c.Clone()
			blocks := out.Messages[tc.msg].Blocks
			k := len(blocks) - 1
			require.Equal(t, KindToolResult, blocks[k].Kind)
			blocks[k].ReplaceResult("summary")
			data, err := Render(out)
			require.NoError(t, err)
			require.Contains(t, string(data), tc.want)
			// The input conversation is untouched.
			require.NotEqual(t, "summary", c.Messages[tc.msg].Blocks[k].Text)
			require.NotEqual(t, "", c.Messages[tc.msg].Blocks[k].Shape)
		})
	}
}

// TestStaleListShape checks that a tool result whose text was changed
// without ReplaceResult still renders the new text, not the old list.
func TestStaleListShape(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/anthropic_sample.json"), FormatAnthropic)
	require.NoError(t, err)
	c = c.Clone()
	c.Messages[3].Blocks[1].Text = "shorter"
	data, err := Render(c)
	require.NoError(t, err)
	require.Contains(t, string(data), `"content":[{"type":"text","text":"shorter"}]`)
	require.NotContains(t, string(data), "module example.com/x")
}

func TestRealDataSWEAgent(t *testing.T) {
	t.Parallel()
	files := dataFiles(t, "swe-agent-*/*.json")
	require.Len(t, files, 15, "the 12 DeepSeek and 3 Gemini runs")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data := readFile(t, f)
			got, err := Detect(data)
			require.NoError(t, err)
			require.Equal(t, FormatOpenAI, got)
			c := roundTrip(t, data, FormatOpenAI)
			require.Contains(t, c.Extra, "instance_id")
			require.NoError(t, CheckPairing(c))
		})
	}
}

func TestRealDataTauBench(t *testing.T) {
	t.Parallel()
	var entries []struct {
		TaskID any             `json:"task_id"`
		Traj   json.RawMessage `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(readData(t, "tau-bench/gpt-4o-airline.json"), &entries))
	require.Len(t, entries, 20, "the first 20 of the 200 tau-bench trajectories")
	for i, e := range entries {
		got, err := Detect(e.Traj)
		require.NoError(t, err, "entry %d", i)
		require.Equal(t, FormatOpenAI, got, "entry %d", i)
		c := roundTrip(t, e.Traj, FormatOpenAI)
		require.Equal(t, shapeArray, c.Shape, "entry %d", i)
		require.NoError(t, CheckPairing(c), "entry %d", i)
	}
}

func kinds(m Message) []Kind {
	out := make([]Kind, len(m.Blocks))
	for i, b := range m.Blocks {
		out[i] = b.Kind
	}
	return out
}
