package conversation

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// OpenAI Chat Completions.
//
// Mapping: every message keeps its role (developer → RoleSystem + Shape
// "developer"). Content text becomes one KindText block (none for ""); a
// list of parts becomes one block per part (text → KindText, image_url →
// KindImage with the part minus "type" in Extra, anything else → KindOther
// with the whole part in Extra). Assistant tool_calls become KindToolUse
// blocks after the content blocks: Input is the arguments string verbatim,
// unknown fields of the call are in Extra, unknown fields of "function" in
// Extra["function"] as one object. A tool message becomes a RoleTool message
// with one KindToolResult block. A known field whose value carries nothing
// (tool_calls null or [], a non-string tool "name") stays in Extra verbatim.

func parseOpenAI(data []byte, pre decoded) (Conversation, error) {
	c := Conversation{Format: FormatOpenAI}
	msgs, top, err := messageList(data, pre, &c)
	if err != nil {
		return Conversation{}, err
	}
	c.Extra = nilIfEmpty(top)
	tr := newToolTracker()
	c.Messages = make([]Message, 0, len(msgs))
	for i, obj := range msgs {
		m, err := parseOpenAIMessage(obj, i, tr)
		if err != nil {
			return Conversation{}, err
		}
		c.Messages = append(c.Messages, m)
	}
	return c, nil
}

func parseOpenAIMessage(obj map[string]json.RawMessage, i int, tr *toolTracker) (Message, error) {
	roleRaw, ok := take(obj, "role")
	if !ok {
		return Message{}, errAt(i, "role", "missing")
	}
	role, ok := decodeString(roleRaw)
	if !ok {
		return Message{}, errAt(i, "role", "must be a string, got %s", jsonKind(roleRaw))
	}
	var m Message
	switch role {
	case "system":
		m.Role = RoleSystem
	case "developer":
		m.Role = RoleSystem
		m.Shape = addShape(m.Shape, shapeDeveloper)
	case "user":
		m.Role = RoleUser
	case "assistant":
		m.Role = RoleAssistant
	case "tool":
		m.Role = RoleTool
	default:
		return Message{}, errAt(i, "role", "unknown role %q (want system, developer, user, assistant or tool)", role)
	}

	var calls []json.RawMessage
	if tcRaw, ok := obj["tool_calls"]; ok {
		switch jsonKind(tcRaw) {
		case jsonNull:
			// Carries nothing: stays in Extra verbatim.
		case jsonArray:
			calls, _ = splitArray(tcRaw)
			if len(calls) == 0 {
				break // [] stays in Extra verbatim.
			}
			if m.Role != RoleAssistant {
				return Message{}, errAt(i, "tool_calls", "only assistant messages may carry tool calls, this one has role %q", role)
			}
			delete(obj, "tool_calls")
		default:
			return Message{}, errAt(i, "tool_calls", "must be an array, got %s", jsonKind(tcRaw))
		}
	}

	if m.Role == RoleTool {
		return parseOpenAITool(obj, i, m, tr)
	}
	content, err := parseOpenAIContent(obj, i, &m)
	if err != nil {
		return Message{}, err
	}
	m.Blocks = content
	for k, call := range calls {
		b, err := parseOpenAIToolCall(call, i, indexed("tool_calls", k), tr)
		if err != nil {
			return Message{}, err
		}
		m.Blocks = append(m.Blocks, b)
	}
	if len(m.Blocks) == 0 {
		if err := openAIEmpty(i, m); err != nil {
			return Message{}, err
		}
	}
	m.Extra = nilIfEmpty(obj)
	return m, nil
}

// openAIEmpty applies the rule for a message without content blocks and
// without tool calls: a system message may be empty text, an assistant or
// user message must say something, and nothing may have null or missing
// content.
func openAIEmpty(i int, m Message) error {
	switch {
	case hasShape(m.Shape, shapeAbsent):
		return errAt(i, "content", "missing, and the message has no tool calls")
	case hasShape(m.Shape, shapeNull):
		return errAt(i, "content", "null, and the message has no tool calls")
	case m.Role == RoleUser:
		return errAt(i, "content", "must not be empty")
	case m.Role == RoleAssistant:
		return errAt(i, "content", "empty, and the message has no tool calls")
	}
	return nil
}

// parseOpenAIContent decodes the content of a non-tool message into blocks
// and records its encoding in m.Shape.
func parseOpenAIContent(obj map[string]json.RawMessage, i int, m *Message) ([]Block, error) {
	raw, ok := take(obj, "content")
	if !ok {
		m.Shape = addShape(m.Shape, shapeAbsent)
		return nil, nil
	}
	switch jsonKind(raw) {
	case jsonNull:
		m.Shape = addShape(m.Shape, shapeNull)
		return nil, nil
	case jsonString:
		s, _ := decodeString(raw)
		if s == "" {
			return nil, nil
		}
		return []Block{{Kind: KindText, Text: s}}, nil
	case jsonArray:
		m.Shape = addShape(m.Shape, shapeList)
		parts, _ := splitArray(raw)
		blocks := make([]Block, 0, len(parts))
		for k, p := range parts {
			b, err := parseOpenAIPart(p, i, indexed("content", k))
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		}
		return blocks, nil
	default:
		return nil, errAt(i, "content", "must be a string, an array of parts or null, got %s", jsonKind(raw))
	}
}

func parseOpenAIPart(raw json.RawMessage, i int, at string) (Block, error) {
	obj, ok := splitObject(raw)
	if !ok {
		return Block{}, errAt(i, at, "must be an object, got %s", jsonKind(raw))
	}
	typRaw, ok := obj["type"]
	if !ok {
		return Block{}, errAt(i, field(at, "type"), "missing")
	}
	typ, ok := decodeString(typRaw)
	if !ok {
		return Block{}, errAt(i, field(at, "type"), "must be a string, got %s", jsonKind(typRaw))
	}
	switch typ {
	case "text":
		delete(obj, "type")
		textRaw, ok := take(obj, "text")
		if !ok {
			return Block{}, errAt(i, field(at, "text"), "missing")
		}
		text, ok := decodeString(textRaw)
		if !ok {
			return Block{}, errAt(i, field(at, "text"), "must be a string, got %s", jsonKind(textRaw))
		}
		return Block{Kind: KindText, Text: text, Extra: nilIfEmpty(obj)}, nil
	case "image_url":
		delete(obj, "type")
		return Block{Kind: KindImage, Extra: nilIfEmpty(obj)}, nil
	default:
		return Block{Kind: KindOther, Extra: obj}, nil
	}
}

func parseOpenAIToolCall(raw json.RawMessage, i int, at string, tr *toolTracker) (Block, error) {
	obj, ok := splitObject(raw)
	if !ok {
		return Block{}, errAt(i, at, "must be an object, got %s", jsonKind(raw))
	}
	b := Block{Kind: KindToolUse}
	idRaw, ok := take(obj, "id")
	if !ok {
		return Block{}, errAt(i, field(at, "id"), "missing")
	}
	if b.ToolID, ok = decodeString(idRaw); !ok {
		return Block{}, errAt(i, field(at, "id"), "must be a string, got %s", jsonKind(idRaw))
	}
	if typRaw, ok := obj["type"]; !ok {
		b.Shape = shapeUntyped
	} else if typ, ok := decodeString(typRaw); ok && typ == "function" {
		delete(obj, "type")
	} // any other type value stays in Extra verbatim.

	fnRaw, ok := take(obj, "function")
	if !ok {
		return Block{}, errAt(i, field(at, "function"), "missing")
	}
	fn, ok := splitObject(fnRaw)
	if !ok {
		return Block{}, errAt(i, field(at, "function"), "must be an object, got %s", jsonKind(fnRaw))
	}
	fnAt := field(at, "function")
	nameRaw, ok := take(fn, "name")
	if !ok {
		return Block{}, errAt(i, field(fnAt, "name"), "missing")
	}
	if b.ToolName, ok = decodeString(nameRaw); !ok {
		return Block{}, errAt(i, field(fnAt, "name"), "must be a string, got %s", jsonKind(nameRaw))
	}
	argsRaw, ok := take(fn, "arguments")
	if !ok {
		return Block{}, errAt(i, field(fnAt, "arguments"), "missing")
	}
	if b.Input, ok = decodeString(argsRaw); !ok {
		return Block{}, errAt(i, field(fnAt, "arguments"), "must be a string, got %s", jsonKind(argsRaw))
	}
	if len(fn) > 0 {
		obj["function"] = marshalFields(fn)
	}
	b.Extra = nilIfEmpty(obj)
	if err := tr.use(b.ToolID, b.ToolName, i, field(at, "id")); err != nil {
		return Block{}, err
	}
	return b, nil
}

func parseOpenAITool(obj map[string]json.RawMessage, i int, m Message, tr *toolTracker) (Message, error) {
	b := Block{Kind: KindToolResult}
	idRaw, ok := take(obj, "tool_call_id")
	if !ok {
		return Message{}, errAt(i, "tool_call_id", "missing")
	}
	if b.ToolID, ok = decodeString(idRaw); !ok {
		return Message{}, errAt(i, "tool_call_id", "must be a string, got %s", jsonKind(idRaw))
	}
	raw, ok := take(obj, "content")
	if !ok {
		return Message{}, errAt(i, "content", "missing")
	}
	switch jsonKind(raw) {
	case jsonString:
		b.Text, _ = decodeString(raw)
	case jsonArray:
		parts, _ := splitArray(raw)
		texts := make([]string, 0, len(parts))
		for k, p := range parts {
			pb, err := parseOpenAIPart(p, i, indexed("content", k))
			if err != nil {
				return Message{}, err
			}
			if pb.Kind == KindText {
				texts = append(texts, pb.Text)
			}
		}
		b.Text = strings.Join(texts, "\n")
		b.Shape = shapeList
		b.Extra = map[string]json.RawMessage{"content": raw}
	case jsonNull:
		return Message{}, errAt(i, "content", "must not be null")
	default:
		return Message{}, errAt(i, "content", "must be a string or an array of parts, got %s", jsonKind(raw))
	}
	name, err := tr.result(b.ToolID, i, "tool_call_id")
	if err != nil {
		return Message{}, err
	}
	b.ToolName = name
	if nameRaw, ok := obj["name"]; ok {
		if s, ok := decodeString(nameRaw); ok {
			delete(obj, "name")
			b.ToolName = s
			m.Shape = addShape(m.Shape, shapeNamed)
		}
	}
	m.Blocks = []Block{b}
	m.Extra = nilIfEmpty(obj)
	return m, nil
}

// renderOpenAI writes the conversation in OpenAI Chat Completions form.
func renderOpenAI(c Conversation) ([]byte, error) {
	w := newWriter(sizeHint(c))
	var top *object
	if !hasShape(c.Shape, shapeArray) {
		top = w.object()
		top.key("messages")
	}
	w.buf.WriteByte('[')
	for i, m := range c.Messages {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := renderOpenAIMessage(w, i, m); err != nil {
			return nil, err
		}
	}
	w.buf.WriteByte(']')
	if top != nil {
		if err := top.extra(c.Extra); err != nil {
			return nil, err
		}
		top.end()
	} else if len(c.Extra) > 0 {
		return nil, errAt(-1, "", "a bare message array cannot hold top-level fields (%d in Extra)", len(c.Extra))
	}
	return w.bytes(), nil
}

func renderOpenAIMessage(w *writer, i int, m Message) error {
	if err := checkMessageStrings(i, m); err != nil {
		return err
	}
	o := w.object()
	o.key("role")
	switch m.Role {
	case RoleSystem:
		if hasShape(m.Shape, shapeDeveloper) {
			w.str("developer")
		} else {
			w.str("system")
		}
	case RoleUser, RoleAssistant:
		w.str(string(m.Role))
	case RoleTool:
		w.str("tool")
		return renderOpenAITool(w, o, i, m)
	default:
		return errAt(i, "role", "unknown role %q", m.Role)
	}

	var content, calls []Block
	for j, b := range m.Blocks {
		switch b.Kind {
		case KindText, KindImage, KindOther:
			content = append(content, b)
		case KindToolUse:
			if m.Role != RoleAssistant {
				return errAt(i, indexed("blocks", j), "a %s message cannot carry tool calls in openai format", m.Role)
			}
			calls = append(calls, b)
		default:
			return errAt(i, indexed("blocks", j), "a %s block cannot be rendered in an openai %s message", b.Kind, m.Role)
		}
	}
	switch {
	case hasShape(m.Shape, shapeList):
		o.key("content")
		if err := renderOpenAIParts(w, i, content); err != nil {
			return err
		}
	case len(content) == 0 && hasShape(m.Shape, shapeAbsent):
	case len(content) == 0 && hasShape(m.Shape, shapeNull):
		o.key("content")
		w.buf.WriteString("null")
	case len(content) == 0:
		o.key("content")
		w.str("")
	case len(content) == 1 && content[0].Kind == KindText && len(content[0].Extra) == 0:
		o.key("content")
		w.str(content[0].Text)
	default:
		o.key("content")
		if err := renderOpenAIParts(w, i, content); err != nil {
			return err
		}
	}
	if len(calls) > 0 {
		o.key("tool_calls")
		w.buf.WriteByte('[')
		for k, b := range calls {
			if k > 0 {
				w.buf.WriteByte(',')
			}
			if err := renderOpenAIToolCall(w, b); err != nil {
				return relocate(err, i, indexed("tool_calls", k))
			}
		}
		w.buf.WriteByte(']')
	}
	if err := o.extra(m.Extra); err != nil {
		return relocate(err, i, "")
	}
	o.end()
	return nil
}

func renderOpenAIParts(w *writer, i int, parts []Block) error {
	w.buf.WriteByte('[')
	for k, b := range parts {
		if k > 0 {
			w.buf.WriteByte(',')
		}
		o := w.object()
		switch b.Kind {
		case KindText:
			o.key("type")
			w.str("text")
			o.key("text")
			w.str(b.Text)
		case KindImage:
			o.key("type")
			w.str("image_url")
		}
		if err := o.extra(b.Extra); err != nil {
			return relocate(err, i, indexed("content", k))
		}
		o.end()
	}
	w.buf.WriteByte(']')
	return nil
}

func renderOpenAIToolCall(w *writer, b Block) error {
	o := w.object()
	o.key("id")
	w.str(b.ToolID)
	if _, typed := b.Extra["type"]; !typed && !hasShape(b.Shape, shapeUntyped) {
		o.key("type")
		w.str("function")
	}
	o.key("function")
	fn := w.object()
	fn.key("name")
	w.str(b.ToolName)
	fn.key("arguments")
	w.str(b.Input)
	if raw, ok := b.Extra["function"]; ok {
		extra, ok := decodeObject(raw)
		if !ok {
			return errAt(-1, "function", "extra fields must be a JSON object")
		}
		if err := fn.extra(extra); err != nil {
			return relocate(err, -1, "function")
		}
	}
	fn.end()
	if err := o.extra(b.Extra); err != nil {
		return err
	}
	o.end()
	return nil
}

func renderOpenAITool(w *writer, o *object, i int, m Message) error {
	if len(m.Blocks) != 1 || m.Blocks[0].Kind != KindToolResult {
		return errAt(i, "blocks", "a tool message must hold exactly one tool_result block in openai format")
	}
	b := m.Blocks[0]
	o.key("tool_call_id")
	w.str(b.ToolID)
	if hasShape(m.Shape, shapeNamed) {
		o.key("name")
		w.str(b.ToolName)
	}
	o.key("content")
	if err := renderResultContent(w, b, "text"); err != nil {
		return relocate(err, i, "content")
	}
	if err := o.extra(m.Extra); err != nil {
		return relocate(err, i, "")
	}
	o.end()
	return nil
}

// renderResultContent writes the content of a tool result whose Shape is ""
// or "list": the original list while Text still matches it, else Text (as a
// one-part list when the source used a list).
func renderResultContent(w *writer, b Block, textType string) error {
	if !hasShape(b.Shape, shapeList) {
		w.str(b.Text)
		return nil
	}
	if raw, ok := b.Extra["content"]; ok {
		if text, ok := joinListText(raw); ok && text == b.Text {
			return w.raw(raw)
		}
	}
	w.buf.WriteByte('[')
	o := w.object()
	o.key("type")
	w.str(textType)
	o.key("text")
	w.str(b.Text)
	o.end()
	w.buf.WriteByte(']')
	return nil
}

// joinListText joins the text of the {"type":"text","text":...} items of a
// raw content list with "\n", as the parsers build Block.Text.
func joinListText(raw json.RawMessage) (string, bool) {
	items, ok := decodeArray(raw)
	if !ok {
		return "", false
	}
	texts := make([]string, 0, len(items))
	for _, it := range items {
		var part struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(it, &part) != nil {
			continue
		}
		if part.Type == "text" {
			texts = append(texts, part.Text)
		}
	}
	return strings.Join(texts, "\n"), true
}

// checkMessageStrings rejects text fields holding invalid UTF-8 before they
// reach the encoder, which would silently replace the bad bytes. Byte-level
// truncation by a strategy is the usual way to get there.
func checkMessageStrings(i int, m Message) error {
	for j, b := range m.Blocks {
		for _, f := range [...]struct{ name, value string }{
			{"text", b.Text}, {"tool_id", b.ToolID}, {"tool_name", b.ToolName}, {"input", b.Input},
		} {
			if !utf8.ValidString(f.value) {
				return errAt(i, field(indexed("blocks", j), f.name), "invalid UTF-8")
			}
		}
	}
	return nil
}

// sizeHint estimates the output size so that the buffer grows once.
func sizeHint(c Conversation) int {
	n := 64
	for _, m := range c.Messages {
		n += 64
		for _, b := range m.Blocks {
			n += len(b.Text) + len(b.Input) + len(b.ToolID) + len(b.ToolName) + 64
		}
	}
	return n + n/16
}
