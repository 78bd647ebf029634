package conversation

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/ctxcompact/orchestrator/internal/jsonscan"
)

// MaxDepth bounds how deeply a conversation's JSON nests (objects and
// arrays, counted from the document's top level, which is depth 1). Real
// conversations stay far below it: an Anthropic tool_use input sits at
// depth 5, and tool inputs rarely nest a dozen levels more. A document
// nested thousands of levels deep is accepted by encoding/json (up to
// 10,000) but costs every later step a recursive walk, and is echoed
// back whole; it is refused at the edge instead.
const MaxDepth = 128

// depthExceeded returns the offset of the first '{' or '[' that opens
// level max+1 of data (valid JSON), or -1 when data stays within max.
func depthExceeded(data []byte, max int) int {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Brackets inside a string are text: skip it whole.
			i = jsonscan.StringEnd(data, i) - 1
		case '{', '[':
			depth++
			if depth > max {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}

// checkDepth refuses a document (valid JSON) nested deeper than MaxDepth,
// naming where: the message index and the path inside it, as checkUTF8
// does, when the format keeps its messages in a "messages" field or a
// bare array (indexMessages).
func checkDepth(data []byte, indexMessages bool) *Error {
	if depthExceeded(data, MaxDepth) < 0 {
		return nil
	}
	reason := "JSON nested more than " + strconv.Itoa(MaxDepth) + " levels deep"
	path := deepPath(data, MaxDepth)
	if indexMessages {
		switch {
		case len(path) >= 2 && path[0] == "messages":
			if i, ok := path[1].(int); ok {
				return &Error{Index: i, Field: formatPath(clipPath(path[2:])), Reason: reason}
			}
		case len(path) >= 1:
			if i, ok := path[0].(int); ok {
				return &Error{Index: i, Field: formatPath(clipPath(path[1:])), Reason: reason}
			}
		}
	}
	return &Error{Index: -1, Field: formatPath(clipPath(path)), Reason: reason}
}

// maxPathShown bounds the path an error names: the first steps say which
// field holds the deep value (content[0].input), the other hundred-odd
// would only repeat themselves.
const maxPathShown = 6

func clipPath(path []any) []any {
	if len(path) > maxPathShown {
		return path[:maxPathShown]
	}
	return path
}

// deepPath returns the path (object keys as string, array indexes as int)
// of the value that opens level max+1 of data, which holds it.
func deepPath(data []byte, max int) []any {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []pathFrame
	path := func() []any {
		out := make([]any, 0, len(stack))
		for _, f := range stack {
			if f.array {
				out = append(out, f.index)
			} else if !f.wantKey {
				out = append(out, f.key)
			}
		}
		return out
	}
	advance := func() {
		if len(stack) == 0 {
			return
		}
		if top := &stack[len(stack)-1]; top.array {
			top.index++
		} else {
			top.wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].wantKey = k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == max {
				return path()
			}
			stack = append(stack, pathFrame{array: tok == json.Delim('['), wantKey: tok == json.Delim('{')})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			advance()
		default:
			advance()
		}
	}
}
