package tokens

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultLimitsFor(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	cases := []struct {
		model string
		want  int
	}{
		{"gpt-4o", 128000},
		{"gpt-4o-mini", 128000},
		{"gpt-4.1", 1047576},
		{"gpt-4.1-mini", 1047576},
		{"gpt-5", 400000},
		{"gpt-4", 8192},
		{"gpt-4-0613", 8192},
		{"gpt-4-32k", 32768},
		{"gpt-4-turbo-2024-04-09", 128000},
		{"gpt-3.5-turbo", 16385},
		{"o1", 200000},
		{"o1-mini", 128000},
		{"o3-mini", 200000},
		{"o4-mini", 200000},
		{"claude-opus-4-1", 200000},
		{"deepseek-chat", 128000},
		{"deepseek-reasoner", 128000},
		{"gemini-3-pro-preview", 1048576},
		{"Gemini-2.5-Flash", 1048576},
		{"openai/gpt-4o", 128000},
		{"llama-3.1-70b", DefaultContextLimit},
		{"", DefaultContextLimit},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, l.For(tc.model), tc.model)
	}
}

func TestDefaultLimitsIsFresh(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	l.Windows["gpt-4o"] = 1
	l.Factors["claude"] = 2
	require.Equal(t, 128000, DefaultLimits().For("gpt-4o"))
	f, _ := DefaultLimits().Factor("claude-3")
	require.Equal(t, 1.25, f)
}

func TestLimitsLongestPrefixAndCatchAll(t *testing.T) {
	t.Parallel()
	l := Limits{Windows: map[string]int{"my": 1000, "my-model": 2000, "MY-MODEL-BIG": 3000}}
	require.Equal(t, 1000, l.For("my-other"))
	require.Equal(t, 2000, l.For("my-model-small"))
	require.Equal(t, 3000, l.For("my-model-big-v2"))
	require.Equal(t, DefaultContextLimit, l.For("other"))
	l.Windows[""] = 42
	require.Equal(t, 42, l.For("other"))
	require.Equal(t, DefaultContextLimit, Limits{}.For("gpt-4o"))
}

func TestLimitsMerge(t *testing.T) {
	t.Parallel()
	over, err := ParseLimits("gpt-4o=64000,my-model=32000")
	require.NoError(t, err)
	def := DefaultLimits()
	l := def.Merge(over)
	require.Equal(t, 64000, l.For("gpt-4o-mini"))
	require.Equal(t, 32000, l.For("my-model"))
	require.Equal(t, 200000, l.For("claude-3"))
	require.Equal(t, 128000, def.For("gpt-4o"), "Merge must not change its receiver")
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Limits
	}{
		{"", Limits{Windows: map[string]int{}}},
		{"  ", Limits{Windows: map[string]int{}}},
		{"gpt-4o=128000", Limits{Windows: map[string]int{"gpt-4o": 128000}}},
		{"gpt-4o=128000,my-model=32000", Limits{Windows: map[string]int{"gpt-4o": 128000, "my-model": 32000}}},
		{" gpt-4o = 128000 , my-model=32000 ", Limits{Windows: map[string]int{"gpt-4o": 128000, "my-model": 32000}}},
	}
	for _, tc := range cases {
		got, err := ParseLimits(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseLimitsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in       string
		mentions []string
	}{
		{"gpt-4o", []string{"entry 1", `"gpt-4o"`, "model=tokens"}},
		{"gpt-4o=128000,my-model", []string{"entry 2", `"my-model"`}},
		{"=5", []string{"entry 1", "empty model name"}},
		{"a=1,b=abc", []string{"entry 2", `"b=abc"`, `"abc"`, "positive integer"}},
		{"a=0", []string{"entry 1", "positive integer"}},
		{"a=-5", []string{"entry 1", `"-5"`}},
		{"a=1.5", []string{"entry 1", `"1.5"`}},
		{"a=1,,b=2", []string{"entry 2"}},
		{"a=1,", []string{"entry 2"}},
		{"a=1,A=2", []string{"entry 2", "already given"}},
	}
	for _, tc := range cases {
		got, err := ParseLimits(tc.in)
		require.Error(t, err, tc.in)
		require.Zero(t, got, tc.in)
		for _, m := range tc.mentions {
			require.Contains(t, err.Error(), m, tc.in)
		}
	}
}
