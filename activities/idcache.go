package activities

import (
	"context"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/ctxcompact/orchestrator/internal/digest"
)

// idCache remembers the identifiers of recent drift-check sources by S3
// key. Keys are content-addressed, so an entry never goes stale, and the
// drift check of a repair pass (and of a replayed run) reads the same
// source as the check before it; extraction is the costly part of a check.
// Bounded by entries (golang-lru), not by runs: 64 sources are many more
// than the drift checks in flight in one worker, and each entry holds
// copies of the identifiers, never the source text (see keepIDs). Its zero
// value is ready to use.
type idCache struct {
	once   sync.Once
	recent *lru.Cache[string, []digest.Identifier]
	// flight lets a drift check wait for an extraction of the same source
	// already under way (a prefetch) instead of doing it twice.
	flight singleflight.Group
}

// idCacheSize bounds idCache by entries.
const idCacheSize = 64

func (c *idCache) cache() *lru.Cache[string, []digest.Identifier] {
	c.once.Do(func() {
		recent, err := lru.New[string, []digest.Identifier](idCacheSize)
		if err != nil {
			panic(err) // only for a size below 1
		}
		c.recent = recent
	})
	return c.recent
}

// get extracts the identifiers of the source at key once while the cache
// holds them; a caller that arrives during an extraction waits for its
// result.
func (c *idCache) get(key string, text func() (string, error)) ([]digest.Identifier, error) {
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if ids, ok := c.cache().Get(key); ok {
			return ids, nil
		}
		t, err := text()
		if err != nil {
			return nil, err
		}
		ids := keepIDs(digest.Identifiers(t))
		c.cache().Add(key, ids)
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]digest.Identifier), nil
}

// identifiers returns the identifiers of the text at key.
func (a *Activities) identifiers(ctx context.Context, tenant, key string) ([]digest.Identifier, error) {
	if key == "" {
		return nil, nil
	}
	return a.ids.get(key, func() (string, error) { return a.text(ctx, tenant, key) })
}

// keepIDs copies the identifiers' values out of their source: they are
// substrings of it, and a cached substring would keep the whole source
// (megabytes) alive.
func keepIDs(ids []digest.Identifier) []digest.Identifier {
	for i := range ids {
		ids[i].Value = strings.Clone(ids[i].Value)
	}
	return ids
}

// prefetchIdentifiers extracts the identifiers of a future drift-check
// source in the background, while the summarizer works on it, so that the
// check after the summary finds them ready. It holds no activity context:
// it only fills the bounded cache, and a check in another worker process
// extracts them itself.
func (a *Activities) prefetchIdentifiers(key, text string) {
	go func() {
		_, _ = a.ids.get(key, func() (string, error) { return text, nil })
	}()
}
