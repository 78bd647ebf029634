package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

func TestRequestBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		format conversation.Format
		raw    string
		want   string // the body, as JSON
		unsup  bool   // no faithful request: errUnsupported
	}{
		{
			name: "anthropic object: system, messages and tools; other fields left out", format: conversation.FormatAnthropic,
			raw: `{"model":"claude-x","max_tokens":10,"stream":false,"system":"Be brief.","tools":[{"name":"t","input_schema":{"type":"object"}}],
			       "messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`,
			want: `{"model":"claude-sonnet-4-5","system":"Be brief.","tools":[{"name":"t","input_schema":{"type":"object"}}],
			        "messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`,
		},
		{
			name: "anthropic bare list", format: conversation.FormatAnthropic,
			raw:  `[{"role":"user","content":"hi"}]`,
			want: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "openai: system joined, tool calls and results, function tools", format: conversation.FormatOpenAI,
			raw: `{"model":"x","tools":[{"type":"function","function":{"name":"read","description":"d","parameters":{"type":"object","properties":{"p":{"type":"string"}}}}}],
			 "messages":[{"role":"system","content":"Rule one."},{"role":"system","content":"Rule two."},
			  {"role":"user","content":"read a.go"},
			  {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"p\":\"a.go\"}"}}]},
			  {"role":"tool","tool_call_id":"c1","content":"package a"},
			  {"role":"user","content":"and?"},
			  {"role":"assistant","content":"ok"},
			  {"role":"assistant","content":"done"}]}`,
			want: `{"model":"claude-sonnet-4-5","system":"Rule one.\n\nRule two.",
			 "tools":[{"name":"read","description":"d","input_schema":{"type":"object","properties":{"p":{"type":"string"}}}}],
			 "messages":[{"role":"user","content":[{"type":"text","text":"read a.go"}]},
			  {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read","input":{"p":"a.go"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"package a"},{"type":"text","text":"and?"}]},
			  {"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"text","text":"done"}]}]}`,
		},
		{
			name: "openai image", format: conversation.FormatOpenAI,
			raw:   `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
			unsup: true,
		},
		{
			name: "react trajectory", format: conversation.FormatReAct,
			raw:   `[{"thought":"t","action":"a","observation":"o"}]`,
			unsup: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conv, err := conversation.Parse([]byte(tc.raw), tc.format)
			require.NoError(t, err)
			body, err := RequestBody("claude-sonnet-4-5", conv)
			if tc.unsup {
				require.ErrorIs(t, err, errUnsupported)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(body))
			again, err := RequestBody("claude-sonnet-4-5", conv)
			require.NoError(t, err)
			require.True(t, bytes.Equal(body, again), "the body is deterministic (it keys the cache)")
			var shape map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &shape))
			require.Empty(t, checkShape(shape))
		})
	}
}
