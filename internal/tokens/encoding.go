package tokens

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Encoding names accepted by New.
const (
	// O200kBase is the BPE encoding of gpt-4o, gpt-4.1, gpt-5 and the o-series.
	O200kBase = "o200k_base"
	// Cl100kBase is the BPE encoding of gpt-4, gpt-3.5-turbo and
	// text-embedding-3.
	Cl100kBase = "cl100k_base"
	// Chars counts Unicode code points, as Python's len() does on a str;
	// the ReAct two-layer design sizes everything in characters.
	Chars = "chars"
)

// Encodings returns the names New accepts, in a stable order.
func Encodings() []string {
	return []string{O200kBase, Cl100kBase, Chars}
}

// The BPE vocabularies are Go maps compiled into the binary by
// tiktoken-go/tokenizer (no download, no cache directory), but building one
// still takes tens of milliseconds and megabytes, so each is built at most
// once per process, on first use, and shared: a bpeCounter is read-only after
// construction and safe for concurrent use.
var (
	o200kCounter  = sync.OnceValues(func() (Counter, error) { return newBPE(tokenizer.O200kBase) })
	cl100kCounter = sync.OnceValues(func() (Counter, error) { return newBPE(tokenizer.Cl100kBase) })
)

// New returns the shared Counter for an encoding name: "o200k_base",
// "cl100k_base" or "chars" (case and surrounding spaces are ignored, since
// the name often comes from an environment variable). The returned Counter
// is safe for concurrent use.
func New(encoding string) (Counter, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case O200kBase:
		return o200kCounter()
	case Cl100kBase:
		return cl100kCounter()
	case Chars:
		return charCounter{}, nil
	default:
		return nil, fmt.Errorf("unknown token encoding %q: valid encodings are %s",
			encoding, strings.Join(Encodings(), ", "))
	}
}

// bpeCounter counts tokens with one of OpenAI's byte-pair encodings.
type bpeCounter struct {
	codec tokenizer.Codec
	name  string
	// spaceRanks loads, on first need, the ranks countWhitespace merges
	// with; nil if they could not be read (then the library's count is
	// used, see whitespace.go).
	spaceRanks func() map[string]int
}

func newBPE(enc tokenizer.Encoding) (Counter, error) {
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("build %s encoder: %w", enc, err)
	}
	// Go strings may hold invalid UTF-8, which Python strings cannot; replace
	// each bad sequence with U+FFFD as tiktoken does for lone surrogates. Set
	// once here, before the codec is shared, so there is no data race.
	codec.SetErrorMode(tokenizer.ErrorModeReplace)
	spaceRanks := sync.OnceValue(func() map[string]int {
		ranks, err := loadSpaceRanks(enc)
		if err != nil {
			return nil
		}
		return ranks
	})
	return &bpeCounter{codec: codec, name: string(enc), spaceRanks: spaceRanks}, nil
}

// Count returns the number of tokens tiktoken's encode_ordinary gives:
// special-token text such as "<|endoftext|>" counts as ordinary text, which
// is what it is inside a conversation being measured. It corrects a
// whitespace bug of the library (see whitespace.go).
func (b *bpeCounter) Count(s string) int {
	return b.countText(s)
}

// Name returns the encoding name.
func (b *bpeCounter) Name() string { return b.name }

// charCounter counts Unicode code points.
type charCounter struct{}

// Count returns the number of code points in s; each byte of an invalid
// UTF-8 sequence counts as one.
func (charCounter) Count(s string) int { return utf8.RuneCountInString(s) }

// Name returns "chars".
func (charCounter) Name() string { return Chars }
