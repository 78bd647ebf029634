package conversation

import (
	"encoding/json"
	"strings"
)

// Shape values. A Shape is a space-separated set of these tokens; the empty
// Shape is the default encoding of each format, which is also what code
// building new messages gets without thinking about it.
//
// Conversation.Shape:
//
//	"array"          OpenAI / Anthropic: a bare JSON array of messages;
//	                 ReAct: a bare JSON array of turns
//	"no-tool-calls"  ReAct: execution had no tool_calls array (absent or
//	                 null), so none is written while there are no turns
//
// Message.Shape:
//
//	"developer"      OpenAI: a RoleSystem message spelled "developer"
//	"null"           OpenAI: content was null (assistant with tool calls)
//	"absent"         OpenAI: content was missing (assistant with tool calls)
//	"list"           content was an array of parts / blocks
//	"named"          OpenAI: a tool message carried "name" (ToolName)
//	"system-field"   Anthropic: the message is the top-level system field
//	"in-messages"    Anthropic: a system message inside messages (the
//	                 mid-conversation system messages Claude Code sends)
//
// Block.Shape:
//
//	"thought"        ReAct: the text block holding a turn's thought
//	"untyped"        OpenAI: the tool call had no "type" field
//	"redacted"       Anthropic: a redacted_thinking block (data in Extra)
//	"list"           tool result whose content was an array; Extra["content"]
//	                 keeps the array, Text is its text parts joined by "\n"
//	"null"           tool result whose content was null (Anthropic)
//	"absent"         tool result (ReAct, Anthropic) or ReAct action that
//	                 was missing
//	"raw"            ReAct: the result was not a string; Text holds its JSON
const (
	shapeArray       = "array"
	shapeNoToolCalls = "no-tool-calls"
	shapeDeveloper   = "developer"
	shapeNull        = "null"
	shapeAbsent      = "absent"
	shapeList        = "list"
	shapeNamed       = "named"
	shapeSystemField = "system-field"
	shapeInMessages  = "in-messages"
	shapeUntyped     = "untyped"
	shapeRedacted    = "redacted"
	shapeRaw         = "raw"

	// ShapeThought marks the text block of a ReAct turn that holds the
	// turn's thought. Strategies must never change such a block.
	ShapeThought = "thought"
)

// hasShape reports whether a Shape holds a token.
func hasShape(shape, token string) bool {
	for _, t := range strings.Fields(shape) {
		if t == token {
			return true
		}
	}
	return false
}

// addShape adds a token to a Shape.
func addShape(shape, token string) string {
	if shape == "" {
		return token
	}
	return shape + " " + token
}

// ReplaceResult replaces the content of a tool result block with text, as
// compression does. It forgets how the old content was encoded (a list of
// parts, raw JSON of a ReAct result), because that memory describes content
// that is gone: the result renders as a plain string. Extra is copied, not
// changed in place, so a block shared with another conversation is safe.
func (b *Block) ReplaceResult(text string) {
	b.Text = text
	if b.Kind != KindToolResult {
		return
	}
	b.Shape = ""
	if _, ok := b.Extra["content"]; ok {
		extra := make(map[string]json.RawMessage, len(b.Extra))
		for k, v := range b.Extra {
			if k != "content" {
				extra[k] = v
			}
		}
		b.Extra = nilIfEmpty(extra)
	}
}
