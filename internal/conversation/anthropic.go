package conversation

import (
	"encoding/json"
	"strings"
)

// Anthropic Messages.
//
// Mapping: the top-level system field (string or list of text blocks)
// becomes a leading RoleSystem message with Shape "system-field" (plus
// "list" for a list) and renders back to the field. Message content is a
// string (one KindText block, none for "") or a list of blocks (Shape
// "list"): text → KindText; tool_use → KindToolUse with Input the raw JSON
// of input; tool_result → KindToolResult (content string → Text; a list →
// Text joined from its text items, the list in Extra["content"]; is_error
// true → IsError, false or null kept in Extra); thinking → KindThinking
// (signature in Extra); redacted_thinking → KindThinking with Shape
// "redacted"; image → KindImage (the block minus "type" in Extra); anything
// else → KindOther (the whole block in Extra). User messages holding
// tool_result blocks stay RoleUser. Consecutive user (or assistant)
// messages render as one message (see MergeSameRole), since the API wants
// the roles to alternate.

func parseAnthropic(data []byte, pre decoded) (Conversation, error) {
	c := Conversation{Format: FormatAnthropic}
	msgs, top, err := messageList(data, pre, &c)
	if err != nil {
		return Conversation{}, err
	}
	var system *Message
	if raw, ok := top["system"]; ok && jsonKind(raw) != jsonNull {
		delete(top, "system")
		m, err := parseAnthropicSystem(raw)
		if err != nil {
			return Conversation{}, err
		}
		system = &m
	}
	c.Extra = nilIfEmpty(top)
	c.Messages = make([]Message, 0, len(msgs)+1)
	if system != nil {
		c.Messages = append(c.Messages, *system)
	}
	tr := newToolTracker()
	for i, obj := range msgs {
		m, err := parseAnthropicMessage(obj, i, i == len(msgs)-1, tr)
		if err != nil {
			return Conversation{}, err
		}
		c.Messages = append(c.Messages, m)
	}
	return c, nil
}

func parseAnthropicSystem(raw json.RawMessage) (Message, error) {
	m := Message{Role: RoleSystem, Shape: shapeSystemField}
	switch jsonKind(raw) {
	case jsonString:
		if s, _ := decodeString(raw); s != "" {
			m.Blocks = []Block{{Kind: KindText, Text: s}}
		}
	case jsonArray:
		m.Shape = addShape(m.Shape, shapeList)
		items, _ := splitArray(raw)
		for k, it := range items {
			at := indexed("system", k)
			b, err := parseAnthropicBlock(it, -1, at, nil)
			if err != nil {
				return Message{}, err
			}
			if b.Kind != KindText {
				return Message{}, errAt(-1, field(at, "type"), "system blocks must be text blocks")
			}
			m.Blocks = append(m.Blocks, b)
		}
	default:
		return Message{}, errAt(-1, "system", "must be a string or an array of text blocks, got %s", jsonKind(raw))
	}
	return m, nil
}

func parseAnthropicMessage(obj map[string]json.RawMessage, i int, last bool, tr *toolTracker) (Message, error) {
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
	case "user":
		m.Role = RoleUser
	case "assistant":
		m.Role = RoleAssistant
	case "system":
		// A system message among the turns (the API's mid-conversation
		// system messages, which Claude Code sends): kept where it is.
		m.Role = RoleSystem
		m.Shape = shapeInMessages
	default:
		return Message{}, errAt(i, "role", "unknown role %q (want user, assistant or system)", role)
	}
	content, ok := take(obj, "content")
	if !ok {
		return Message{}, errAt(i, "content", "missing")
	}
	switch jsonKind(content) {
	case jsonString:
		if s, _ := decodeString(content); s != "" {
			m.Blocks = []Block{{Kind: KindText, Text: s}}
		}
	case jsonArray:
		m.Shape = addShape(m.Shape, shapeList)
		items, _ := splitArray(content)
		m.Blocks = make([]Block, 0, len(items))
		for k, it := range items {
			b, err := parseAnthropicBlock(it, i, indexed("content", k), tr)
			if err != nil {
				return Message{}, err
			}
			m.Blocks = append(m.Blocks, b)
		}
	case jsonNull:
		return Message{}, errAt(i, "content", "must not be null")
	default:
		return Message{}, errAt(i, "content", "must be a string or an array of blocks, got %s", jsonKind(content))
	}
	// The API accepts an empty final assistant message (a prefill to be
	// continued); anything else empty says nothing.
	if len(m.Blocks) == 0 && !(m.Role == RoleAssistant && last) {
		return Message{}, errAt(i, "content", "must not be empty")
	}
	m.Extra = nilIfEmpty(obj)
	return m, nil
}

// parseAnthropicBlock decodes one content block. tr is nil for system
// blocks, which cannot be tool blocks.
func parseAnthropicBlock(raw json.RawMessage, i int, at string, tr *toolTracker) (Block, error) {
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
	str := func(key string) (string, error) {
		raw, ok := take(obj, key)
		if !ok {
			return "", errAt(i, field(at, key), "missing")
		}
		s, ok := decodeString(raw)
		if !ok {
			return "", errAt(i, field(at, key), "must be a string, got %s", jsonKind(raw))
		}
		return s, nil
	}
	if tr == nil && typ != "text" {
		return Block{Kind: KindOther}, nil // caller rejects non-text system blocks
	}
	var b Block
	var err error
	switch typ {
	case "text":
		delete(obj, "type")
		b.Kind = KindText
		if b.Text, err = str("text"); err != nil {
			return Block{}, err
		}
	case "tool_use":
		delete(obj, "type")
		b.Kind = KindToolUse
		if b.ToolID, err = str("id"); err != nil {
			return Block{}, err
		}
		if b.ToolName, err = str("name"); err != nil {
			return Block{}, err
		}
		input, ok := take(obj, "input")
		if !ok {
			return Block{}, errAt(i, field(at, "input"), "missing")
		}
		b.Input = string(input)
		if err := tr.use(b.ToolID, b.ToolName, i, field(at, "id")); err != nil {
			return Block{}, err
		}
	case "tool_result":
		delete(obj, "type")
		if b, err = parseAnthropicResult(obj, i, at, tr); err != nil {
			return Block{}, err
		}
	case "thinking":
		delete(obj, "type")
		b.Kind = KindThinking
		if b.Text, err = str("thinking"); err != nil {
			return Block{}, err
		}
	case "redacted_thinking":
		delete(obj, "type")
		b.Kind = KindThinking
		b.Shape = shapeRedacted
	case "image":
		delete(obj, "type")
		b.Kind = KindImage
	default:
		b.Kind = KindOther
	}
	b.Extra = nilIfEmpty(obj)
	return b, nil
}

func parseAnthropicResult(obj map[string]json.RawMessage, i int, at string, tr *toolTracker) (Block, error) {
	b := Block{Kind: KindToolResult}
	idRaw, ok := take(obj, "tool_use_id")
	if !ok {
		return Block{}, errAt(i, field(at, "tool_use_id"), "missing")
	}
	if b.ToolID, ok = decodeString(idRaw); !ok {
		return Block{}, errAt(i, field(at, "tool_use_id"), "must be a string, got %s", jsonKind(idRaw))
	}
	contentAt := field(at, "content")
	content, ok := take(obj, "content")
	switch {
	case !ok:
		b.Shape = shapeAbsent
	case jsonKind(content) == jsonNull:
		b.Shape = shapeNull
	case jsonKind(content) == jsonString:
		b.Text, _ = decodeString(content)
	case jsonKind(content) == jsonArray:
		items, _ := splitArray(content)
		texts := make([]string, 0, len(items))
		for k, it := range items {
			itemAt := indexed(contentAt, k)
			item, ok := splitObject(it)
			if !ok {
				return Block{}, errAt(i, itemAt, "must be an object, got %s", jsonKind(it))
			}
			typRaw, ok := item["type"]
			if !ok {
				return Block{}, errAt(i, field(itemAt, "type"), "missing")
			}
			typ, ok := decodeString(typRaw)
			if !ok {
				return Block{}, errAt(i, field(itemAt, "type"), "must be a string, got %s", jsonKind(typRaw))
			}
			if typ != "text" {
				continue
			}
			textRaw, ok := item["text"]
			if !ok {
				return Block{}, errAt(i, field(itemAt, "text"), "missing")
			}
			text, ok := decodeString(textRaw)
			if !ok {
				return Block{}, errAt(i, field(itemAt, "text"), "must be a string, got %s", jsonKind(textRaw))
			}
			texts = append(texts, text)
		}
		b.Text = strings.Join(texts, "\n")
		b.Shape = shapeList
		obj["content"] = content
	default:
		return Block{}, errAt(i, contentAt, "must be a string, an array of blocks or null, got %s", jsonKind(content))
	}
	if raw, ok := obj["is_error"]; ok {
		switch jsonKind(raw) {
		case jsonBoolean:
			if string(raw) == "true" {
				b.IsError = true
				delete(obj, "is_error")
			} // false stays in Extra verbatim: it carries nothing.
		case jsonNull:
		default:
			return Block{}, errAt(i, field(at, "is_error"), "must be a boolean, got %s", jsonKind(raw))
		}
	}
	name, err := tr.result(b.ToolID, i, field(at, "tool_use_id"))
	if err != nil {
		return Block{}, err
	}
	b.ToolName = name
	return b, nil
}

// renderAnthropic writes the conversation in Anthropic Messages form.
func renderAnthropic(c Conversation) ([]byte, error) {
	w := newWriter(sizeHint(c))
	msgs := c.Messages
	var top *object
	if hasShape(c.Shape, shapeArray) {
		if len(c.Extra) > 0 {
			return nil, errAt(-1, "", "a bare message array cannot hold top-level fields (%d in Extra)", len(c.Extra))
		}
	} else {
		top = w.object()
		if systemField(msgs) {
			top.key("system")
			if err := renderAnthropicSystem(w, msgs[0]); err != nil {
				return nil, err
			}
		}
		top.key("messages")
	}
	w.buf.WriteByte('[')
	start := 0
	if top != nil && systemField(msgs) {
		start = 1 // written above as the system field
	}
	for i := start; i < len(msgs); {
		if i > start {
			w.buf.WriteByte(',')
		}
		end := anthropicTurnEnd(msgs, i)
		var err error
		if end-i == 1 {
			// The common case, and the only one of a conversation that
			// already alternates: written exactly as parsed.
			err = renderAnthropicMessage(w, i, msgs[i])
		} else {
			err = renderAnthropicMerged(w, i, msgs[i:end])
		}
		if err != nil {
			return nil, err
		}
		i = end
	}
	w.buf.WriteByte(']')
	if top != nil {
		if err := top.extra(c.Extra); err != nil {
			return nil, err
		}
		top.end()
	}
	return w.bytes(), nil
}

// systemField reports whether msgs start with the system prompt, which
// the Messages API holds in its top-level system field; a system message
// that came from among the turns stays there.
func systemField(msgs []Message) bool {
	return len(msgs) > 0 && msgs[0].Role == RoleSystem && !hasShape(msgs[0].Shape, shapeInMessages)
}

func renderAnthropicSystem(w *writer, m Message) error {
	if err := checkMessageStrings(0, m); err != nil {
		return err
	}
	for j, b := range m.Blocks {
		if b.Kind != KindText {
			return errAt(0, indexed("blocks", j), "the anthropic system field holds text blocks only, not %s", b.Kind)
		}
	}
	if !hasShape(m.Shape, shapeList) {
		switch {
		case len(m.Blocks) == 0:
			w.str("")
			return nil
		case len(m.Blocks) == 1 && len(m.Blocks[0].Extra) == 0:
			w.str(m.Blocks[0].Text)
			return nil
		}
	}
	return renderAnthropicBlocks(w, 0, m.Blocks)
}

func renderAnthropicMessage(w *writer, i int, m Message) error {
	if err := checkMessageStrings(i, m); err != nil {
		return err
	}
	o := w.object()
	o.key("role")
	switch m.Role {
	case RoleUser, RoleAssistant:
		w.str(string(m.Role))
	case RoleSystem:
		if !hasShape(m.Shape, shapeInMessages) {
			return errAt(i, "role", "anthropic format has system only as the first message (the top-level system field) or as a system message that came from among the turns")
		}
		w.str(string(m.Role))
	default:
		return errAt(i, "role", "role %q cannot be rendered in anthropic format", m.Role)
	}
	o.key("content")
	simple := !hasShape(m.Shape, shapeList)
	switch {
	case simple && len(m.Blocks) == 0:
		w.str("")
	case simple && len(m.Blocks) == 1 && m.Blocks[0].Kind == KindText && len(m.Blocks[0].Extra) == 0:
		w.str(m.Blocks[0].Text)
	default:
		if err := renderAnthropicBlocks(w, i, m.Blocks); err != nil {
			return err
		}
	}
	if err := o.extra(m.Extra); err != nil {
		return relocate(err, i, "")
	}
	o.end()
	return nil
}

// Same-role neighbours.
//
// The canonical model allows consecutive messages of the same role (a
// compaction's summary next to a kept user message), but the Messages API
// wants user and assistant turns to alternate. So the renderer writes a
// run of user (or assistant) messages as one message whose content is
// their blocks, concatenated in order: never reordered, so that every
// tool_use still comes before its tool_result, and a user message holding
// tool results followed by user text keeps the results first, as the API
// requires. The message fields the model does not name are merged too,
// the first message's value winning. A conversation that already
// alternates renders exactly as before, message by message.

// anthropicTurnEnd returns the end of the run of same-role messages that
// starts at msgs[i]: the index of the first message of another role, or
// len(msgs). Only user and assistant messages merge; any other role is a
// run of one, for renderAnthropicMessage to reject.
func anthropicTurnEnd(msgs []Message, i int) int {
	end := i + 1
	if msgs[i].Role != RoleUser && msgs[i].Role != RoleAssistant {
		return end
	}
	for end < len(msgs) && msgs[end].Role == msgs[i].Role {
		end++
	}
	return end
}

// renderAnthropicMerged writes the run msgs (Messages[first:first+len])
// as one message. Errors name the canonical message and block, as every
// Render error does.
func renderAnthropicMerged(w *writer, first int, msgs []Message) error {
	for k, m := range msgs {
		if err := checkMessageStrings(first+k, m); err != nil {
			return err
		}
	}
	o := w.object()
	o.key("role")
	w.str(string(msgs[0].Role))
	o.key("content")
	w.buf.WriteByte('[')
	n := 0
	for k, m := range msgs {
		for j, b := range m.Blocks {
			if n > 0 {
				w.buf.WriteByte(',')
			}
			n++
			if err := renderAnthropicBlock(w, first+k, j, b); err != nil {
				return err
			}
		}
	}
	w.buf.WriteByte(']')
	// One call, so that the fields come out in sorted key order as for
	// any other message.
	extra, from := mergeMessageExtra(msgs)
	if err := o.extra(extra); err != nil {
		// Name the message the bad field came from; a bad field name
		// (Field empty) is blamed on the first of the run.
		k := 0
		if e, ok := err.(*Error); ok {
			k = from[e.Field]
		}
		return relocate(err, first+k, "")
	}
	o.end()
	return nil
}

// mergeMessageExtra is the union of the messages' Extra fields, the first
// message's value of a key winning; from says which message each key was
// taken from. It is nil when no message has any.
func mergeMessageExtra(msgs []Message) (extra map[string]json.RawMessage, from map[string]int) {
	for k, m := range msgs {
		for key, v := range m.Extra {
			if _, ok := extra[key]; ok {
				continue
			}
			if extra == nil {
				extra, from = map[string]json.RawMessage{}, map[string]int{}
			}
			extra[key], from[key] = v, k
		}
	}
	return extra, from
}

// MergeSameRole returns c as Render writes it and Parse reads it back: for
// an Anthropic conversation, each run of consecutive user (or assistant)
// messages becomes one message holding their blocks in order, with Shape
// "list" and the union of their Extra fields (the first message's value
// winning). A conversation that already alternates, and one of another
// format (OpenAI and ReAct keep same-role neighbours as they are), is
// returned as it is. A merged message gets its own Blocks slice and Extra
// map; everything else shares memory with c, as a copy of the struct does.
//
// Use it where message indices must match the rendered document, for
// example to keep a conversation alongside the bytes Render made of it.
func (c Conversation) MergeSameRole() Conversation {
	if c.Format != FormatAnthropic || !c.needsMerge() {
		return c
	}
	out := c
	out.Messages = make([]Message, 0, len(c.Messages))
	for i := 0; i < len(c.Messages); {
		end := anthropicTurnEnd(c.Messages, i)
		if end-i == 1 {
			out.Messages = append(out.Messages, c.Messages[i])
			i = end
			continue
		}
		merged := Message{Role: c.Messages[i].Role, Shape: shapeList}
		for _, m := range c.Messages[i:end] {
			merged.Blocks = append(merged.Blocks, m.Blocks...)
		}
		merged.Extra, _ = mergeMessageExtra(c.Messages[i:end])
		out.Messages = append(out.Messages, merged)
		i = end
	}
	return out
}

// needsMerge reports whether two neighbouring messages of an Anthropic
// conversation have the same user or assistant role.
func (c Conversation) needsMerge() bool {
	for i := 0; i < len(c.Messages); {
		end := anthropicTurnEnd(c.Messages, i)
		if end-i > 1 {
			return true
		}
		i = end
	}
	return false
}

func renderAnthropicBlocks(w *writer, i int, blocks []Block) error {
	w.buf.WriteByte('[')
	for j, b := range blocks {
		if j > 0 {
			w.buf.WriteByte(',')
		}
		if err := renderAnthropicBlock(w, i, j, b); err != nil {
			return err
		}
	}
	w.buf.WriteByte(']')
	return nil
}

func renderAnthropicBlock(w *writer, i, j int, b Block) error {
	at := indexed("blocks", j)
	o := w.object()
	var reserved []string
	switch b.Kind {
	case KindText:
		o.key("type")
		w.str("text")
		o.key("text")
		w.str(b.Text)
	case KindToolUse:
		o.key("type")
		w.str("tool_use")
		o.key("id")
		w.str(b.ToolID)
		o.key("name")
		w.str(b.ToolName)
		o.key("input")
		if err := w.raw([]byte(b.Input)); err != nil {
			return errAt(i, field(at, "input"), "%s", err.Error())
		}
	case KindToolResult:
		reserved = []string{"content"}
		o.key("type")
		w.str("tool_result")
		o.key("tool_use_id")
		w.str(b.ToolID)
		switch {
		case hasShape(b.Shape, shapeAbsent) && b.Text == "":
		case hasShape(b.Shape, shapeNull) && b.Text == "":
			o.key("content")
			w.buf.WriteString("null")
		default:
			o.key("content")
			if err := renderResultContent(w, b, "text"); err != nil {
				return errAt(i, field(at, "content"), "%s", err.Error())
			}
		}
		if b.IsError {
			o.key("is_error")
			w.buf.WriteString("true")
		}
	case KindThinking:
		if hasShape(b.Shape, shapeRedacted) {
			o.key("type")
			w.str("redacted_thinking")
			break
		}
		o.key("type")
		w.str("thinking")
		o.key("thinking")
		w.str(b.Text)
	case KindImage:
		o.key("type")
		w.str("image")
	case KindOther:
	default:
		return errAt(i, at, "unknown block kind %q", b.Kind)
	}
	if err := o.extra(b.Extra, reserved...); err != nil {
		return relocate(err, i, at)
	}
	o.end()
	return nil
}
