package audit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200)
	tests := []struct {
		name, text, query string
		matches           int
		excerpt           string
	}{
		{"case-insensitive", "The ERROR was here", "error", 1, "The ERROR was here"},
		{"counts every match", "a needle, a Needle, a NEEDLE", "needle", 3, "a needle, a Needle, a NEEDLE"},
		{"unicode folding", "STRASSE Ärger", "ärger", 1, "STRASSE Ärger"},
		{"cut on both sides", long + "needle" + long, "needle", 1, "…" + strings.Repeat("é", 120) + "needle" + strings.Repeat("é", 120) + "…"},
		{"regexp characters are literal", "a.b a+b", "a+b", 1, "a.b a+b"},
		{"no match", "nothing here", "needle", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, ok := find(regexp.MustCompile("(?i)"+regexp.QuoteMeta(tc.query)), tc.text)
			require.Equal(t, tc.matches > 0, ok)
			require.Equal(t, tc.matches, h.Matches)
			require.Equal(t, tc.excerpt, h.Excerpt)
		})
	}
}

func TestSearchArchiveNamesMessages(t *testing.T) {
	t.Parallel()
	data := openai(t, msg("system", "You are careful."), call("Checking.", "c1", `{"path":"/etc/Needle.conf"}`),
		result("c1", "needle found"), msg("assistant", "no match here"))
	hits := searchArchive(regexp.MustCompile("(?i)needle"), data)
	require.Len(t, hits, 2)
	require.Equal(t, 1, hits[0].Message, "tool inputs are searched")
	require.Equal(t, 2, hits[1].Message)

	raw := searchArchive(regexp.MustCompile("(?i)needle"), []byte("not a conversation, but a needle"))
	require.Len(t, raw, 1)
	require.Equal(t, -1, raw[0].Message)
}

// TestSearchArchiveNamesCallerPositions: in an Anthropic original with a
// top-level system prompt, a hit names the message by its place in the
// caller's messages[] (the system prompt is "-1"), while its recovery
// position stays the parsed one.
func TestSearchArchiveNamesCallerPositions(t *testing.T) {
	t.Parallel()
	data := []byte(`{"model":"claude-sonnet-4-5","system":"You are careful with the needle.","messages":[` +
		`{"role":"user","content":"find the needle"},{"role":"assistant","content":"no match here"},{"role":"user","content":"another needle"}]}`)
	hits := searchArchive(regexp.MustCompile("needle"), data)
	require.Len(t, hits, 3)
	require.Equal(t, []int{-1, 0, 2}, []int{hits[0].Message, hits[1].Message, hits[2].Message})
	require.Equal(t, []int{0, 1, 3}, []int{hits[0].canon, hits[1].canon, hits[2].canon})
}

// TestFindCountsWithoutListingEveryMatch: issue 20's one-letter query over
// a huge result. The matches counted stop at MaxCountedMatches (the hit
// says so) and counting does not build the list of every match: a few
// allocations per counted match, whatever the text holds.
func TestFindCountsWithoutListingEveryMatch(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses parallel tests.
	text := strings.Repeat("a", 4<<20)
	re := regexp.MustCompile("(?i)a")
	h, ok := find(re, text)
	require.True(t, ok)
	require.Equal(t, MaxCountedMatches, h.Matches)
	require.True(t, h.MatchesCapped)
	allocs := testing.AllocsPerRun(2, func() { _, _ = find(re, text) })
	require.Less(t, allocs, float64(4*MaxCountedMatches), "no list of all 4 million matches")

	few, ok := find(regexp.MustCompile("(?i)needle"), "a needle, another NEEDLE")
	require.True(t, ok)
	require.Equal(t, 2, few.Matches)
	require.False(t, few.MatchesCapped)
}
