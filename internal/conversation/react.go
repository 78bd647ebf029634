package conversation

import (
	"encoding/json"
	"errors"
	"strconv"
)

// ReAct trajectory of the ReAct two-layer design (preset react-two-layer):
//
//	{"metadata": ..., "reasoning_trace": ...,
//	 "execution": {"final_response": ..., "tool_calls": [{"thought", "action", "result"}, ...]},
//	 "context_compression": {"enabled": ..., "stats": {...}}}
//
// or a bare array of turns. Turn t becomes two messages: Messages[2t] is
// RoleAssistant with a KindText block (Shape "thought") holding the thought
// and a KindToolUse block (Input = the JSON text of action, ToolName = the
// action's "tool", "name" or "tool_name" string, ToolID = ReActToolID(t));
// Messages[2t+1] is RoleTool with one KindToolResult block (Text = result
// when it is a string, else its JSON text with Shape "raw"). Unknown turn
// fields are the assistant message's Extra; every other top-level field,
// including execution's fields besides tool_calls (kept as one object in
// Extra["execution"]), round-trips through Conversation.Extra. Errors about
// turns have Index -1 and a Field such as "execution.tool_calls[3].thought".

// ReActToolID is the tool id given to turn t, which the format does not
// carry; it is derived from the position so that parsing is deterministic.
func ReActToolID(turn int) string {
	return "turn-" + strconv.Itoa(turn)
}

func parseReAct(data []byte, pre decoded) (Conversation, error) {
	c := Conversation{Format: FormatReAct}
	var list []byte
	objects := splitObjects
	prefix := ""
	switch jsonKind(data) {
	case jsonArray:
		c.Shape = shapeArray
		list = data
		objects = pre.objects // detection may have decoded the turns
	case jsonObject:
		top := pre.top
		if top == nil {
			top, _ = splitObject(data)
		}
		prefix = "execution.tool_calls"
		if raw, ok := top["execution"]; ok {
			switch jsonKind(raw) {
			case jsonNull:
				// Carries nothing: stays in Extra verbatim.
			case jsonObject:
				exec, _ := splitObject(raw)
				tc, ok := exec["tool_calls"]
				switch {
				case !ok:
					c.Shape = addShape(c.Shape, shapeNoToolCalls)
				case jsonKind(tc) == jsonNull:
					c.Shape = addShape(c.Shape, shapeNoToolCalls)
				case jsonKind(tc) == jsonArray:
					list = tc
					delete(exec, "tool_calls")
				default:
					return Conversation{}, errAt(-1, prefix, "must be an array of turns, got %s", jsonKind(tc))
				}
				top["execution"] = marshalFields(exec)
			default:
				return Conversation{}, errAt(-1, "execution", "must be an object, got %s", jsonKind(raw))
			}
		}
		c.Extra = nilIfEmpty(top)
	default:
		return Conversation{}, errAt(-1, "", "top level must be a JSON object with execution.tool_calls or an array of turns, got %s", jsonKind(data))
	}
	var turns []map[string]json.RawMessage
	if list != nil {
		var bad int
		var kind string
		turns, bad, kind = objects(list)
		if bad >= 0 {
			return Conversation{}, errAt(-1, indexed(prefix, bad), "must be an object, got %s", kind)
		}
	}
	c.Messages = make([]Message, 0, 2*len(turns))
	for t, obj := range turns {
		use, result, err := parseReActTurn(obj, t, indexed(prefix, t))
		if err != nil {
			return Conversation{}, err
		}
		c.Messages = append(c.Messages, use, result)
	}
	return c, nil
}

func parseReActTurn(obj map[string]json.RawMessage, t int, at string) (Message, Message, error) {
	id := ReActToolID(t)
	use := Message{Role: RoleAssistant}
	if raw, ok := obj["thought"]; ok {
		switch jsonKind(raw) {
		case jsonString:
			delete(obj, "thought")
			s, _ := decodeString(raw)
			use.Blocks = append(use.Blocks, Block{Kind: KindText, Text: s, Shape: ShapeThought})
		case jsonNull:
			// Carries nothing: stays in Extra verbatim.
		default:
			return Message{}, Message{}, errAt(-1, field(at, "thought"), "must be a string, got %s", jsonKind(raw))
		}
	}
	call := Block{Kind: KindToolUse, ToolID: id}
	if raw, ok := take(obj, "action"); ok {
		call.Input = string(raw)
		call.ToolName = actionToolName(raw)
	} else {
		call.Shape = shapeAbsent
	}
	use.Blocks = append(use.Blocks, call)

	res := Block{Kind: KindToolResult, ToolID: id, ToolName: call.ToolName}
	if raw, ok := take(obj, "result"); ok {
		if s, ok := decodeString(raw); ok {
			res.Text = s
		} else {
			res.Text = string(raw)
			res.Shape = shapeRaw
		}
	} else {
		res.Shape = shapeAbsent
	}
	use.Extra = nilIfEmpty(obj)
	return use, Message{Role: RoleTool, Blocks: []Block{res}}, nil
}

// actionToolName finds the tool name in an action object, trying the field
// names agents use.
func actionToolName(raw json.RawMessage) string {
	obj, ok := splitObject(raw)
	if !ok {
		return ""
	}
	for _, k := range [...]string{"tool", "name", "tool_name"} {
		if s, ok := decodeString(obj[k]); ok {
			return s
		}
	}
	return ""
}

// renderReAct writes the conversation as a ReAct two-layer trajectory.
func renderReAct(c Conversation) ([]byte, error) {
	w := newWriter(sizeHint(c))
	if hasShape(c.Shape, shapeArray) {
		if len(c.Extra) > 0 {
			return nil, errAt(-1, "", "a bare turn array cannot hold top-level fields (%d in Extra)", len(c.Extra))
		}
		if err := renderReActTurns(w, c.Messages); err != nil {
			return nil, err
		}
		return w.bytes(), nil
	}
	top := w.object()
	execRaw, hasExec := c.Extra["execution"]
	exec, execIsObject := decodeObject(execRaw)
	writeCalls := len(c.Messages) > 0 || (execIsObject && !hasShape(c.Shape, shapeNoToolCalls))
	if writeCalls {
		top.key("execution")
		o := w.object()
		o.key("tool_calls")
		if err := renderReActTurns(w, c.Messages); err != nil {
			return nil, err
		}
		if err := o.extra(exec); err != nil {
			return nil, relocate(err, -1, "execution")
		}
		o.end()
	} else if hasExec && !execIsObject && jsonKind(execRaw) != jsonNull {
		return nil, errAt(-1, "execution", "extra value must be an object or null")
	}
	if err := top.extra(c.Extra); err != nil {
		return nil, err
	}
	top.end()
	return w.bytes(), nil
}

func renderReActTurns(w *writer, msgs []Message) error {
	w.buf.WriteByte('[')
	for i, t := 0, 0; i < len(msgs); t++ {
		if t > 0 {
			w.buf.WriteByte(',')
		}
		n, err := renderReActTurn(w, msgs, i)
		if err != nil {
			return err
		}
		i += n
	}
	w.buf.WriteByte(']')
	return nil
}

// renderReActTurn writes the turn starting at msgs[i] and returns how many
// messages it used (1 without a result message, else 2).
func renderReActTurn(w *writer, msgs []Message, i int) (int, error) {
	m := msgs[i]
	if m.Role != RoleAssistant {
		return 0, errAt(i, "role", "a react turn starts with an assistant message, not %s", m.Role)
	}
	if err := checkMessageStrings(i, m); err != nil {
		return 0, err
	}
	var thought, call *Block
	callAt := 0
	for j := range m.Blocks {
		b := &m.Blocks[j]
		switch {
		case b.Kind == KindText && thought == nil:
			thought = b
		case b.Kind == KindToolUse && call == nil:
			call = b
			callAt = j
		default:
			return 0, errAt(i, indexed("blocks", j), "a react turn holds one thought and one action, not this %s block", b.Kind)
		}
	}
	used := 1
	var result *Message
	if i+1 < len(msgs) && msgs[i+1].Role == RoleTool {
		result = &msgs[i+1]
		used = 2
		if err := checkMessageStrings(i+1, *result); err != nil {
			return 0, err
		}
		if len(result.Blocks) != 1 || result.Blocks[0].Kind != KindToolResult {
			return 0, errAt(i+1, "blocks", "a react result message holds exactly one tool_result block")
		}
		if call == nil || result.Blocks[0].ToolID != call.ToolID {
			return 0, errAt(i+1, "blocks[0]", "tool result %q does not answer the action of message %d", result.Blocks[0].ToolID, i)
		}
	}

	o := w.object()
	if thought != nil {
		o.key("thought")
		w.str(thought.Text)
	}
	if call != nil && !(hasShape(call.Shape, shapeAbsent) && call.Input == "") {
		o.key("action")
		if err := w.raw([]byte(call.Input)); err != nil {
			return 0, errAt(i, field(indexed("blocks", callAt), "input"), "action %s", err.Error())
		}
	}
	if result != nil {
		b := result.Blocks[0]
		switch {
		case hasShape(b.Shape, shapeAbsent) && b.Text == "":
		case hasShape(b.Shape, shapeRaw) && json.Valid([]byte(b.Text)):
			o.key("result")
			if err := w.raw([]byte(b.Text)); err != nil {
				return 0, errAt(i+1, "blocks[0].text", "%s", err.Error())
			}
		default:
			o.key("result")
			w.str(b.Text)
		}
	}
	if err := o.extra(m.Extra); err != nil {
		return 0, relocate(err, i, "")
	}
	if result != nil {
		if err := o.extra(result.Extra); err != nil {
			return 0, relocate(err, i+1, "")
		}
	}
	o.end()
	return used, nil
}

// ReActStats is the context_compression.stats object of a ReAct
// trajectory. Sizes are in the design's unit (characters).
type ReActStats struct {
	TotalSize            int     `json:"total_size"`
	ModelLimit           int     `json:"model_limit"`
	UsagePercent         float64 `json:"usage_percent"`
	TurnsCount           int     `json:"turns_count"`
	CompressionThreshold int     `json:"compression_threshold"`
	NeedsCompression     bool    `json:"needs_compression"`
}

// HasStatsPlace reports whether a conversation can carry the ReAct two-layer
// design's context_compression stats: a ReAct trajectory object can, a bare array
// of turns (the design's List[Dict]) cannot.
func HasStatsPlace(c Conversation) bool {
	return c.Format == FormatReAct && !hasShape(c.Shape, shapeArray)
}

// SetReActStats writes context_compression {enabled: true, stats} into a
// ReAct conversation, as the design's compressing agent does. Other fields of
// context_compression and of stats are kept. c.Extra is replaced by a copy,
// so a conversation sharing the map is not changed.
func SetReActStats(c *Conversation, stats ReActStats) error {
	if c.Format != FormatReAct {
		return errors.New("set react stats: conversation format is " + string(c.Format) + ", not react")
	}
	if hasShape(c.Shape, shapeArray) {
		return errors.New("set react stats: a bare turn array has no place for context_compression")
	}
	cc, ok := decodeObject(c.Extra["context_compression"])
	if !ok {
		cc = map[string]json.RawMessage{}
	}
	st, ok := decodeObject(cc["stats"])
	if !ok {
		st = map[string]json.RawMessage{}
	}
	fields := map[string]any{
		"total_size":            stats.TotalSize,
		"model_limit":           stats.ModelLimit,
		"usage_percent":         stats.UsagePercent,
		"turns_count":           stats.TurnsCount,
		"compression_threshold": stats.CompressionThreshold,
		"needs_compression":     stats.NeedsCompression,
	}
	for k, v := range fields {
		raw, err := json.Marshal(v)
		if err != nil {
			return errors.New("set react stats: " + k + ": " + err.Error())
		}
		st[k] = raw
	}
	cc["stats"] = marshalFields(st)
	cc["enabled"] = json.RawMessage("true")
	extra := cloneExtra(c.Extra)
	if extra == nil {
		extra = map[string]json.RawMessage{}
	}
	extra["context_compression"] = marshalFields(cc)
	c.Extra = extra
	return nil
}
