package tokens

// Why this file exists.
//
// The library's pre-tokenizer (regexp2) converts its whole input to runes
// and keeps a match object per piece, so counting one 30 MB tool result
// at once takes over 2 GB of allocations and a peak of several hundred
// MB. Byte-pair merges never cross a piece of the pattern, so the count of
// a text is the sum of the counts of parts cut where a piece always ends:
// countChunked cuts there, about every chunkBytes, and the peak stays
// near one chunk's.

// chunkBytes is the size of the parts countChunked hands to the library.
const chunkBytes = 64 << 10

// countChunked counts s with count, in parts cut only at piece
// boundaries of both encodings' patterns (see pieceBoundary). A text with
// no such boundary for a long stretch is counted in one part there.
func countChunked(s string, count func(string) int) int {
	total := 0
	for len(s) > chunkBytes {
		cut := -1
		for p := chunkBytes; p < len(s); p++ {
			if pieceBoundary(s, p) {
				cut = p
				break
			}
		}
		if cut < 0 {
			break
		}
		total += count(s[:cut])
		s = s[cut:]
	}
	return total + count(s)
}

// pieceBoundary reports whether a piece of the o200k_base and cl100k_base
// patterns always ends at byte p of s:
//   - after a line break and before an ASCII letter or digit: the letter
//     and number alternatives never start with a line break (their
//     optional leading character excludes [\r\n]), and every alternative
//     that takes line breaks ends at the first non-space after them;
//   - after an ASCII letter and before a space: a letter run ends at the
//     space, which belongs to the next piece (" word", or a whitespace
//     piece).
func pieceBoundary(s string, p int) bool {
	prev, next := s[p-1], s[p]
	switch {
	case isNewline(prev):
		return isASCIILetter(next) || next >= '0' && next <= '9'
	case next == ' ':
		return isASCIILetter(prev)
	}
	return false
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
