// Package conversation holds the canonical message model shared by every
// strategy, and the adapters that parse and render the wire formats agent
// platforms send (OpenAI Chat Completions, Anthropic Messages, the ReAct
// trajectory of the ReAct two-layer design) without losing a field.
package conversation

import (
	"encoding/json"
	"strings"
)

// Format names a wire format.
type Format string

// The supported wire formats.
const (
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	FormatReAct     Format = "react"
)

// Role is who wrote a message, in canonical terms.
type Role string

// Canonical roles. Tool results in OpenAI arrive as RoleTool messages; in
// Anthropic they are tool_result blocks inside RoleUser messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Kind is the type of a content block.
type Kind string

// Block kinds. KindOther carries any block type the model does not know
// about, verbatim in Extra, so that it survives a round trip.
const (
	KindText       Kind = "text"
	KindToolUse    Kind = "tool_use"
	KindToolResult Kind = "tool_result"
	KindThinking   Kind = "thinking"
	KindImage      Kind = "image"
	KindOther      Kind = "other"
)

// Block is one piece of a message's content.
type Block struct {
	Kind Kind
	// Text is the text of a text or thinking block, or the textual content
	// of a tool result.
	Text string
	// ToolID is the id of a tool_use, or the id of the call a tool_result
	// answers.
	ToolID string
	// ToolName is the name of the called tool (tool_use; tool_result when the
	// format carries it).
	ToolName string
	// Input is the JSON text of a tool call's arguments, verbatim as the
	// source had it (OpenAI's arguments string, Anthropic's input object).
	Input string
	// IsError marks a tool result that reports a failure.
	IsError bool
	// Extra holds the fields of the source block the model does not name,
	// so that rendering gives back the same JSON value.
	Extra map[string]json.RawMessage
	// Shape records how the source encoded this block when a format allows
	// several encodings (for example a tool_result whose content was a
	// string rather than a list). Adapters own its values.
	Shape string
}

// Message is one turn of a conversation.
type Message struct {
	Role   Role
	Blocks []Block
	// Extra holds the message fields the model does not name.
	Extra map[string]json.RawMessage
	// Shape records the source encoding of the content (for example an
	// OpenAI content string versus a list of parts, or null). Adapters own
	// its values.
	Shape string
}

// Conversation is a whole conversation in canonical form.
type Conversation struct {
	Format   Format
	Messages []Message
	// Extra holds the top-level fields besides the messages (model,
	// metadata, system for Anthropic is a message, not Extra).
	Extra map[string]json.RawMessage
	// Shape records the top-level encoding (for example a bare JSON array of
	// messages versus an object with a messages field). Adapters own its
	// values.
	Shape string
}

// Clone returns a deep copy, so that strategies can build their output
// without ever changing their input.
func (c Conversation) Clone() Conversation {
	out := c
	out.Extra = cloneExtra(c.Extra)
	out.Messages = make([]Message, len(c.Messages))
	for i, m := range c.Messages {
		out.Messages[i] = m.Clone()
	}
	return out
}

// Clone returns a deep copy of the message.
func (m Message) Clone() Message {
	out := m
	out.Extra = cloneExtra(m.Extra)
	out.Blocks = make([]Block, len(m.Blocks))
	for i, b := range m.Blocks {
		b.Extra = cloneExtra(b.Extra)
		out.Blocks[i] = b
	}
	return out
}

// Detached returns a deep copy that shares no memory with c, strings
// included, for a copy kept long after c (a cache): it keeps alive
// neither the buffers c was parsed from nor the strings of the code that
// built c, and all it holds was allocated here.
func (c Conversation) Detached() Conversation {
	out := Conversation{Format: Format(strings.Clone(string(c.Format))), Extra: detachExtra(c.Extra),
		Shape: strings.Clone(c.Shape), Messages: make([]Message, len(c.Messages))}
	for i, m := range c.Messages {
		dm := Message{Role: Role(strings.Clone(string(m.Role))), Extra: detachExtra(m.Extra), Shape: strings.Clone(m.Shape),
			Blocks: make([]Block, len(m.Blocks))}
		for j, b := range m.Blocks {
			dm.Blocks[j] = Block{Kind: Kind(strings.Clone(string(b.Kind))), Text: strings.Clone(b.Text), ToolID: strings.Clone(b.ToolID),
				ToolName: strings.Clone(b.ToolName), Input: strings.Clone(b.Input), IsError: b.IsError,
				Extra: detachExtra(b.Extra), Shape: strings.Clone(b.Shape)}
		}
		out.Messages[i] = dm
	}
	return out
}

// detachExtra is cloneExtra with the keys copied too.
func detachExtra(in map[string]json.RawMessage) map[string]json.RawMessage {
	if in == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(in))
	for k, v := range in {
		out[strings.Clone(k)] = append(json.RawMessage(nil), v...)
	}
	return out
}

func cloneExtra(in map[string]json.RawMessage) map[string]json.RawMessage {
	if in == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(in))
	for k, v := range in {
		out[k] = append(json.RawMessage(nil), v...)
	}
	return out
}
