// Package jsonscan finds the ends of values in a JSON document that is
// already known to be valid, without decoding them: the conversation
// parser and the gateway's canonical hash walk megabytes of JSON this way
// instead of building a tree of it.
package jsonscan

import "bytes"

// SkipSpace returns the index of the first byte from i on that is not JSON
// white space.
func SkipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd returns the index just past the value that starts at d[i].
func ValueEnd(d []byte, i int) int {
	switch d[i] {
	case '"':
		return StringEnd(d, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				j = StringEnd(d, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(d)
	}
	// A number, true, false or null.
	j := i
	for j < len(d) {
		switch d[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// StringEnd returns the index just past the string literal that starts at
// d[i] (its opening quote).
func StringEnd(d []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(d[j:], '"')
		if q < 0 {
			return len(d)
		}
		j += q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := j - 1; d[k] == '\\'; k-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}
