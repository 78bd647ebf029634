package conversation

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestDetachedSharesNothing: a detached copy equals the original and
// points into none of its strings or bytes.
func TestDetachedSharesNothing(t *testing.T) {
	t.Parallel()
	// Detached names every field; a new one must be copied there too.
	require.Equal(t, 4, reflect.TypeFor[Conversation]().NumField(), "update Detached")
	require.Equal(t, 4, reflect.TypeFor[Message]().NumField(), "update Detached")
	require.Equal(t, 8, reflect.TypeFor[Block]().NumField(), "update Detached")

	data := readFile(t, "testdata/openai_sample.json")
	c, err := Parse(data, FormatOpenAI)
	require.NoError(t, err)
	c.Extra = map[string]json.RawMessage{"metadata": json.RawMessage(`{"a":1}`)}
	c.Messages[0].Blocks[0].Extra = map[string]json.RawMessage{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}
	c.Messages[0].Blocks[0].IsError = true
	d := c.Detached()
	require.Equal(t, c, d)

	var shared []string
	str := func(where, a, b string) {
		if a != "" && unsafe.StringData(a) == unsafe.StringData(b) {
			shared = append(shared, where)
		}
	}
	str("format", string(c.Format), string(d.Format))
	str("shape", c.Shape, d.Shape)
	for k := range c.Extra {
		for dk, dv := range d.Extra {
			if dk == k {
				str("extra key", k, dk)
				require.NotSame(t, &c.Extra[k][0], &dv[0])
			}
		}
	}
	for i, m := range c.Messages {
		dm := d.Messages[i]
		str("role", string(m.Role), string(dm.Role))
		str("message shape", m.Shape, dm.Shape)
		for j, b := range m.Blocks {
			db := dm.Blocks[j]
			str("kind", string(b.Kind), string(db.Kind))
			str("text", b.Text, db.Text)
			str("tool id", b.ToolID, db.ToolID)
			str("tool name", b.ToolName, db.ToolName)
			str("input", b.Input, db.Input)
			str("block shape", b.Shape, db.Shape)
		}
	}
	require.Empty(t, shared, "the detached copy shares these strings")
}

// TestParsedConversationKeepsNothingOfTheDocument: the parsers share the
// document's bytes while they work, but what a parsed conversation keeps
// is its own: overwriting the document changes nothing in it, for every
// format and every kind of Extra value (top level, message, block, a tool
// call's other function fields, a result given as parts).
func TestParsedConversationKeepsNothingOfTheDocument(t *testing.T) {
	t.Parallel()
	docs := map[Format]string{
		FormatOpenAI: `{"model":"m","metadata":{"k":[1,2]},"messages":[{"role":"user","content":"hi","name":"bob"},` +
			`{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"c1","type":"function","x":1,"function":{"name":"ls","arguments":"{}","strict":true}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"out","cache":{"a":1}}]},` +
			`{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}},{"type":"text","text":"see"}]}]}`,
		FormatAnthropic: `{"model":"m","system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"max_tokens":5,"messages":[` +
			`{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},` +
			`{"type":"tool_use","id":"t1","name":"ls","input":{"path":"/"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",` +
			`"content":[{"type":"text","text":"a"}],"is_error":false},{"type":"other","z":[true]}]}]}`,
	}
	for _, d := range dataFiles(t, "*/*.json")[:3] {
		docs[Format("file "+d)] = string(readFile(t, d))
	}
	for name, doc := range docs {
		data := []byte(doc)
		c, err := ParseAny(data)
		require.NoError(t, err, name)
		want, err := Render(c)
		require.NoError(t, err, name)
		for i := range data {
			data[i] = 'x'
		}
		got, err := Render(c)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
	}
}

// TestParseHoldsTheDocumentOnce: parsing a conversation of megabytes
// allocates what the conversation keeps (its text, once, and the field
// maps: 2.2× the document), not a copy of every field of the document
// besides and of every text with an escape (5.2×).
func TestParseHoldsTheDocumentOnce(t *testing.T) {
	one := readData(t, "swe-agent-deepseek/django__django-11742.json")
	c, err := Parse(one, FormatOpenAI)
	require.NoError(t, err)
	// Its turns up to the last result, again and again: an id is used
	// again only once its call has its result.
	last := 0
	for i, m := range c.Messages {
		if m.Role == RoleTool {
			last = i
		}
	}
	turns := c.Messages[1 : last+1]
	c.Messages = c.Messages[:1]
	for len(c.Messages) < 4000 {
		c.Messages = append(c.Messages, turns...)
	}
	data, err := Render(c)
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	parsed, err := Parse(data, FormatOpenAI)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, parsed.Messages, len(c.Messages))
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("parsing %d bytes allocated %.1f MB", len(data), float64(alloc)/(1<<20))
	require.Less(t, alloc, uint64(len(data))*3, "parsing %d bytes allocated %d", len(data), alloc)
}
