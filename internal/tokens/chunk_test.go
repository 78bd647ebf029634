package tokens

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// realText is every string of the repository's real conversations
// (testdata/conversations, see its README), joined with line breaks.
func realText(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/conversations/*/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "testdata/conversations is missing")
	var parts []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			parts = append(parts, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(data, &v), f)
		walk(v)
	}
	return strings.Join(parts, "\n")
}

// TestChunkedCountEqualsWholeCount: cutting at piece boundaries changes
// no count, on megabytes of real agent text in both encodings, and on
// texts with no boundary at all.
func TestChunkedCountEqualsWholeCount(t *testing.T) {
	t.Parallel()
	text := realText(t)
	require.Greater(t, len(text), 4*chunkBytes, "enough text for several chunks")
	for _, enc := range []string{O200kBase, Cl100kBase} {
		c, err := New(enc)
		require.NoError(t, err)
		b := c.(*bpeCounter)
		parts := 0
		chunked := countChunked(text, func(s string) int { parts++; return b.countLibraryPart(s) })
		require.Greater(t, parts, 4, "%s: the text was cut", enc)
		require.Equal(t, b.countLibraryPart(text), chunked, "%s", enc)
		for _, odd := range []string{
			strings.Repeat("é", chunkBytes),           // no ASCII boundary: one part
			strings.Repeat("ab\n1.", chunkBytes/2),    // boundaries after every line break
			strings.Repeat("word ", chunkBytes/2),     // boundaries before every space
			strings.Repeat("x \n\n  y", chunkBytes/3), // whitespace pieces
		} {
			require.Equal(t, b.countLibraryPart(odd), countChunked(odd, b.countLibraryPart), "%s: %.20q", enc, odd)
		}
	}
}
