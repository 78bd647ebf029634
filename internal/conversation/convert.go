package conversation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Parse decodes a conversation in the given wire format. Rendering the
// result gives back the same JSON value (key order and whitespace aside):
// unknown fields at every level are kept in Extra and alternative encodings
// in Shape. The one exception is an Anthropic document with consecutive
// messages of the same role, which Render merges (see MergeSameRole).
//
// Parse validates as it goes and fails with an *Error (wrapped; use
// errors.As) on: malformed JSON (with line and column), invalid UTF-8 in any
// string, nesting deeper than MaxDepth (with the message and the path of
// the field), a value of the wrong type, an unknown role, a message with no
// content at all (null or missing content without tool calls, or an empty
// user text), a tool result with no earlier call awaiting it, and a tool
// call id reused while the earlier call with that id still awaits its
// result. It does not require every call to have a result; CheckPairing
// does.
func Parse(data []byte, f Format) (Conversation, error) {
	return parse(data, f, decoded{})
}

// ParseAny detects the format of data, then parses it. Detection hands what
// it has checked and decoded to the parser, which does not do it again.
func ParseAny(data []byte) (Conversation, error) {
	f, pre, err := detect(data)
	if err != nil {
		return Conversation{}, fmt.Errorf("detect format: %w", err)
	}
	return parse(data, f, pre)
}

// decoded is what detection found out about a document, for the parser;
// the zero value is nothing.
type decoded struct {
	// valid says the document is valid JSON.
	valid bool
	// top holds the fields of a top-level object.
	top map[string]json.RawMessage
	// list holds the elements of the message list (a top-level array, or
	// the messages field of a top-level object) when listOK, which
	// detection sets only when every element is an object.
	list   []map[string]json.RawMessage
	listOK bool
}

// objects takes a message list apart like splitObjects, unless detection
// already did.
func (pre decoded) objects(raw []byte) (objs []map[string]json.RawMessage, bad int, kind string) {
	if pre.listOK {
		return pre.list, -1, ""
	}
	return splitObjects(raw)
}

// parse is Parse with what detection found out.
func parse(data []byte, f Format, pre decoded) (Conversation, error) {
	var parse func([]byte, decoded) (Conversation, error)
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
	// The parsers take the document apart assuming valid JSON, so syntax
	// is checked first, on the whole document. So is UTF-8, because the
	// decoder would hide invalid bytes.
	if !pre.valid {
		if err := checkSyntax(data); err != nil {
			return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, err)
		}
	}
	if !utf8.Valid(data) {
		return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, checkUTF8(data, f != FormatReAct))
	}
	if err := checkDepth(data, f != FormatReAct); err != nil {
		return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, err)
	}
	c, err := parse(data, pre)
	if err != nil {
		return Conversation{}, fmt.Errorf("parse %s conversation: %w", f, err)
	}
	c.ownExtra()
	return c, nil
}

// ownExtra gives every Extra value of a conversation just parsed its own
// bytes: the parsers leave them sharing the document's (see splitObject),
// which the conversation must not keep alive nor see change.
func (c *Conversation) ownExtra() {
	own := func(m map[string]json.RawMessage) {
		for k, v := range m {
			m[k] = bytes.Clone(v)
		}
	}
	own(c.Extra)
	for i := range c.Messages {
		own(c.Messages[i].Extra)
		for j := range c.Messages[i].Blocks {
			own(c.Messages[i].Blocks[j].Extra)
		}
	}
}

// Render encodes the conversation in c.Format. Known fields come first in a
// fixed order, then Extra fields in sorted key order, so the output is
// deterministic. It fails with an *Error (wrapped) when the conversation
// cannot be expressed in its format, for example a tool_result block in an
// OpenAI assistant message, a ReAct turn not followed by its result, text
// holding invalid UTF-8, or an Extra value that is not valid JSON. An
// Anthropic conversation is written with alternating roles: consecutive
// user (or assistant) messages become one, their blocks in order (see
// MergeSameRole).
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
	f, _, err := detect(data)
	if err != nil {
		return "", fmt.Errorf("detect format: %w", err)
	}
	return f, nil
}

// detect is Detect, also returning what it found out for the parser.
func detect(data []byte) (Format, decoded, error) {
	if err := checkSyntax(data); err != nil {
		return "", decoded{}, err
	}
	pre := decoded{valid: true}
	switch jsonKind(data) {
	case jsonObject:
		top, _ := splitObject(data)
		pre.top = top
		if _, ok := top["execution"]; ok {
			return FormatReAct, pre, nil
		}
		if _, ok := top["reasoning_trace"]; ok {
			return FormatReAct, pre, nil
		}
		if _, ok := top["system"]; ok {
			return FormatAnthropic, pre, nil
		}
		raw, ok := top["messages"]
		if !ok {
			return "", decoded{}, errAt(-1, "", "unrecognized conversation: a JSON object needs messages (OpenAI, Anthropic), system (Anthropic), or execution or reasoning_trace (ReAct)")
		}
		if jsonKind(raw) != jsonArray {
			return FormatOpenAI, pre, nil // the parser says what is wrong
		}
		if hasAnthropicBlocks(pre.splitList(raw), raw) {
			return FormatAnthropic, pre, nil
		}
		return FormatOpenAI, pre, nil
	case jsonArray:
		items := pre.splitList(data)
		if len(items) == 0 {
			return FormatOpenAI, pre, nil
		}
		roles := 0
		for _, obj := range items {
			_, thought := obj["thought"]
			_, action := obj["action"]
			_, role := obj["role"]
			if (thought || action) && !role {
				return FormatReAct, pre, nil
			}
			if role {
				roles++
			}
		}
		if hasAnthropicBlocks(items, data) {
			return FormatAnthropic, pre, nil
		}
		if roles > 0 {
			return FormatOpenAI, pre, nil
		}
		return "", decoded{}, errAt(-1, "", "unrecognized conversation: array elements have neither role (messages) nor thought or action (ReAct turns)")
	default:
		return "", decoded{}, errAt(-1, "", "unrecognized conversation: top level is a %s, want an object or an array", jsonKind(data))
	}
}

// splitList takes a message list apart for detection: the fields of each
// element, nil for one that is not an object. When all are objects, pre
// keeps them for the parser.
func (pre *decoded) splitList(raw []byte) []map[string]json.RawMessage {
	if objs, bad, _ := splitObjects(raw); bad < 0 {
		pre.list, pre.listOK = objs, true
		return objs
	}
	elems := elements(raw)
	items := make([]map[string]json.RawMessage, len(elems))
	for k, e := range elems {
		items[k], _ = splitObject(e)
	}
	return items
}

// hasAnthropicBlocks reports whether any message has a content block type
// only Anthropic uses. msgs are the elements of the raw message list, nil
// for one that is not an object.
func hasAnthropicBlocks(msgs []map[string]json.RawMessage, raw []byte) bool {
	for _, m := range msgs {
		content, ok := foldField(m, "content")
		if !ok {
			return hasAnthropicBlocksInOrder(raw)
		}
		if hasAnthropicContent(content) {
			return true
		}
	}
	return false
}

// hasAnthropicBlocksInOrder is hasAnthropicBlocks for a list where a
// message has several keys spelling content, of which the last wins.
func hasAnthropicBlocksInOrder(raw []byte) bool {
	for _, e := range elements(raw) {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(e, &m) == nil && hasAnthropicContent(m.Content) {
			return true
		}
	}
	return false
}

// hasAnthropicContent reports whether a message content (from a valid
// document) is a list holding a block type only Anthropic uses.
func hasAnthropicContent(content []byte) bool {
	if jsonKind(content) != jsonArray {
		return false
	}
	for _, b := range elements(content) {
		obj, _ := splitObject(b)
		raw, ok := foldField(obj, "type")
		var typ string
		if ok {
			typ, _ = decodeString(raw)
		} else {
			var t struct {
				Type any `json:"type"`
			}
			_ = json.Unmarshal(b, &t) // b is an object: cannot fail
			typ, _ = t.Type.(string)
		}
		if anthropicOnlyBlocks[typ] {
			return true
		}
	}
	return false
}

// foldField looks a key up as json.Unmarshal into a struct field does,
// which is how detection has always read content and type: ignoring case,
// the last of several matching keys winning. A map does not keep the order
// of its keys, so ok is false when several keys match.
func foldField(m map[string]json.RawMessage, key string) (v json.RawMessage, ok bool) {
	n := 0
	for k, kv := range m {
		if strings.EqualFold(k, key) {
			v = kv
			n++
		}
	}
	return v, n <= 1
}

// messageList reads a chat conversation's top level, as the OpenAI and
// Anthropic formats both have it: an array of message objects, or an
// object whose messages field is one. top is the object's other fields
// (nil for an array), for the caller to take its own from and keep the
// rest as the conversation's Extra; c's Shape records an array.
func messageList(data []byte, pre decoded, c *Conversation) (msgs []map[string]json.RawMessage, top map[string]json.RawMessage, err error) {
	list := data
	switch jsonKind(data) {
	case jsonArray:
		c.Shape = shapeArray
	case jsonObject:
		top = pre.top
		if top == nil {
			top, _ = splitObject(data)
		}
		raw, ok := take(top, "messages")
		if !ok {
			return nil, nil, errAt(-1, "messages", "missing")
		}
		if jsonKind(raw) != jsonArray {
			return nil, nil, errAt(-1, "messages", "must be an array, got %s", jsonKind(raw))
		}
		list = raw
	default:
		return nil, nil, errAt(-1, "", "top level must be a JSON object with messages or an array of messages, got %s", jsonKind(data))
	}
	msgs, bad, kind := pre.objects(list)
	if bad >= 0 {
		return nil, nil, errAt(bad, "", "must be an object, got %s", kind)
	}
	return msgs, top, nil
}
