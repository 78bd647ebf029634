package llm

import (
	"encoding/json"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONTextIsEncodingJSONs: the text sent in place of the placeholder
// is what json.Marshal writes for it, byte for byte, however it is cut
// into pieces, and its announced length is its length: HTML characters,
// control characters, quotes, U+2028/U+2029, invalid UTF-8, runes of
// every width.
func TestJSONTextIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	pieces := []string{"a", "Z", " ", "<", ">", "&", `"`, `\`, "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "日本", "😀", "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xe2\x80", "\xf0\x9f\x98", "\xed\xa0\x80", "</script>"}
	r := rand.New(rand.NewSource(9))
	texts := []string{"", "plain", strings.Repeat("x", 100000), strings.Repeat("é<\n", 30000)}
	for range 3000 {
		var sb strings.Builder
		for n := r.Intn(30); n >= 0; n-- {
			sb.WriteString(pieces[r.Intn(len(pieces))])
		}
		texts = append(texts, sb.String())
	}
	for _, s := range texts {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		want = want[1 : len(want)-1]
		require.Equal(t, len(want), jsonTextLen(s), "%q", s)
		for _, limit := range []int{1, 2, 5, 7, jsonTextChunk} {
			var got []byte
			for i := 0; i < len(s); {
				before := len(got)
				got, i = appendJSONText(got, s, i, limit)
				require.Greater(t, len(got), before, "progress at %d", i)
			}
			require.Equal(t, string(want), string(got), "%q in pieces of %d", s, limit)
		}
		read, err := io.ReadAll(&jsonTextReader{s: s})
		require.NoError(t, err)
		require.Equal(t, string(want), string(read), "%q", s)
	}
}
