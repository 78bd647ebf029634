package tokens

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultFactorsFor(t *testing.T) {
	t.Parallel()
	f := DefaultFactors()
	cases := []struct {
		model  string
		want   float64
		prefix string
	}{
		{"claude-sonnet-4", 1.25, "claude"},
		{"Claude-3-5-Sonnet-20241022", 1.25, "claude"},
		{"anthropic/claude-opus-4-1", 1.25, "claude"},
		{"gemini-2.5-pro", 1.15, "gemini"},
		{"models/Gemini-2.5-Flash", 1.15, "gemini"},
		{"deepseek-chat", 1.15, "deepseek"},
		{"deepseek-ai/DeepSeek-V3", 1.15, "deepseek"},
		{"gpt-4o", 1, "gpt-"},
		{"gpt-4o-mini", 1, "gpt-"},
		{"gpt-4-turbo", 1, "gpt-"},
		{"gpt-3.5-turbo", 1, "gpt-"},
		{"GPT-5", 1, "gpt-"},
		{"openai/gpt-4.1", 1, "gpt-"},
		{"ft:gpt-4o-mini:org::id", 1, "gpt-"},
		{"chatgpt-4o-latest", 1, "chatgpt"},
		{"o1-mini", 1, "o1"},
		{"o3", 1, "o3"},
		{"o4-mini", 1, "o4"},
		{"text-embedding-3-small", 1, "text-embedding"},
		{"llama-3.1-70b", DefaultFactor, ""},
		{"mistral-large", DefaultFactor, ""},
		{"", DefaultFactor, ""},
	}
	for _, tc := range cases {
		got, prefix := f.For(tc.model)
		require.Equal(t, tc.want, got, tc.model)
		require.Equal(t, tc.prefix, prefix, tc.model)
	}
}

func TestFactorsLongestPrefixCaseAndRounding(t *testing.T) {
	t.Parallel()
	f := Factors{"claude": 1.25, "CLAUDE-3-HAIKU": 1.1, "my": 2, "x": 1.1, "X": 1.2, "fine": 1.2344}
	cases := []struct {
		model  string
		want   float64
		prefix string
	}{
		{"claude-3-haiku-20240307", 1.1, "CLAUDE-3-HAIKU"},
		{"claude-3-opus", 1.25, "claude"},
		{"My-Model", 2, "my"},
		{"x-model", 1.2, "X"}, // keys equal but for case: the safer factor
		{"fine-tuned", 1.234, "fine"},
		{"other", DefaultFactor, ""},
	}
	for _, tc := range cases {
		got, prefix := f.For(tc.model)
		require.Equal(t, tc.want, got, tc.model)
		require.Equal(t, tc.prefix, prefix, tc.model)
	}
	got, _ := Factors(nil).For("gpt-4o")
	require.Equal(t, DefaultFactor, got, "an empty table gives every model the default")
}

func TestLimitsFactor(t *testing.T) {
	t.Parallel()
	got, prefix := Limits{}.Factor("claude-sonnet-4")
	require.Equal(t, 1.25, got, "nil Factors are the defaults")
	require.Equal(t, "claude", prefix)
	got, _ = Limits{}.Factor("gpt-4o")
	require.Equal(t, 1.0, got)
	got, _ = Limits{Factors: Factors{"claude": 1.5}}.Factor("claude-3")
	require.Equal(t, 1.5, got)
}

func TestLimitsMergeFactors(t *testing.T) {
	t.Parallel()
	windows, err := ParseLimits("my-model=32000")
	require.NoError(t, err)
	factors, err := ParseFactors("claude=1.3,my-model=1.05")
	require.NoError(t, err)
	def := DefaultLimits()

	l := def.Merge(windows)
	got, _ := l.Factor("claude-3")
	require.Equal(t, 1.25, got, "MODEL_CONTEXT_LIMITS alone keeps the built-in factors")

	l = def.Merge(windows).Merge(Limits{Factors: factors})
	require.Equal(t, 32000, l.For("my-model"), "the windows survive")
	for model, want := range map[string]float64{"claude-3": 1.3, "my-model-2": 1.05, "gemini-2.5-pro": 1.15, "gpt-4o": 1} {
		got, _ := l.Factor(model)
		require.Equal(t, want, got, model)
	}
	got, _ = def.Factor("claude-3")
	require.Equal(t, 1.25, got, "Merge must not change its receiver")

	l = Limits{}.Merge(Limits{Factors: factors})
	for model, want := range map[string]float64{"claude-3": 1.3, "gemini-2.5-pro": 1.15, "gpt-4o": 1} {
		got, _ := l.Factor(model)
		require.Equal(t, want, got, "a nil side counts as the defaults: %s", model)
	}
	require.Nil(t, Limits{}.Merge(windows).Factors, "no factors on either side: still the defaults")
}

func TestParseFactors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Factors
	}{
		{"", Factors{}},
		{"  ", Factors{}},
		{"claude=1.3", Factors{"claude": 1.3}},
		{" claude = 1.3 , my-model=1 ", Factors{"claude": 1.3, "my-model": 1}},
		{"a=1.0,b=3", Factors{"a": 1, "b": 3}},
	}
	for _, tc := range cases {
		got, err := ParseFactors(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseFactorsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in       string
		mentions []string
	}{
		{"claude", []string{"entry 1", `"claude"`, "model=factor"}},
		{"claude=1.3,gemini", []string{"entry 2", `"gemini"`}},
		{"=1.2", []string{"entry 1", "empty model name"}},
		{"a=1.1,b=abc", []string{"entry 2", `"b=abc"`, `"abc"`, "not a number from 1 to 3"}},
		{"a=0.9", []string{"entry 1", `"0.9"`, "from 1 to 3"}},
		{"a=3.5", []string{"entry 1", `"3.5"`, "from 1 to 3"}},
		{"a=-1.2", []string{"entry 1", `"-1.2"`}},
		{"a=12", []string{"entry 1", `"12"`}},
		{"a=NaN", []string{"entry 1", `"NaN"`}},
		{"a=Inf", []string{"entry 1", `"Inf"`}},
		{"a=1.2,", []string{"entry 2"}},
		{"a=1.2,A=1.3", []string{"entry 2", "already given"}},
	}
	for _, tc := range cases {
		got, err := ParseFactors(tc.in)
		require.Error(t, err, tc.in)
		require.Nil(t, got, tc.in)
		require.Contains(t, err.Error(), "parse factors", tc.in)
		for _, m := range tc.mentions {
			require.Contains(t, err.Error(), m, tc.in)
		}
	}
}

// fixedCounter counts bytes, under the name of an encoding, so that the
// raw counts of a test are known.
type fixedCounter struct{ name string }

func (f fixedCounter) Count(s string) int { return len(s) }
func (f fixedCounter) Name() string       { return f.name }

func TestScaleRoundsUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw    int
		factor float64
		want   int
	}{
		{0, 1.25, 0},
		{1, 1.25, 2},
		{4, 1.25, 5},
		{5, 1.25, 7},
		{10, 1.1, 11}, // 10 × 1.1 is 11.000000000000002 in floating point
		{100, 1.15, 115},
		{101, 1.15, 117},
		{1000, 1.001, 1001},
		{3, 3, 9},
	}
	for _, tc := range cases {
		c, err := Scale(fixedCounter{name: O200kBase}, tc.factor, "m")
		require.NoError(t, err)
		require.Equal(t, tc.want, c.Count(strings.Repeat("x", tc.raw)), "%d × %g", tc.raw, tc.factor)
	}
}

func TestScaleO200kAndName(t *testing.T) {
	t.Parallel()
	o200k, err := New(O200kBase)
	require.NoError(t, err)
	text := strings.Repeat("func (s *Server) Handle(w http.ResponseWriter) error { return nil }\n", 7)
	raw := o200k.Count(text)

	claude, err := Scale(o200k, 1.25, "claude")
	require.NoError(t, err)
	require.Equal(t, (raw*5+3)/4, claude.Count(text), "ceil(raw × 5/4)")
	require.Equal(t, "o200k_base×1.25 (claude)", claude.Name())

	unknown, err := Scale(o200k, DefaultFactor, "")
	require.NoError(t, err)
	require.Equal(t, "o200k_base×1.15 (default)", unknown.Name())

	cl100k, err := New(Cl100kBase)
	require.NoError(t, err)
	double, err := Scale(cl100k, 2, "x")
	require.NoError(t, err)
	require.Equal(t, "cl100k_base×2 (x)", double.Name())
	require.Equal(t, 2*cl100k.Count(text), double.Count(text))
}

func TestScaleLeavesExactCountersAlone(t *testing.T) {
	t.Parallel()
	o200k, err := New(O200kBase)
	require.NoError(t, err)
	got, err := Scale(o200k, 1, "gpt-")
	require.NoError(t, err)
	require.Equal(t, o200k, got, "factor 1: the counter itself, named as before")

	chars, err := New(Chars)
	require.NoError(t, err)
	got, err = Scale(chars, 1.25, "claude")
	require.NoError(t, err)
	require.Equal(t, chars, got, "characters are never scaled")
	require.Equal(t, Chars, got.Name())
	require.Equal(t, 5, got.Count("héllo"))
}

func TestScaleRejectsFactorsOutOfRange(t *testing.T) {
	t.Parallel()
	o200k, err := New(O200kBase)
	require.NoError(t, err)
	for _, f := range []float64{0, 0.5, 0.999, 3.01, 12} {
		_, err := Scale(o200k, f, "m")
		require.Error(t, err, "%g", f)
		require.Contains(t, err.Error(), `"m"`, "%g", f)
	}
}

// TestScaledCountsDoNotMixInTheCache: budgets of a Claude and a GPT model
// share one cache of raw counts, and neither reads the other's margin,
// whichever counts a text first; a cache wrapped around a scaled counter
// keys its counts by the scaled name.
func TestScaledCountsDoNotMixInTheCache(t *testing.T) {
	t.Parallel()
	o200k, err := New(O200kBase)
	require.NoError(t, err)
	inner := &countingCounter{Counter: o200k}
	cc := NewCountCache(16)
	claude, err := Scale(cc.Wrap(inner), 1.25, "claude")
	require.NoError(t, err)
	gpt, err := Scale(cc.Wrap(inner), 1, "gpt-")
	require.NoError(t, err)

	for i, claudeFirst := range []bool{true, false} {
		text := strings.Repeat(fmt.Sprintf("%s line %d with /src/file.go:42\n", t.Name(), i), 20)
		raw := o200k.Count(text)
		scaled := (raw*5 + 3) / 4
		require.Greater(t, scaled, raw)
		if claudeFirst {
			require.Equal(t, scaled, claude.Count(text))
			require.Equal(t, raw, gpt.Count(text))
		} else {
			require.Equal(t, raw, gpt.Count(text))
			require.Equal(t, scaled, claude.Count(text))
		}
		require.Equal(t, i+1, inner.calls, "the raw count is cached once and shared")
	}

	text := strings.Repeat(t.Name()+" outer cache\n", 20)
	raw := o200k.Count(text)
	outer := NewCountCache(16)
	claudeOnly, err := Scale(o200k, 1.25, "claude")
	require.NoError(t, err)
	require.Equal(t, (raw*5+3)/4, outer.Wrap(claudeOnly).Count(text))
	require.Equal(t, raw, outer.Wrap(o200k).Count(text), "keyed by the counter's name: no scaled count read back")
}
