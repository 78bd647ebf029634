package conversation

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nested is v inside n levels of {"a": ...} (or [...] when array).
func nested(n int, array bool, v string) string {
	open, close := `{"a":`, `}`
	if array {
		open, close = `[`, `]`
	}
	return strings.Repeat(open, n) + v + strings.Repeat(close, n)
}

// TestDepthLimit: a document nested deeper than MaxDepth is refused with
// the message index and the path of the field holding the deep value;
// one at the limit parses; brackets inside strings do not count.
func TestDepthLimit(t *testing.T) {
	t.Parallel()
	anthropicUse := func(input string) string {
		return `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":` +
			input + `}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	}
	// The input object is at depth 5: {messages [ {message content [ {block input.
	const inputDepth = 5
	tests := []struct {
		name   string
		format Format
		doc    string
		index  int
		field  string
	}{
		{"anthropic tool input 9000 deep", FormatAnthropic, anthropicUse(nested(9000, false, "1")), 1, "content[0].input.a.a.a"},
		{"anthropic tool input one past", FormatAnthropic, anthropicUse(nested(MaxDepth-inputDepth+2, false, "1")), 1, "content[0].input.a.a.a"},
		{"anthropic arrays", FormatAnthropic, anthropicUse(`{"x":` + nested(MaxDepth, true, "1") + `}`), 1, "content[0].input.x[0][0]"},
		{"openai extra field", FormatOpenAI, `[{"role":"user","content":"x"},{"role":"user","content":"y","meta":` + nested(MaxDepth, false, "1") + `}]`, 1, "meta.a.a.a.a.a"},
		{"react", FormatReAct, `{"execution":{"tool_calls":[{"thought":"t","action":` + nested(MaxDepth, false, "{}") + `,"result":"r"}]}}`, -1, "execution.tool_calls[0].action.a.a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, parse := range []func() (Conversation, error){
				func() (Conversation, error) { return Parse([]byte(tt.doc), tt.format) },
				func() (Conversation, error) { return ParseAny([]byte(tt.doc)) },
			} {
				_, err := parse()
				var ce *Error
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tt.index, ce.Index, ce.Error())
				require.Equal(t, tt.field, ce.Field)
				require.Contains(t, ce.Reason, "nested more than 128 levels")
			}
		})
	}

	atLimit := anthropicUse(nested(MaxDepth-inputDepth, false, "1"))
	require.Equal(t, -1, depthExceeded([]byte(atLimit), MaxDepth))
	_, err := Parse([]byte(atLimit), FormatAnthropic)
	require.NoError(t, err, "a document at the limit parses")
	inString := anthropicUse(`{"s":"` + strings.Repeat(`[{\"`, 500) + `"}`)
	_, err = Parse([]byte(inString), FormatAnthropic)
	require.NoError(t, err, "brackets and escaped quotes inside a string are text")
}
