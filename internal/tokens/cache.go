package tokens

import (
	"crypto/sha256"

	lru "github.com/hashicorp/golang-lru/v2"
)

// sharedEntries bounds the process-wide cache: at about 100 bytes an
// entry, 64Ki entries hold 6.5 MB whatever the number of runs.
const sharedEntries = 1 << 16

// cacheKey names a text by its SHA-256, so the cache never holds texts.
type cacheKey struct {
	encoding string
	sum      [sha256.Size]byte
}

// shared is the process-wide count cache behind Shared. golang-lru is a
// well-kept, thread-safe LRU; a hand-written one would buy nothing.
var shared = func() *lru.Cache[cacheKey, int] {
	c, err := lru.New[cacheKey, int](sharedEntries)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

// Shared wraps c with the process-wide cache of counts. The steps of a
// compaction run in turn, each in its own activity, and measure mostly the
// same messages: the plan step counts the conversation, and the steps
// after it, as well as the next run of the same session, find most counts
// here. Texts are keyed by SHA-256 (hashing is hundreds of times faster
// than BPE counting), and the cache is bounded by entries, so memory does
// not grow with the number of runs.
func Shared(c Counter) Counter {
	if c.Name() == Chars {
		return c // counting code points is cheaper than hashing
	}
	return sharedCounter{Counter: c}
}

type sharedCounter struct{ Counter }

// Count returns the size of s, from the cache when it was counted before.
func (c sharedCounter) Count(s string) int {
	if len(s) < memoMinBytes {
		return c.Counter.Count(s)
	}
	k := cacheKey{encoding: c.Name(), sum: sha256.Sum256([]byte(s))}
	if n, ok := shared.Get(k); ok {
		return n
	}
	n := c.Counter.Count(s)
	shared.Add(k, n)
	return n
}
