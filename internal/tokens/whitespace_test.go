package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveBytePairCount is tiktoken's merge loop as written in its reference
// implementation: rescan for the lowest-ranked pair, leftmost on ties.
func naiveBytePairCount(piece string, ranks map[string]int) int {
	parts := make([]string, len(piece))
	for i := range piece {
		parts[i] = piece[i : i+1]
	}
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := ranks[parts[i]+parts[i+1]]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			return len(parts)
		}
		parts[at] += parts[at+1]
		parts = append(parts[:at+1], parts[at+2:]...)
	}
}

func TestBytePairCount(t *testing.T) {
	t.Parallel()
	ranks := map[string]int{"a": 0, "b": 1, "aa": 2, "ab": 3, "abab": 5, "aab": 6}
	cases := []struct {
		piece string
		want  int
	}{
		{"", 0},
		{"a", 1},
		{"aa", 1},
		{"aaa", 2}, // leftmost "aa" merges first; "aaa" is no token
		{"abab", 1},
		{"ba", 2},
		{"aab", 1},  // "aa" (rank 2) beats "ab" (rank 3), then "aab"
		{"baab", 2}, // "b", "aab"
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, bytePairCount(tc.piece, ranks), tc.piece)
		require.Equal(t, tc.want, naiveBytePairCount(tc.piece, ranks), tc.piece)
	}
}

// TestBytePairCountMatchesNaive compares the heap merge with the rescanning
// loop on random pieces and random rank tables.
func TestBytePairCountMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	const alphabet = "ab \n"
	for range 300 {
		ranks := map[string]int{}
		for i, c := range alphabet {
			ranks[string(c)] = i
		}
		for len(ranks) < 30 {
			n := 2 + rng.IntN(4)
			var sb strings.Builder
			for range n {
				sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			if _, ok := ranks[sb.String()]; !ok {
				ranks[sb.String()] = len(ranks)
			}
		}
		var sb strings.Builder
		for range rng.IntN(60) {
			sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		p := sb.String()
		require.Equal(t, naiveBytePairCount(p, ranks), bytePairCount(p, ranks), "%q", p)
	}
}

// TestWhitespaceRanksLoaded checks that the ranks read back from the
// library hold the single bytes and the blank-line tokens tiktoken uses
// ("\n \n" is token 27907 in cl100k_base, 47812 in o200k_base).
func TestWhitespaceRanksLoaded(t *testing.T) {
	t.Parallel()
	for name, id := range map[string]int{Cl100kBase: 27907, O200kBase: 47812} {
		c := mustNew(t, name).(*bpeCounter)
		ranks := c.spaceRanks()
		require.NotNil(t, ranks, name)
		require.Equal(t, id, ranks["\n \n"], name)
		for _, b := range []string{" ", "\n", "\t", "\r", "\xc2", "\xa0"} {
			require.Contains(t, ranks, b, "%s byte %q", name, b)
		}
	}
}
