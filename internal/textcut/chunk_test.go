package textcut

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// requireChunksValid checks the two promises of Chunk: lossless and
// bounded, with every chunk valid UTF-8 wherever the text is.
func requireChunksValid(t testing.TB, text string, maxChars int, chunks []string) {
	t.Helper()
	require.Equal(t, text, strings.Join(chunks, ""), "chunks must concatenate to the text")
	for i, c := range chunks {
		require.NotEmpty(t, c, "chunk %d is empty", i)
		require.LessOrEqual(t, utf8.RuneCountInString(c), maxChars, "chunk %d too long", i)
		if utf8.ValidString(text) {
			require.True(t, utf8.ValidString(c), "chunk %d splits a UTF-8 sequence", i)
		}
	}
}

func TestChunkBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		text     string
		maxChars int
		want     []string
	}{
		{
			name:     "fits in one chunk",
			text:     "short text",
			maxChars: 50,
			want:     []string{"short text"},
		},
		{
			name:     "paragraph preferred over a later line break",
			text:     "aaaa aaaa\n\nbbbb\ncccc dddd",
			maxChars: 18,
			want:     []string{"aaaa aaaa\n\n", "bbbb\ncccc dddd"},
		},
		{
			name:     "CRLF blank line counts as a paragraph",
			text:     "aaaa aaaa\r\n\r\nbbbb\ncccc dddd",
			maxChars: 19,
			want:     []string{"aaaa aaaa\r\n\r\n", "bbbb\ncccc dddd"},
		},
		{
			name:     "line break when no paragraph fits",
			text:     "line one\nline two\nline three",
			maxChars: 20,
			want:     []string{"line one\nline two\n", "line three"},
		},
		{
			name:     "sentence end over a later space",
			text:     "One two. Three four five six",
			maxChars: 16,
			want:     []string{"One two. ", "Three four five ", "six"},
		},
		{
			name:     "whitespace when there is no sentence end",
			text:     "alpha beta gamma delta",
			maxChars: 12,
			want:     []string{"alpha beta ", "gamma delta"},
		},
		{
			name:     "hard cut without any boundary",
			text:     "abcdefghij",
			maxChars: 4,
			want:     []string{"abcd", "efgh", "ij"},
		},
		{
			name:     "hard cut counts code points, not bytes",
			text:     "ééééé",
			maxChars: 2,
			want:     []string{"éé", "éé", "é"},
		},
		{
			name:     "emoji are never split",
			text:     "😀😀😀",
			maxChars: 2,
			want:     []string{"😀😀", "😀"},
		},
		{
			name:     "minified JSON cuts after an element",
			text:     `[{"a":1},{"b":2},{"c":3}]`,
			maxChars: 20,
			want:     []string{`[{"a":1},{"b":2},`, `{"c":3}]`},
		},
		{
			name:     "JSON commas inside strings are not boundaries",
			text:     `[{"a":"},x"},{"b":2}]`,
			maxChars: 14,
			want:     []string{`[{"a":"},x"},`, `{"b":2}]`},
		},
		{
			name:     "a boundary in the first half is ignored",
			text:     "a\nbcdefghijklmnop",
			maxChars: 8,
			want:     []string{"a\nbcdefg", "hijklmno", "p"},
		},
		{
			name:     "empty text gives no chunks",
			text:     "",
			maxChars: 5,
			want:     nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Chunk(tt.text, tt.maxChars)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			requireChunksValid(t, tt.text, tt.maxChars, got)
		})
	}
}

func TestChunkRejectsBadSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		_, err := Chunk("text", n)
		require.ErrorIs(t, err, ErrBadSize)
		require.ErrorContains(t, err, "maxChars")
	}
}

func TestChunkJSONDepthLimit(t *testing.T) {
	t.Parallel()
	// The only "}," is at depth 3, so Chunk must not use it.
	text := `{"a":{"b":{"c":{"d":1},"e":2}}}`
	got, err := Chunk(text, 20)
	require.NoError(t, err)
	requireChunksValid(t, text, 20, got)
	require.NotEqual(t, `{"a":{"b":{"c":{"d":1},`, got[0])
}

func TestChunkReactTwoLayerSizes(t *testing.T) {
	t.Parallel()
	// The ReAct two-layer design: a 150K result in 50K chunks gives 3 chunks.
	para := strings.Repeat("word ", 199) + "end.\n\n"
	text := strings.Repeat(para, 150_000/len(para)+1)
	chunks, err := Chunk(text, 50_000)
	require.NoError(t, err)
	requireChunksValid(t, text, 50_000, chunks)
	require.Len(t, chunks, (len(text)+49_999)/50_000)
	for _, c := range chunks[:len(chunks)-1] {
		require.True(t, strings.HasSuffix(c, "\n\n"), "chunks end on paragraphs")
	}
}

// randomText builds texts mixing the boundaries Chunk knows about, multi-byte
// runes and, sometimes, invalid UTF-8.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{"a", "bc", " ", "\n", "\n\n", "\r\n", ". ", "! ", "é", "日本", "😀", "},", "],", `"`, "{", "[", "\t", "\xff", "word", "x,y"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[r.Intn(len(pieces))])
	}
	return b.String()
}

func TestChunkProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		text := randomText(r, r.Intn(2000))
		if r.Intn(4) == 0 {
			text = "[" + text
		}
		maxChars := 1 + r.Intn(200)
		chunks, err := Chunk(text, maxChars)
		require.NoError(t, err)
		requireChunksValid(t, text, maxChars, chunks)
		// At least half full, except the last: at most about twice the
		// minimal number of chunks.
		minimal := (utf8.RuneCountInString(text) + maxChars - 1) / maxChars
		require.LessOrEqual(t, len(chunks), 2*minimal+1)
	}
}

func FuzzChunk(f *testing.F) {
	f.Add("hello world", 3)
	f.Add("para one\n\npara two\nline", 10)
	f.Add(`[{"a":1},{"b":"},"}]`, 7)
	f.Add("ééé😀\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, text string, maxChars int) {
		chunks, err := Chunk(text, maxChars)
		if maxChars <= 0 {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		requireChunksValid(t, text, maxChars, chunks)
	})
}
