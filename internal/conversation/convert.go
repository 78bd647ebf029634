package conversation

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Parse decodes a conversation in the given wire format. Rendering the
// result gives back the same JSON value (key order and whitespace aside):
// unknown fields at every level are kept in Extra and alternative encodings
// in Shape.
//
// Parse validates as it goes and fails with an *Error (wrapped; use
// errors.As) on: malformed JSON (with line and column), invalid UTF-8 in any
// string, a value of the wrong type, an unknown role, a message with no
// content at all (null or missing content without tool calls, or an empty
// user text), a tool result with no earlier call awaiting it, and a tool
// call id reused while the earlier call with that id still awaits its
// result. It does not require every call to have a result; CheckPairing
// does.
func Parse(data []byte, f Format) (Conversation, error) {
	var parse func([]byte) (Conversation, error)
	switch f {
	case FormatOpenAI:
		parse = parseOpenAI
	case FormatAnthropic:
		parse = parseAnthropic
	case FormatReAct:
		parse = parseReAct
	default:
		return Conversation{}, fmt.Errorf("parse: unknown format %q (want %s, %s or %s)", f, FormatOpenAI, FormatAnthropic, FormatReAct)
	}
	// Invalid UTF-8 is checked on the whole document up front because the
	// decoder would hide it; syntax errors come first, and the parsers'
	// own decoding reports them otherwise, saving a pass over large input.
	if !utf8.Valid(data) {
		if err := checkSyntax(data); err != nil {
			return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, err)
		}
		return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, checkUTF8(data, f != FormatReAct))
	}
	c, err := parse(data)
	if err != nil {
		return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, err)
	}
	return c, nil
}

// ParseAny detects the format of data, then parses it.
func ParseAny(data []byte) (Conversation, error) {
	f, err := Detect(data)
	if err != nil {
		return Conversation{}, err
	}
	return Parse(data, f)
}

// Render encodes the conversation in c.Format. Known fields come first in a
// fixed order, then Extra fields in sorted key order, so the output is
// deterministic. It fails with an *Error (wrapped) when the conversation
// cannot be expressed in its format, for example a tool_result block in an
// OpenAI assistant message, a ReAct turn not followed by its result, text
// holding invalid UTF-8, or an Extra value that is not valid JSON.
func Render(c Conversation) ([]byte, error) {
	var out []byte
	var err error
	switch c.Format {
	case FormatOpenAI:
		out, err = renderOpenAI(c)
	case FormatAnthropic:
		out, err = renderAnthropic(c)
	case FormatReAct:
		out, err = renderReAct(c)
	default:
		return nil, fmt.Errorf("render: unknown format %q", c.Format)
	}
	if err != nil {
		return nil, fmt.Errorf("render %s conversation: %w", c.Format, err)
	}
	return out, nil
}

// checkSyntax rejects anything that is not one valid JSON value, with the
// line and column of the problem.
func checkSyntax(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v json.RawMessage
	return jsonSyntaxError(data, json.Unmarshal(data, &v))
}

// anthropicOnlyBlocks are content block types that OpenAI chat never uses.
var anthropicOnlyBlocks = map[string]bool{
	"tool_use":          true,
	"tool_result":       true,
	"thinking":          true,
	"redacted_thinking": true,
}

// Detect sniffs the wire format from the JSON shape:
//   - ReAct: an object with "execution" or "reasoning_trace", or an array
//     whose elements are turns (objects with "thought" or "action");
//   - Anthropic: an object with "system", or messages holding a content
//     block of type tool_use, tool_result, thinking or redacted_thinking;
//   - OpenAI: any other object with "messages", or array of messages.
//
// Anything else is an error saying what was found.
func Detect(data []byte) (Format, error) {
	if err := checkSyntax(data); err != nil {
		return "", fmt.Errorf("detect format: %w", err)
	}
	switch jsonKind(data) {
	case jsonObject:
		top, _ := decodeObject(data)
		if _, ok := top["execution"]; ok {
			return FormatReAct, nil
		}
		if _, ok := top["reasoning_trace"]; ok {
			return FormatReAct, nil
		}
		if _, ok := top["system"]; ok {
			return FormatAnthropic, nil
		}
		raw, ok := top["messages"]
		if !ok {
			return "", fmt.Errorf("detect format: %w", errAt(-1, "", "unrecognized conversation: a JSON object needs messages (OpenAI, Anthropic), system (Anthropic), or execution or reasoning_trace (ReAct)"))
		}
		msgs, _ := decodeArray(raw)
		if hasAnthropicBlocks(msgs) {
			return FormatAnthropic, nil
		}
		return FormatOpenAI, nil
	case jsonArray:
		items, _ := decodeArray(data)
		if len(items) == 0 {
			return FormatOpenAI, nil
		}
		roles := 0
		for _, it := range items {
			obj, ok := decodeObject(it)
			if !ok {
				continue
			}
			_, thought := obj["thought"]
			_, action := obj["action"]
			_, role := obj["role"]
			if (thought || action) && !role {
				return FormatReAct, nil
			}
			if role {
				roles++
			}
		}
		if hasAnthropicBlocks(items) {
			return FormatAnthropic, nil
		}
		if roles > 0 {
			return FormatOpenAI, nil
		}
		return "", fmt.Errorf("detect format: %w", errAt(-1, "", "unrecognized conversation: array elements have neither role (messages) nor thought or action (ReAct turns)"))
	default:
		return "", fmt.Errorf("detect format: %w", errAt(-1, "", "unrecognized conversation: top level is a %s, want an object or an array", jsonKind(data)))
	}
}

// hasAnthropicBlocks reports whether any message has a content block type
// only Anthropic uses.
func hasAnthropicBlocks(msgs []json.RawMessage) bool {
	for _, raw := range msgs {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil || jsonKind(m.Content) != jsonArray {
			continue
		}
		var blocks []json.RawMessage
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			var t struct {
				Type any `json:"type"`
			}
			if json.Unmarshal(b, &t) != nil {
				continue
			}
			if s, ok := t.Type.(string); ok && anthropicOnlyBlocks[s] {
				return true
			}
		}
	}
	return false
}
