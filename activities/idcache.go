package activities

import (
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/offline"
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
	recent *lru.Cache[string, []drift.Identifier]
	// flight lets a drift check wait for an extraction of the same source
	// already under way (a prefetch) instead of doing it twice.
	flight singleflight.Group
}

// idCacheSize bounds idCache by entries.
const idCacheSize = 64

func (c *idCache) cache() *lru.Cache[string, []drift.Identifier] {
	c.once.Do(func() {
		recent, err := lru.New[string, []drift.Identifier](idCacheSize)
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
func (c *idCache) get(key string, text func() (string, error)) ([]drift.Identifier, error) {
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if ids, ok := c.cache().Get(key); ok {
			return ids, nil
		}
		t, err := text()
		if err != nil {
			return nil, err
		}
		ids := keepIDs(drift.Identifiers(t))
		c.cache().Add(key, ids)
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]drift.Identifier), nil
}

// checkedSource is what every drift check of one source needs besides
// the source itself: its Comparable form (drift.Comparable, as long as
// the source) and the identifiers a summary of it must keep
// (drift.Required). Making them was about two thirds of a check's time,
// and a history summary's source is checked up to four times (the
// summary, each repair, the deterministic replacement).
type checkedSource struct {
	comparable string
	required   []drift.Identifier
	// open are the source's last errors still open, made once, by the
	// first check that asks (a history summary's; a tool result's check
	// never does).
	open *openErrors
}

// openErrors are a drift-check source's last open errors
// (offline.OpenErrors), made once.
type openErrors struct {
	once  sync.Once
	lines []string
}

// of returns the open errors of source, the text this entry is of.
func (o *openErrors) of(source string) []string {
	o.once.Do(func() { o.lines = offline.OpenErrors(source) })
	return o.lines
}

// sourceCache remembers the checkedSource of recent drift-check sources
// by S3 key, like idCache (content-addressed keys never go stale). An
// entry is as large as its source, so it holds fewer entries than
// idCache: a few sources are those of the checks in flight. Its zero
// value is ready to use.
type sourceCache struct {
	once   sync.Once
	recent *lru.Cache[string, checkedSource]
	flight singleflight.Group
}

// sourceCacheSize bounds sourceCache by entries.
const sourceCacheSize = 8

func (c *sourceCache) cache() *lru.Cache[string, checkedSource] {
	c.once.Do(func() {
		recent, err := lru.New[string, checkedSource](sourceCacheSize)
		if err != nil {
			panic(err) // only for a size below 1
		}
		c.recent = recent
	})
	return c.recent
}

// get makes the checkedSource of the source at key once while the cache
// holds it; ids are the source's identifiers.
func (c *sourceCache) get(key string, ids []drift.Identifier, text func() (string, error)) (checkedSource, error) {
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if cs, ok := c.cache().Get(key); ok {
			return cs, nil
		}
		t, err := text()
		if err != nil {
			return nil, err
		}
		src := drift.Comparable(t)
		cs := checkedSource{comparable: src, required: keepIDs(drift.Required(ids, src)), open: &openErrors{}}
		c.cache().Add(key, cs)
		return cs, nil
	})
	if err != nil {
		return checkedSource{}, err
	}
	return v.(checkedSource), nil
}

// checked returns the checkedSource of text, the source at key, from the
// caches when they hold it.
func (a *Activities) checked(key, text string) (checkedSource, error) {
	read := func() (string, error) { return text, nil }
	ids, err := a.ids.get(key, read)
	if err != nil {
		return checkedSource{}, err
	}
	return a.sources.get(key, ids, read)
}

// keepIDs copies the identifiers' values out of their source: they are
// substrings of it, and a cached substring would keep the whole source
// (megabytes) alive.
func keepIDs(ids []drift.Identifier) []drift.Identifier {
	for i := range ids {
		ids[i].Value = strings.Clone(ids[i].Value)
	}
	return ids
}

// prefetchIdentifiers extracts the identifiers of a future drift-check
// source, and its checkedSource, in the background, while the summarizer works on it, so that the
// check after the summary finds them ready. It holds no activity context:
// it only fills the bounded cache, and a check in another worker process
// extracts them itself.
func (a *Activities) prefetchIdentifiers(key, text string) {
	go func() {
		ids, err := a.ids.get(key, func() (string, error) { return text, nil })
		if err == nil {
			_, _ = a.sources.get(key, ids, func() (string, error) { return text, nil })
		}
	}()
}
