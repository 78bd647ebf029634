package tokens

import (
	"crypto/sha256"

	lru "github.com/hashicorp/golang-lru/v2"
)

// sharedEntries bounds the process-wide cache.
const sharedEntries = 1 << 16

// cacheKey names a text by its SHA-256, so the cache never holds texts.
type cacheKey struct {
	encoding string
	sum      [sha256.Size]byte
}

// CountCache remembers the counts of texts by SHA-256 and encoding,
// bounded by entries, so that memory does not grow with the number of
// runs. golang-lru is a well-kept, thread-safe LRU; a hand-written one
// would buy nothing. A worker keeps one in its activities; tools without
// one use the process-wide cache behind Shared.
type CountCache struct {
	recent *lru.Cache[cacheKey, int]
}

// DefaultCountEntries bounds a CountCache: at about 100 bytes an entry,
// 64Ki entries hold 6.5 MB whatever the number of runs.
const DefaultCountEntries = sharedEntries

// NewCountCache returns a cache of at most entries counts (at least 1).
func NewCountCache(entries int) *CountCache {
	recent, err := lru.New[cacheKey, int](max(entries, 1))
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &CountCache{recent: recent}
}

// Wrap returns c counting through the cache. The steps of a compaction
// run in turn, each in its own activity, and measure mostly the same
// messages: the plan step counts the conversation, and the steps after
// it, as well as the next run of the same session, find most counts here.
// Texts are keyed by SHA-256 (hashing is hundreds of times faster than BPE
// counting). Character counts are not cached: counting code points is
// cheaper than hashing.
func (cc *CountCache) Wrap(c Counter) Counter {
	if c.Name() == Chars {
		return c
	}
	return cachedCounter{Counter: c, cache: cc}
}

// shared is the process-wide count cache behind Shared.
var shared = NewCountCache(sharedEntries)

// Shared wraps c with the process-wide cache of counts (see CountCache).
func Shared(c Counter) Counter {
	return shared.Wrap(c)
}

type cachedCounter struct {
	Counter
	cache *CountCache
}

// Count returns the size of s, from the cache when it was counted before.
func (c cachedCounter) Count(s string) int {
	if len(s) < memoMinBytes {
		return c.Counter.Count(s)
	}
	k := cacheKey{encoding: c.Name(), sum: sha256.Sum256([]byte(s))}
	if n, ok := c.cache.recent.Get(k); ok {
		return n
	}
	n := c.Counter.Count(s)
	c.cache.recent.Add(k, n)
	return n
}
