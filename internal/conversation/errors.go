package conversation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error reports bad input at a precise place. Parse errors index the
// source's own message list (for Anthropic, messages[i] of the file, not
// counting the top-level system field); Render errors index
// Conversation.Messages.
type Error struct {
	// Index is the message index, or -1 when the problem is outside the
	// message list (top level, Anthropic system field, ReAct turns, whose
	// Field then names the whole path).
	Index int
	// Field is the path inside the message (or from the top level when
	// Index is -1), for example "tool_calls[0].function.arguments". Empty
	// when the message (or document) as a whole is wrong.
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error formats as "message 3: tool_calls[0].function.arguments: must be a
// string", leaving out the parts that are not set.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		b.WriteString("message ")
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// errAt builds an *Error; the reason is formatted only here so that call
// sites stay one line.
func errAt(index int, field, format string, args ...any) *Error {
	return &Error{Index: index, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// jsonSyntaxError turns an encoding/json error about the whole document into
// an *Error with a line and column, because byte offsets mean little to a
// person looking at a pretty-printed file.
func jsonSyntaxError(data []byte, err error) *Error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, int(se.Offset)-1)
		return errAt(-1, "", "malformed JSON at line %d, column %d: %s", line, col, se.Error())
	}
	return errAt(-1, "", "malformed JSON: %s", err.Error())
}

// lineCol gives the 1-based line and byte column of data[pos].
func lineCol(data []byte, pos int) (line, col int) {
	if pos < 0 {
		pos = 0
	}
	if pos > len(data) {
		pos = len(data)
	}
	line = 1 + bytes.Count(data[:pos], []byte{'\n'})
	col = pos - bytes.LastIndexByte(data[:pos], '\n')
	return line, col
}

// firstInvalidUTF8 returns the offset of the first byte that is not part of
// valid UTF-8, or -1.
func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		if data[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// checkUTF8 rejects documents holding invalid UTF-8. encoding/json would
// silently replace such bytes with U+FFFD, so the rendered output would no
// longer be the input. The document must already be valid JSON, so the bad
// byte is inside a string; the path to that string makes the error precise.
// indexMessages says the format keeps its messages in a "messages" field or
// a bare array, so that the error can carry a message index.
func checkUTF8(data []byte, indexMessages bool) *Error {
	if utf8.Valid(data) {
		return nil
	}
	bad := firstInvalidUTF8(data)
	line, col := lineCol(data, bad)
	reason := fmt.Sprintf("invalid UTF-8 at line %d, column %d", line, col)
	path := pathAt(data, bad)
	if indexMessages {
		switch {
		case len(path) >= 2 && path[0] == "messages":
			if i, ok := path[1].(int); ok {
				return &Error{Index: i, Field: formatPath(path[2:]), Reason: reason}
			}
		case len(path) >= 1:
			if i, ok := path[0].(int); ok {
				return &Error{Index: i, Field: formatPath(path[1:]), Reason: reason}
			}
		}
	}
	return &Error{Index: -1, Field: formatPath(path), Reason: reason}
}

// pathFrame is one open object or array while walking tokens.
type pathFrame struct {
	array   bool
	index   int
	key     string
	wantKey bool
}

// pathAt returns the path (object keys as string, array indexes as int) of
// the string token that contains data[offset]. The decoder only gives token
// end offsets, which is enough: the first token ending past the offset is
// the one holding it.
func pathAt(data []byte, offset int) []any {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []pathFrame
	current := func(extraKey string, withKey bool) []any {
		out := make([]any, 0, len(stack)+1)
		for _, f := range stack {
			if f.array {
				out = append(out, f.index)
			} else if !f.wantKey {
				out = append(out, f.key)
			}
		}
		if withKey {
			out = append(out, extraKey)
		}
		return out
	}
	advance := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.array {
			top.index++
		} else {
			top.wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		past := dec.InputOffset() > int64(offset)
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if !top.array && top.wantKey {
				if k, ok := tok.(string); ok {
					if past {
						// The key itself is bad: name the object holding it.
						return current(k, true)
					}
					top.key = k
					top.wantKey = false
					continue
				}
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, pathFrame{wantKey: true})
			case '[':
				stack = append(stack, pathFrame{array: true})
			default:
				stack = stack[:len(stack)-1]
				advance()
			}
		default:
			if past {
				return current("", false)
			}
			advance()
		}
	}
}

// formatPath renders a path as "tool_calls[0].function.arguments".
func formatPath(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch v := p.(type) {
		case int:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(v))
			b.WriteByte(']')
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

// field joins a parent path and a child key.
func field(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

// indexed appends an array index to a path.
func indexed(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}
