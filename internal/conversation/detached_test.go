package conversation

import (
	"encoding/json"
	"reflect"
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
