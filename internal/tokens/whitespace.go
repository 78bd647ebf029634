package tokens

import (
	"container/heap"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Why this file exists.
//
// tiktoken splits text into pieces with a regular expression before the
// byte-pair merge. One alternative of both the o200k_base and the
// cl100k_base pattern is `\s*[\r\n]+`: greedy whitespace that must end with
// a line break, so a blank-line run such as "\n    \n" is one piece and
// usually one token. tiktoken-go/tokenizer v0.10.0 (the latest) runs a
// code-generated matcher (codec/regexp.gen.go) whose backtracking for that
// loop calls helpers.IndexOfAny2, finding the FIRST line break where it
// needs the last. It therefore cuts such a run after its first line break
// ("\n", "    \n"), which costs one extra token per blank line with
// indentation (tiktoken's own test expects "today\n \n" to be 2 tokens in
// cl100k_base; the library gives 3), and it rescans the rest of the run for
// every cut, so a long run of whitespace lines takes quadratic time (seconds
// for 32 KB of " \n", most of an hour for a megabyte).
//
// bpeCounter.Count works around it: it finds every piece the correct pattern
// gives that holds more than one group of line breaks, counts the text
// between those pieces with the library (whose matcher is right there), and
// counts each such piece with bytePairCount and the encoding's own ranks.
// The result equals tiktoken's on every case of testdata (3,000 random
// strings over tricky pieces and every message of the shared conversations)
// except the o200k_base corner named in punctuationBefore. When the library
// is fixed, this file can go; TestPublishedCounts keeps guarding.

// isNewline reports whether c is one of the two line-break characters of
// the pattern's [\r\n] class.
func isNewline(c byte) bool { return c == '\n' || c == '\r' }

// isOther reports whether r is in the pattern's [^\s\p{L}\p{N}] class, the
// characters of the punctuation alternative ` ?[^\s\p{L}\p{N}]+[\r\n]*`.
func isOther(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// countText counts s with the library, routing every multi-line whitespace
// piece to countWhitespace so that the result equals tiktoken's. It is
// linear: each whitespace run is walked a bounded number of times.
func (b *bpeCounter) countText(s string) int {
	total := 0
	segStart := 0 // start of the text not yet counted
	i := 0        // where to look for the next line break
	for i < len(s) {
		j := strings.IndexAny(s[i:], "\r\n")
		if j < 0 {
			break
		}
		j += i
		// The maximal whitespace run around j. Runs never overlap, and the
		// scan resumes after this one, so the walk back is bounded by i.
		runStart := j
		for runStart > i {
			r, n := utf8.DecodeLastRuneInString(s[:runStart])
			if !unicode.IsSpace(r) {
				break
			}
			runStart -= n
		}
		runEnd := j
		for runEnd < len(s) {
			r, n := utf8.DecodeRuneInString(s[runEnd:])
			if !unicode.IsSpace(r) {
				break
			}
			runEnd += n
		}
		i = runEnd

		pieceStart := runStart
		if isNewline(s[runStart]) && b.punctuationBefore(s[:runStart]) {
			// The punctuation alternative ends with [\r\n]*, so the match
			// before the run already took its leading line breaks.
			for pieceStart < runEnd && isNewline(s[pieceStart]) {
				pieceStart++
			}
		}
		// The correct piece ends after the last line break of the run; the
		// library's cut is right when there is only one group of them.
		lastNL := strings.LastIndexAny(s[pieceStart:runEnd], "\r\n")
		if lastNL < 0 {
			continue
		}
		pieceEnd := pieceStart + lastNL + 1
		firstNL := pieceStart + strings.IndexAny(s[pieceStart:pieceEnd], "\r\n")
		firstGroupEnd := firstNL
		for firstGroupEnd < pieceEnd && isNewline(s[firstGroupEnd]) {
			firstGroupEnd++
		}
		if firstGroupEnd == pieceEnd {
			continue
		}
		total += b.countLibrary(s[segStart:pieceStart])
		total += b.countWhitespace(s[pieceStart:pieceEnd])
		segStart = pieceEnd
	}
	return total + b.countLibrary(s[segStart:])
}

// punctuationBefore reports whether the regex match that ends where text
// ends is the punctuation alternative, which goes on to take line breaks.
// In cl100k_base only that alternative can end on an [^\s\p{L}\p{N}]
// character. In o200k_base the letter alternatives also take combining
// marks (\p{M}), with one leading non-letter, so the run of such characters
// before the whitespace is replayed as the pattern would match it. One case
// is left out: a run whose start was taken by the [\r\n/]* tail of an
// earlier punctuation match ("=\n/é" with a combining accent); there the
// count can be one token off, and only before a multi-line blank run.
func (b *bpeCounter) punctuationBefore(text string) bool {
	if text == "" {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(text)
	if !isOther(r) {
		return false
	}
	if b.name != O200kBase {
		return true
	}
	start := len(text)
	for start > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:start])
		if !isOther(r) {
			break
		}
		start -= n
	}
	run := text[start:]
	p := 0
	if start > 0 {
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		first, _ := utf8.DecodeRuneInString(run)
		switch {
		case unicode.IsLetter(before):
			p = skipMarks(run, 0) // the word before takes its marks
		case before == ' ' && !isMark(first):
			// The match starts at the space, where the letter
			// alternatives fail, and ` ?[^\s\p{L}\p{N}]+` takes the run.
			return true
		}
	}
	for p < len(run) {
		r, n := utf8.DecodeRuneInString(run[p:])
		if isMark(r) {
			p = skipMarks(run, p) // a letter alternative matches the marks
			continue
		}
		if q := p + n; q < len(run) {
			if r2, _ := utf8.DecodeRuneInString(run[q:]); isMark(r2) {
				p = skipMarks(run, q) // one leading character plus marks
				continue
			}
		}
		// The punctuation alternative takes the rest of the run.
		return true
	}
	return false
}

func isMark(r rune) bool { return unicode.Is(unicode.M, r) }

// skipMarks returns the end of the run of combining marks at s[p:].
func skipMarks(s string, p int) int {
	for p < len(s) {
		r, n := utf8.DecodeRuneInString(s[p:])
		if !isMark(r) {
			break
		}
		p += n
	}
	return p
}

// countLibrary counts s with tiktoken-go/tokenizer.
func (b *bpeCounter) countLibrary(s string) int {
	return countChunked(s, b.countLibraryPart)
}

// countLibraryPart counts s with the library in one call.
func (b *bpeCounter) countLibraryPart(s string) int {
	if s == "" {
		return 0
	}
	n, err := b.codec.Count(s)
	if err != nil {
		// Only a regexp failure can get here (the match timeout is infinite
		// and invalid UTF-8 is replaced); a size estimate of ~4 bytes per
		// token is more useful to a caller than a zero or a panic.
		return (len(s) + 3) / 4
	}
	return n
}

// countWhitespace byte-pair encodes a whitespace-only piece with the
// encoding's ranks and returns the number of tokens.
func (b *bpeCounter) countWhitespace(piece string) int {
	ranks := b.spaceRanks()
	if ranks == nil {
		return b.countLibrary(piece)
	}
	return bytePairCount(piece, ranks)
}

// spaceByte marks the bytes that occur in the UTF-8 encoding of some
// whitespace character: every token a whitespace piece can merge into is
// made of them only.
var spaceByte = sync.OnceValue(func() [256]bool {
	var set [256]bool
	var buf [utf8.UTFMax]byte
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			n := utf8.EncodeRune(buf[:], r)
			for _, c := range buf[:n] {
				set[c] = true
			}
		}
	}
	return set
})

// loadSpaceRanks returns the merge rank of every token made only of
// whitespace bytes (a few hundred). The library does not export its
// vocabulary, but decoding each token id gives it back: in tiktoken a
// token's rank is its id. A separate codec is used because the shared one
// replaces the invalid UTF-8 that partial-character tokens decode to.
func loadSpaceRanks(enc tokenizer.Encoding) (map[string]int, error) {
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("build %s decoder: %w", enc, err)
	}
	set := spaceByte()
	ranks := make(map[string]int)
	// Ids run from 0 without gaps up to the special tokens; stop at the
	// first id the codec does not know.
	for id := uint(0); ; id++ {
		tok, err := codec.Decode([]uint{id})
		if err != nil {
			break
		}
		only := true
		for k := 0; k < len(tok); k++ {
			if !set[tok[k]] {
				only = false
				break
			}
		}
		if only {
			ranks[tok] = int(id)
		}
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("%s: no whitespace tokens found", enc)
	}
	return ranks, nil
}

// bytePairCount returns how many tokens byte-pair encoding piece gives with
// ranks: tiktoken's rule (merge the adjacent pair whose concatenation has the
// lowest rank, the leftmost on ties, until none is a token), kept in a heap
// so that a megabyte-long run stays O(n log n). Every single byte must be in
// ranks, as it is in tiktoken's byte-level encodings.
func bytePairCount(piece string, ranks map[string]int) int {
	n := len(piece)
	if n <= 1 {
		return n
	}
	// Part k starts at byte k; next/prev link the live parts.
	next := make([]int, n)
	prev := make([]int, n)
	for k := range n {
		next[k] = k + 1
		prev[k] = k - 1
	}
	end := func(k int) int { return next[k] } // next == n marks the last part
	pairRank := func(k int) int {
		if k < 0 || next[k] >= n {
			return -1
		}
		r, ok := ranks[piece[k:end(next[k])]]
		if !ok {
			return -1
		}
		return r
	}
	rank := make([]int, n) // rank of merging part k with its successor, -1 if none
	h := make(mergeQueue, 0, n)
	for k := range n {
		rank[k] = pairRank(k)
		if rank[k] >= 0 {
			h = append(h, mergeItem{rank: rank[k], pos: k})
		}
	}
	heap.Init(&h)
	parts := n
	for h.Len() > 0 {
		it := heap.Pop(&h).(mergeItem)
		k := it.pos
		if rank[k] != it.rank {
			continue // stale: part k changed since this entry was pushed
		}
		// Merge part k with its successor m.
		m := next[k]
		next[k] = next[m]
		if next[m] < n {
			prev[next[m]] = k
		}
		rank[m] = -1
		parts--
		for _, p := range [2]int{k, prev[k]} {
			if p < 0 {
				continue
			}
			rank[p] = pairRank(p)
			if rank[p] >= 0 {
				heap.Push(&h, mergeItem{rank: rank[p], pos: p})
			}
		}
	}
	return parts
}

// mergeItem is a candidate merge of the part starting at pos with the next.
type mergeItem struct {
	rank int
	pos  int
}

// mergeQueue orders candidates by rank, then position, so that equal ranks
// merge leftmost first as in tiktoken.
type mergeQueue []mergeItem

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeItem)) }
func (q *mergeQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
