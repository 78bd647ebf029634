package pricing

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFor(t *testing.T) {
	t.Parallel()
	tab := Defaults()
	for _, tc := range []struct {
		model string
		input float64
		found bool
	}{
		{"gpt-4o", 2.50, true},
		{"gpt-4o-mini-2024-07-18", 0.15, true},
		{"claude-opus-4-5-20251101", 5, true},
		{"claude-opus-4-1", 15, true},
		{"Claude-Sonnet-4-5", 3, true},
		{"my-local-model", 0, false},
	} {
		p, ok := tab.For(tc.model)
		require.Equal(t, tc.found, ok, tc.model)
		require.Equal(t, tc.input, p.Input, tc.model)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tab, err := Parse(`{"my-model": {"input": 1, "cache_write": 1.25, "cache_read": 0.1, "output": 5}}`)
	require.NoError(t, err)
	p, ok := tab.For("my-model-v2")
	require.True(t, ok)
	require.Equal(t, 0.1, p.CacheRead)
	_, ok = tab.For("gpt-4o")
	require.True(t, ok, "the defaults stay")
	for _, bad := range []string{`[1]`, `{"m": {"inptu": 1}}`, `{"m": {"input": -1}}`, `{"": {}}`} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

// TestSaving: a compaction that keeps its prefix saves over the next
// turns; one that re-writes everything for little shed costs more than it
// saves over a short horizon; the summarizer's cost is subtracted.
func TestSaving(t *testing.T) {
	t.Parallel()
	claude := Defaults()["claude-sonnet-4"]
	mini := Defaults()["gpt-4o-mini"]
	good := Run{Before: 16000, After: 10000, Prefix: 8000, Rewrite: 2000, SummarizerIn: 6000, SummarizerOut: 800}
	s, sum := Saving(good, claude, mini, 10)
	require.Greater(t, sum, 0.0)
	require.Greater(t, s, 0.0)
	bad := Run{Before: 16000, After: 15500, Prefix: 1000, Rewrite: 14500, SummarizerIn: 14000, SummarizerOut: 800}
	s, _ = Saving(bad, claude, mini, 2)
	require.Less(t, s, 0.0)
}
