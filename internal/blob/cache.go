package blob

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// cache is the Store's in-process read cache of content-addressed objects,
// bounded by total bytes. Only content keys are cached
// (tenants/{tenant}/{kind}/{sha[:2]}/{sha}), and only with bytes whose
// SHA-256 is the key's sha: such a key can only ever name those bytes, so an
// entry is never stale, merely possibly deleted in S3 since (Delete evicts
// locally; another process's delete is not seen, which for immutable
// content only means serving bytes that were correct).
//
// Recency order and eviction come from hashicorp/golang-lru's simplelru
// rather than a hand-written list; simplelru bounds entries by count, so
// its count bound is effectively disabled and bytes are accounted here,
// through the eviction callback, under one mutex (simplelru is not
// thread-safe by itself).
type cache struct {
	maxBytes int64 // total bound on the cost of all entries
	maxEntry int64 // larger objects are not cached: maxBytes/8

	mu    sync.Mutex
	lru   *simplelru.LRU[string, []byte]
	bytes int64 // sum of entryCost over entries, kept by add and onEvict
	// epoch changes whenever a key is invalidated (Delete, Put). An insert
	// carries the epoch seen before its S3 request and is dropped if it
	// changed meanwhile, so bytes read before a delete cannot be cached
	// after it.
	epoch uint64

	hits, misses atomic.Int64
}

// newCache returns a cache of maxBytes, or nil (caching disabled) when
// maxBytes is zero. maxBytes must not be negative.
func newCache(maxBytes int64) *cache {
	if maxBytes <= 0 {
		return nil
	}
	c := &cache{maxBytes: maxBytes, maxEntry: maxBytes / 8}
	// The count bound is never reached; bytes are the bound. NewLRU only
	// fails on a non-positive size.
	l, err := simplelru.NewLRU[string, []byte](math.MaxInt, func(key string, data []byte) {
		c.bytes -= entryCost(key, data)
	})
	if err != nil {
		panic("blob: simplelru.NewLRU: " + err.Error())
	}
	c.lru = l
	return c
}

// entryCost is what an entry counts against the bound: its bytes and key.
func entryCost(key string, data []byte) int64 { return int64(len(key) + len(data)) }

// contentKeySHA returns the sha of a content key, and false for any other
// key (those may be overwritten, so they are never cached).
func contentKeySHA(key string) (string, bool) {
	parts := strings.Split(key, "/")
	switch {
	case len(parts) == 5:
		// ContentKey validates tenant, kind and sha and rebuilds the
		// fan-out segment, so equality proves key is exactly a content key.
		return parts[4], ContentKey(parts[1], parts[2], parts[4]) == key
	case len(parts) == 6 && parts[2] == "runs":
		return parts[5], RunContentKey(parts[1], parts[3], parts[4], parts[5]) == key
	}
	return "", false
}

// fits reports whether an object of n bytes under key may be cached.
func (c *cache) fits(key string, n int) bool {
	return int64(len(key)+n) <= c.maxEntry
}

// get returns a copy of the cached bytes of key, counting a hit or a miss.
func (c *cache) get(key string) ([]byte, bool) {
	data, ok := c.shared(key)
	if !ok {
		return nil, false
	}
	return bytes.Clone(data), true
}

// getString is get for a caller that wants a string: one copy, not two.
func (c *cache) getString(key string) (string, bool) {
	data, ok := c.shared(key)
	if !ok {
		return "", false
	}
	return string(data), true
}

// shared returns the cache's own bytes of key, which nobody may change,
// counting a hit or a miss.
func (c *cache) shared(key string) ([]byte, bool) {
	c.mu.Lock()
	data, ok := c.lru.Get(key)
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return data, true
}

// currentEpoch is taken before an S3 request whose result may be cached.
func (c *cache) currentEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// add caches a private copy of data under key unless the object is too big,
// the key is already cached (its bytes cannot differ), or a key was
// invalidated since epoch. The caller has checked that data's SHA-256 is
// the key's sha. Least recently used entries are evicted to stay in bound.
func (c *cache) add(key string, data []byte, epoch uint64) {
	if !c.fits(key, len(data)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if c.lru.Contains(key) {
		c.lru.Get(key) // refresh recency
		return
	}
	own := bytes.Clone(data)
	if own == nil {
		own = []byte{}
	}
	c.lru.Add(key, own)
	c.bytes += entryCost(key, own)
	for c.bytes > c.maxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// invalidate evicts key and makes inserts that started before it void.
func (c *cache) invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.lru.Remove(key)
}

// CacheStats returns how many reads of content keys the in-process cache
// served (hits) and how many went to S3 (misses) since the Store was made.
// Both are zero when the cache is disabled (Config.CacheBytes 0).
func (s *Store) CacheStats() (hits, misses int64) {
	if s.cache == nil {
		return 0, 0
	}
	return s.cache.hits.Load(), s.cache.misses.Load()
}

// CacheUsage returns the bytes currently held by the cache (objects plus
// keys) and its bound; both are zero when the cache is disabled.
func (s *Store) CacheUsage() (used, limit int64) {
	if s.cache == nil {
		return 0, 0
	}
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	return s.cache.bytes, s.cache.maxBytes
}
