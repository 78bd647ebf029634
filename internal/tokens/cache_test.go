package tokens

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSharedCountsEachLongTextOncePerProcess(t *testing.T) {
	t.Parallel()
	base, err := New(O200kBase)
	require.NoError(t, err)
	inner := &countingCounter{Counter: base}
	// A text no other test counts, so the process-wide cache is cold for it.
	long := strings.Repeat(fmt.Sprintf("line of %s with /src/file.go:42\n", t.Name()), 20)
	want := base.Count(long)

	require.Equal(t, want, Shared(inner).Count(long))
	require.Equal(t, 1, inner.calls)
	require.Equal(t, want, Shared(inner).Count(long), "a second wrapper (another activity) finds the count")
	require.Equal(t, 1, inner.calls, "a cached text is not counted again")

	require.Equal(t, base.Count("short"), Shared(inner).Count("short"))
	require.Equal(t, 2, inner.calls, "short texts are counted every time")
}

func TestSharedKeepsEncodingsApart(t *testing.T) {
	t.Parallel()
	o200k, err := New(O200kBase)
	require.NoError(t, err)
	cl100k, err := New(Cl100kBase)
	require.NoError(t, err)
	// Code and non-English text tokenize differently in the two encodings.
	text := strings.Repeat("función_de_prueba(значение) => 東京都; ", 30) + t.Name()
	require.NotEqual(t, o200k.Count(text), cl100k.Count(text), "the test needs a text the encodings disagree on")
	require.Equal(t, o200k.Count(text), Shared(o200k).Count(text))
	require.Equal(t, cl100k.Count(text), Shared(cl100k).Count(text))
}

func TestSharedPassesCharsThrough(t *testing.T) {
	t.Parallel()
	c, err := New(Chars)
	require.NoError(t, err)
	require.Equal(t, c, Shared(c))
}

func TestCountCachesAreApartAndBounded(t *testing.T) {
	t.Parallel()
	base, err := New(O200kBase)
	require.NoError(t, err)
	inner := &countingCounter{Counter: base}
	long := strings.Repeat(fmt.Sprintf("line of %s with /src/file.go:42\n", t.Name()), 20)

	first, second := NewCountCache(2), NewCountCache(2)
	require.Equal(t, base.Count(long), first.Wrap(inner).Count(long))
	require.Equal(t, base.Count(long), first.Wrap(inner).Count(long))
	require.Equal(t, 1, inner.calls, "one cache counts a text once")
	second.Wrap(inner).Count(long)
	require.Equal(t, 2, inner.calls, "another cache (another worker's activities) counts it itself")

	// Two more texts push the first out of a cache of two.
	for i := range 2 {
		first.Wrap(inner).Count(long + strings.Repeat("x", 10*(i+1)))
	}
	first.Wrap(inner).Count(long)
	require.Equal(t, 5, inner.calls, "the oldest count was evicted")
	require.Equal(t, 2, first.recent.Len())
}
