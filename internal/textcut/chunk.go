package textcut

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// ErrBadSize reports a non-positive size limit.
var ErrBadSize = errors.New("size limit must be positive")

// Chunk splits text into chunks of at most maxChars code points each, such
// that strings.Join(chunks, "") == text. A chunk ends, in order of
// preference, after a blank line, after a line break, after a JSON element
// (a "}," or "]," at nesting depth ≤ 2, when the text is JSON), after a
// sentence end followed by whitespace, after whitespace, and only then at a
// hard cut, which still falls between code points.
//
// A boundary is only taken if it leaves the chunk at least half full, so a
// text yields at most about twice the minimal number of chunks: each chunk
// costs one LLM call in the ReAct two-layer design's map-reduce.
//
// An empty text gives no chunks. maxChars ≤ 0 is an error.
func Chunk(text string, maxChars int) ([]string, error) {
	if maxChars <= 0 {
		return nil, fmt.Errorf("chunk: maxChars %d: %w", maxChars, ErrBadSize)
	}
	var jsonCuts []int
	if looksJSON(text) {
		jsonCuts = jsonElementCuts(text)
	}
	var chunks []string
	start := 0
	for start < len(text) {
		limit, whole := advanceRunes(text, start, maxChars)
		if whole {
			chunks = append(chunks, text[start:])
			break
		}
		lower, _ := advanceRunes(text, start, (maxChars+1)/2)
		cut := bestCut(text, start, lower, limit, jsonCuts)
		chunks = append(chunks, text[start:cut])
		start = cut
	}
	return chunks, nil
}

// advanceRunes returns the byte offset n code points after start, and
// whether the text ends before that.
func advanceRunes(text string, start, n int) (int, bool) {
	i := start
	for k := 0; k < n; k++ {
		if i >= len(text) {
			return len(text), true
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return i, i >= len(text)
}

// bestCut picks the end of the chunk text[start:limit], at or after lower.
// Every candidate is the offset just after an ASCII byte, so it never splits
// a UTF-8 sequence.
func bestCut(text string, start, lower, limit int, jsonCuts []int) int {
	window := text[start:limit]
	ok := func(cut int) bool { return cut >= lower && cut > start }

	// Paragraph: after the last blank line ("\n\n", or "\n\r\n").
	para := -1
	for _, sep := range []string{"\n\n", "\n\r\n"} {
		if i := strings.LastIndex(window, sep); i >= 0 && start+i+len(sep) > para {
			para = start + i + len(sep)
		}
	}
	if para >= 0 && ok(para) {
		return para
	}
	// Line.
	if i := strings.LastIndexByte(window, '\n'); i >= 0 && ok(start+i+1) {
		return start + i + 1
	}
	// JSON element.
	if len(jsonCuts) > 0 {
		k := sort.SearchInts(jsonCuts, limit+1) - 1
		if k >= 0 && ok(jsonCuts[k]) {
			return jsonCuts[k]
		}
	}
	// Sentence end, then any whitespace.
	ws := -1
	for i := limit; i >= lower && i > start; i-- {
		if !isSpaceByte(text[i-1]) {
			continue
		}
		// text[i-1] is whitespace: a cut at i keeps it in this chunk.
		if ws < 0 {
			ws = i
		}
		if i-2 >= start && strings.IndexByte(".!?", text[i-2]) >= 0 {
			return i
		}
	}
	if ws >= 0 {
		return ws
	}
	return limit
}

func isSpaceByte(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// looksJSON reports whether text starts like a JSON object or array. A
// truncated document still counts: the scanner below tolerates it.
func looksJSON(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	return strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")
}

// jsonElementCuts returns, in increasing order, the offsets just after each
// comma that follows a closing brace or bracket at depth ≤ 2 outside
// strings. One linear pass, so Chunk stays linear on minified JSON.
func jsonElementCuts(text string) []int {
	var cuts []int
	depth := 0
	inString, escaped := false, false
	lastClose := -1 // offset of the last '}' or ']' with only whitespace after it
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			lastClose = -1
		case '{', '[':
			depth++
			lastClose = -1
		case '}', ']':
			depth--
			lastClose = i
		case ',':
			if lastClose >= 0 && depth <= 2 {
				cuts = append(cuts, i+1)
			}
			lastClose = -1
		case ' ', '\t', '\r', '\n':
		default:
			lastClose = -1
		}
	}
	return cuts
}
