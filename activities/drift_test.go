package activities

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/drift"
)

func TestPrefetchedIdentifiersServeTheDriftCheck(t *testing.T) {
	t.Parallel()
	text := "Edited django/db/models/query.py:1423 and ran `pytest tests/queries -k test_" + t.Name() + "`; see https://example.com/issue/31415"
	key := "tenants/t/transcript/ab/" + t.Name()
	// No blob store: the check must not read the source again.
	a := &Activities{}
	a.prefetchIdentifiers(key, text)
	require.Eventually(t, func() bool { return a.sources.cache().Contains(key) }, 10*time.Second, 5*time.Millisecond)

	ids, err := a.ids.get(key, func() (string, error) { return "", errors.New("read again") })
	require.NoError(t, err)
	require.Equal(t, drift.Identifiers(text), ids)
	require.NotEmpty(t, ids)
	// The check's comparable source and required identifiers are made
	// once, by the prefetch: another text under the same key is not read.
	cs, err := a.checked(key, "another text")
	require.NoError(t, err)
	require.Equal(t, drift.Comparable(text), cs.comparable)
	require.Equal(t, drift.Required(drift.Identifiers(text), drift.Comparable(text)), cs.required)

	score, missing := retention(cs.required, "query.py:1423 was edited", 0)
	want, wantMissing := Retention(text, "query.py:1423 was edited", 0)
	require.Equal(t, want, score, "the cached path scores as the direct one")
	require.Equal(t, wantMissing, missing)
	require.Less(t, score, 1.0)

	// The cache holds copies: no identifier points into the source, which
	// would keep the whole source text alive.
	start := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	for _, id := range ids {
		p := uintptr(unsafe.Pointer(unsafe.StringData(id.Value)))
		require.False(t, p >= start && p < start+uintptr(len(text)), "identifier %q shares the source's memory", id.Value)
	}
}
