package conversation

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func use(id string) Block    { return Block{Kind: KindToolUse, ToolID: id, ToolName: "f", Input: "{}"} }
func result(id string) Block { return Block{Kind: KindToolResult, ToolID: id, Text: "r"} }
func say(s string) Block     { return Block{Kind: KindText, Text: s} }

func msg(r Role, blocks ...Block) Message { return Message{Role: r, Blocks: blocks} }

func TestCheckPairing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		msgs   []Message
		index  int // -1: no error
		block  int
		id     string
		reason string
	}{
		{"empty", nil, -1, 0, "", ""},
		{"paired", []Message{msg(RoleUser, say("q")), msg(RoleAssistant, use("a")), msg(RoleTool, result("a")), msg(RoleAssistant, say("done"))}, -1, 0, "", ""},
		{"pending last", []Message{msg(RoleUser, say("q")), msg(RoleAssistant, say("x"), use("a"))}, -1, 0, "", ""},
		{"pending after partial results", []Message{msg(RoleUser, say("q")), msg(RoleAssistant, use("a"), use("b")), msg(RoleTool, result("a"))}, -1, 0, "", ""},
		{"anthropic style results", []Message{msg(RoleAssistant, use("a"), use("b")), msg(RoleUser, result("a"), result("b")), msg(RoleAssistant, say("ok"))}, -1, 0, "", ""},
		{"reused id after result", []Message{msg(RoleAssistant, use("a")), msg(RoleTool, result("a")), msg(RoleAssistant, use("a")), msg(RoleTool, result("a"))}, -1, 0, "", ""},
		{"orphan result", []Message{msg(RoleUser, say("q")), msg(RoleTool, result("x"))}, 1, 0, "x", "no earlier tool use"},
		{"result before use", []Message{msg(RoleUser, say("q"), result("a")), msg(RoleAssistant, use("a"))}, 0, 1, "a", "no earlier tool use"},
		{"second result", []Message{msg(RoleAssistant, use("a")), msg(RoleTool, result("a")), msg(RoleTool, result("a"))}, 2, 0, "a", "no earlier tool use"},
		{"missing result", []Message{msg(RoleAssistant, use("a")), msg(RoleUser, say("next")), msg(RoleAssistant, say("ok"))}, 0, 0, "a", "has no result"},
		{"missing result before pending", []Message{msg(RoleAssistant, use("a")), msg(RoleAssistant, use("b"))}, 0, 0, "a", "has no result"},
		{"pending but user spoke after", []Message{msg(RoleAssistant, use("a")), msg(RoleUser, say("hello?"))}, 0, 0, "a", "has no result"},
		{"duplicate open id", []Message{msg(RoleAssistant, use("a")), msg(RoleAssistant, use("a"))}, 1, 0, "a", "duplicate tool use id"},
		{"empty id", []Message{msg(RoleAssistant, use(""))}, 0, 0, "", "no id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckPairing(Conversation{Messages: tc.msgs})
			if tc.index < 0 {
				require.NoError(t, err)
				return
			}
			var pe *PairingError
			require.True(t, errors.As(err, &pe), "want *PairingError, got %v", err)
			require.Equal(t, tc.index, pe.Index, "%v", err)
			require.Equal(t, tc.block, pe.Block, "%v", err)
			require.Equal(t, tc.id, pe.ToolID, "%v", err)
			require.Contains(t, pe.Reason, tc.reason)
			require.Contains(t, err.Error(), "message ")
		})
	}
}

func TestToolIndex(t *testing.T) {
	t.Parallel()
	c := Conversation{Messages: []Message{
		msg(RoleUser, say("q"), result("orphan")),
		msg(RoleAssistant, use("a"), use("b")),
		msg(RoleUser, result("b"), result("a")),
		msg(RoleAssistant, use("a")),
		msg(RoleTool, result("a")),
		msg(RoleAssistant, use("lost")),
		msg(RoleUser, say("more")),
		msg(RoleAssistant, use("p")),
	}}
	x := c.ToolIndex()
	require.Equal(t, []ToolPair{
		{ID: "orphan", Use: NoPos, Result: Pos{0, 1}},
		{ID: "a", Use: Pos{1, 0}, Result: Pos{2, 1}},
		{ID: "b", Use: Pos{1, 1}, Result: Pos{2, 0}},
		{ID: "a", Use: Pos{3, 0}, Result: Pos{4, 0}},
		{ID: "lost", Use: Pos{5, 0}, Result: NoPos},
		{ID: "p", Use: Pos{7, 0}, Result: NoPos, Pending: true},
	}, x.Pairs)
	p, ok := x.Pair(Pos{4, 0})
	require.True(t, ok)
	require.Equal(t, Pos{3, 0}, p.Use)
	_, ok = x.Pair(Pos{0, 0})
	require.False(t, ok, "a text block is in no pair")
	require.False(t, NoPos.Valid())
}

func TestSetReActStats(t *testing.T) {
	t.Parallel()
	c, err := Parse(readFile(t, "testdata/react_sample.json"), FormatReAct)
	require.NoError(t, err)
	before := c.Clone()
	c.Extra["context_compression"] = json.RawMessage(`{"enabled": false, "note": "kept", "stats": {"total_size": 1, "extra_stat": 7}}`)
	shared := c.Extra
	stats := ReActStats{TotalSize: 165000, ModelLimit: 200000, UsagePercent: 82.5, TurnsCount: 6, CompressionThreshold: 160000, NeedsCompression: true}
	require.NoError(t, SetReActStats(&c, stats))
	require.JSONEq(t, `{"enabled": false, "note": "kept", "stats": {"total_size": 1, "extra_stat": 7}}`, string(shared["context_compression"]), "the old map is not changed")

	out, err := Render(c)
	require.NoError(t, err)
	var doc struct {
		ContextCompression struct {
			Enabled bool            `json:"enabled"`
			Note    string          `json:"note"`
			Stats   json.RawMessage `json:"stats"`
		} `json:"context_compression"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	require.True(t, doc.ContextCompression.Enabled)
	require.Equal(t, "kept", doc.ContextCompression.Note)
	require.JSONEq(t, `{"total_size": 165000, "model_limit": 200000, "usage_percent": 82.5, "turns_count": 6,
		"compression_threshold": 160000, "needs_compression": true, "extra_stat": 7}`, string(doc.ContextCompression.Stats))

	// Everything else is unchanged.
	again, err := Parse(out, FormatReAct)
	require.NoError(t, err)
	delete(before.Extra, "context_compression")
	delete(again.Extra, "context_compression")
	require.Equal(t, canonical(t, before), canonical(t, again))

	fresh := Conversation{Format: FormatReAct}
	require.NoError(t, SetReActStats(&fresh, stats))
	require.Contains(t, string(fresh.Extra["context_compression"]), `"enabled":true`)

	require.Error(t, SetReActStats(&Conversation{Format: FormatOpenAI}, stats))
	require.Error(t, SetReActStats(&Conversation{Format: FormatReAct, Shape: shapeArray}, stats))
}
