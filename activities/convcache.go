package activities

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ctxcompact/orchestrator/internal/conversation"
)

// convCacheBytes bounds convCache by the size of the JSON its entries were
// parsed from (their parsed form takes about as much again).
const convCacheBytes = 32 << 20

// convCacheEntries bounds convCache by entries, far above the working
// conversations of the runs in flight in one worker.
const convCacheEntries = 256

// convCache keeps recently parsed working conversations by S3 key, so that
// the steps of a run that land on the same worker parse the caller's JSON
// once: plan parses the input, and each later step gets a copy of what the
// step before it loaded or saved. Keys are content-addressed, so an entry
// never goes stale. Every caller gets its own deep copy (some steps change
// the conversation they loaded). Its zero value is ready to use.
type convCache struct {
	once   sync.Once
	mu     sync.Mutex
	recent *lru.Cache[string, cachedConv]
	bytes  int64
}

// cachedConv is one parsed conversation and the size of its JSON.
type cachedConv struct {
	conv conversation.Conversation
	size int64
}

func (c *convCache) cache() *lru.Cache[string, cachedConv] {
	c.once.Do(func() {
		recent, err := lru.NewWithEvict[string, cachedConv](convCacheEntries, func(_ string, v cachedConv) {
			c.bytes -= v.size // under c.mu: every call that can evict holds it
		})
		if err != nil {
			panic(err) // only for a size below 1
		}
		c.recent = recent
	})
	return c.recent
}

// get returns a copy of the conversation parsed from key and the size of
// its JSON, if cached.
func (c *convCache) get(key string) (conversation.Conversation, int64, bool) {
	c.mu.Lock()
	v, ok := c.cache().Get(key)
	c.mu.Unlock()
	if !ok {
		return conversation.Conversation{}, 0, false
	}
	return v.conv.Clone(), v.size, true
}

// add keeps a copy of conv, parsed from (or rendered to) size bytes at
// key; one larger than a quarter of the bound is not kept. The copy is
// detached, strings included: an entry keeps alive neither the buffers
// conv was parsed from nor the strings a step built, and everything the
// cache holds was allocated here (which is how the bench tells the bounded
// cache from growth).
func (c *convCache) add(key string, conv conversation.Conversation, size int64) {
	if size > convCacheBytes/4 {
		return
	}
	v := cachedConv{conv: conv.Detached(), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	recent := c.cache()
	if recent.Contains(key) {
		return
	}
	recent.Add(key, v)
	c.bytes += size
	for c.bytes > convCacheBytes {
		if _, _, ok := recent.RemoveOldest(); !ok {
			break
		}
	}
}
