package textcut

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var reMarker = regexp.MustCompile(`^\[… (\d+) (line|lines|chars) omitted …\]$`)

// requireExtract checks KeepLines's promises: bounded, and every line that
// is not a marker is a piece of one input line, in input order.
func requireExtract(t testing.TB, text string, target int, out string) {
	t.Helper()
	if target <= 0 {
		require.Empty(t, out)
		return
	}
	require.LessOrEqual(t, utf8.RuneCountInString(out), target, "output exceeds the target")
	if out == text || out == Truncate(text, target) {
		return
	}
	pos := 0
	for _, line := range strings.Split(out, "\n") {
		if reMarker.MatchString(line) {
			continue
		}
		i := strings.Index(text[pos:], line)
		require.GreaterOrEqual(t, i, 0, "output line %q is not a later substring of the input", line)
		pos += i + len(line)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "hé"},
		{"😀😀😀", 1, "😀"},
		{"hello", 0, ""},
		{"hello", -5, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Truncate(tt.text, tt.n), "Truncate(%q, %d)", tt.text, tt.n)
	}
}

func TestHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		n    int
		want string
	}{
		{"a\nb\nc", 2, "a\nb"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc\n", 3, "a\nb\nc"},
		{"a\nb", 10, "a\nb"},
		{"a\nb", 0, ""},
		{"", 2, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Head(tt.text, tt.n), "Head(%q, %d)", tt.text, tt.n)
	}
}

func TestExtractiveShortTextUnchanged(t *testing.T) {
	t.Parallel()
	text := "one line\ntwo lines"
	require.Equal(t, text, KeepLines(text, 100))
	require.Equal(t, text, KeepLines(text, utf8.RuneCountInString(text)))
	require.Empty(t, KeepLines(text, 0))
}

// logText is a 300-line log with one error and one decision in the middle.
func logText() string {
	var b strings.Builder
	b.WriteString("job 7781 started: python train.py --epochs 3\n")
	for i := 1; i <= 300; i++ {
		switch i {
		case 120:
			b.WriteString("ValueError: bad input in /srv/app/loader.py:42\n")
		case 200:
			b.WriteString("We decided to switch to the replica db-eu-2 and must rerun\n")
		default:
			fmt.Fprintf(&b, "INFO step %d processing batch %d ok\n", i, i*3)
		}
	}
	b.WriteString("job finished with exit status 1\n")
	return b.String()
}

func TestExtractiveKeepsInformativeLines(t *testing.T) {
	t.Parallel()
	text := logText()
	out := KeepLines(text, 300)
	requireExtract(t, text, 300, out)
	require.Contains(t, out, "ValueError: bad input in /srv/app/loader.py:42")
	require.Contains(t, out, "We decided to switch to the replica db-eu-2 and must rerun")
	require.True(t, strings.HasPrefix(out, "job 7781 started"), "first line kept")
	require.True(t, strings.HasSuffix(out, "job finished with exit status 1"), "last line kept")
	require.Regexp(t, `\[… \d+ lines omitted …\]`, out)
	require.Less(t, strings.Count(out, "INFO step"), 3, "near-duplicates are penalized")
}

func TestExtractiveMarkersCountLines(t *testing.T) {
	t.Parallel()
	text := strings.TrimSuffix(logText(), "\n")
	total := strings.Count(text, "\n") + 1
	for _, target := range []int{200, 500, 2000, 5000} {
		out := KeepLines(text, target)
		requireExtract(t, text, target, out)
		counted := 0
		for _, line := range strings.Split(out, "\n") {
			m := reMarker.FindStringSubmatch(line)
			if m == nil {
				counted++
				continue
			}
			require.NotEqual(t, "chars", m[2], "no line of this text is split")
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			counted += n
		}
		require.Equal(t, total, counted, "kept plus omitted lines must be all lines (target %d)", target)
	}
}

func TestExtractiveDeterministic(t *testing.T) {
	t.Parallel()
	text := logText()
	require.Equal(t, KeepLines(text, 700), KeepLines(text, 700))
}

func TestExtractiveSplitsLongLines(t *testing.T) {
	t.Parallel()
	// One line of minified JSON, no line breaks at all.
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&b, `{"id":"user_%04d","note":"plain text entry"},`, i*7)
	}
	b.WriteString(`{"id":"last"}]`)
	text := b.String()
	out := KeepLines(text, 1000)
	requireExtract(t, text, 1000, out)
	require.Regexp(t, `\[… \d+ chars omitted …\]`, out)
	require.Contains(t, out, `"last"`, "the end of the text is kept")
}

func TestExtractiveTinyTargetFallsBackToTruncate(t *testing.T) {
	t.Parallel()
	text := logText()
	require.Equal(t, Truncate(text, 10), KeepLines(text, 10))
}

func TestExtractiveProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(3))
	words := []string{"error", "the", "ValueError", "/etc/x.conf", "42 GB", "decided", "}", "+", "é", "日本", "https://a.b/c", ".", "  ", "\t"}
	for i := 0; i < 300; i++ {
		var b strings.Builder
		for n := r.Intn(3000); b.Len() < n; {
			b.WriteString(words[r.Intn(len(words))])
			switch r.Intn(6) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString(". ")
			default:
				b.WriteString(" ")
			}
		}
		text := b.String()
		target := 1 + r.Intn(800)
		requireExtract(t, text, target, KeepLines(text, target))
	}
}

func FuzzExtractive(f *testing.F) {
	f.Add("first line\nsecond ValueError\nthird\n", 15)
	f.Add(logText(), 250)
	f.Add("a. b. c. d. e. f. g. h. i. j. k. l. m. n. o.", 5)
	f.Add("\n\n\n\xff\xfe\n😀😀\r\n", 3)
	f.Fuzz(func(t *testing.T, text string, target int) {
		if target > 1<<20 {
			target = 1 << 20
		}
		requireExtract(t, text, target, KeepLines(text, target))
	})
}
