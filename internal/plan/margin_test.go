package plan

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// TestBudgetCounterAndMarginByModel: every model's budget names its
// counter with the margin, and reports the factor.
func TestBudgetCounterAndMarginByModel(t *testing.T) {
	t.Parallel()
	p := preset(t, policy.Adaptive, "")
	cases := []struct {
		model    string
		encoding string
		name     string
		factor   float64
	}{
		{"gpt-4o", "o200k_base", "o200k_base", 1},
		{"gpt-4", "cl100k_base", "cl100k_base", 1},
		{"o3-mini", "o200k_base", "o200k_base", 1},
		{"claude-sonnet-4", "o200k_base", "o200k_base×1.25 (claude)", 1.25},
		{"anthropic/Claude-Opus-4-1", "o200k_base", "o200k_base×1.25 (claude)", 1.25},
		{"gemini-2.5-pro", "o200k_base", "o200k_base×1.15 (gemini)", 1.15},
		{"deepseek-chat", "o200k_base", "o200k_base×1.15 (deepseek)", 1.15},
		{"llama-3.1-70b", "o200k_base", "o200k_base×1.15 (default)", 1.15},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			b, err := NewBudget(p, tc.model, 0, tokens.DefaultLimits())
			require.NoError(t, err)
			require.Equal(t, tc.encoding, b.Encoding)
			require.Equal(t, tc.name, b.CounterName())
			require.Equal(t, tc.name, b.Counter.Name())
			require.Equal(t, tc.factor, b.Factor)
			require.Equal(t, tc.factor, b.Margin())
		})
	}
	require.Equal(t, 1.0, Budget{Limit: 10}.Margin(), "a Budget built by hand has no margin")
}

// TestClaudeBudgetMeasuresMore: the same conversation measures about a
// quarter more for Claude than for gpt-4o, so a size that fits gpt-4o's
// limit can be over Claude's with the margin.
func TestClaudeBudgetMeasuresMore(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.Adaptive, "")
	gpt, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	claude, err := NewBudget(p, "claude-sonnet-4", 0, tokens.DefaultLimits())
	require.NoError(t, err)

	g, c := gpt.Measure(conv), claude.Measure(conv)
	require.Greater(t, c, g)
	// Not exactly 1.25: each text is rounded up on its own, and the chat
	// framing constants are not scaled.
	require.InDelta(t, 1.25, float64(c)/float64(g), 0.03, "gpt-4o %d, claude %d", g, c)

	gpt.Limit, claude.Limit = g, g
	require.False(t, gpt.Over(g), "fits gpt-4o exactly")
	require.True(t, claude.Over(c), "the same conversation is over the same limit for Claude")
	require.Contains(t, OverLimitReason(conv, p, claude, true, false), "(o200k_base×1.25 (claude))", "the reason names the margin")
}

func TestBudgetFactorsFromLimits(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.Adaptive, "")
	limits := tokens.DefaultLimits().Merge(tokens.Limits{Factors: tokens.Factors{"claude": 1.5, "my-model": 1}})
	b, err := NewBudget(p, "claude-3-opus", 0, limits)
	require.NoError(t, err)
	require.Equal(t, "o200k_base×1.5 (claude)", b.CounterName())
	require.Equal(t, 200000, b.Limit, "the windows come with the factors")

	mine, err := NewBudget(p, "my-model", 0, limits)
	require.NoError(t, err)
	raw, err := NewBudget(p, "gpt-4o", 0, limits)
	require.NoError(t, err)
	require.Equal(t, "o200k_base", mine.CounterName(), "factor 1: exact counts")
	require.Equal(t, raw.Measure(conv), mine.Measure(conv))

	def, err := NewBudget(p, "claude-3-opus", 0, tokens.Limits{})
	require.NoError(t, err)
	require.Equal(t, 1.25, def.Factor, "Limits without factors keep the built-in ones")

	_, err = NewBudget(p, "claude-3-opus", 0, tokens.Limits{Factors: tokens.Factors{"claude": 5}})
	require.ErrorContains(t, err, "claude-3-opus")
}

// TestCharsBudgetHasNoMargin: the ReAct two-layer design counts characters, which are exact
// whatever the model.
func TestCharsBudgetHasNoMargin(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.ReactTwoLayer, "")
	gpt, err := NewBudget(p, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	claude, err := NewBudget(p, "claude-sonnet-4", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, tokens.Chars, claude.CounterName())
	require.Equal(t, tokens.Chars, claude.Encoding)
	require.Equal(t, 1.0, claude.Margin())
	require.Equal(t, gpt.Measure(conv), claude.Measure(conv))
}

// TestBudgetsShareRawCountsInTheCache: budgets of two models counting
// through one cache, in either order, measure what budgets with caches of
// their own measure.
func TestBudgetsShareRawCountsInTheCache(t *testing.T) {
	t.Parallel()
	conv := sample(t)
	p := preset(t, policy.Adaptive, "")
	measure := func(model string, counts *tokens.CountCache) int {
		b, err := NewBudgetCounting(p, model, 0, tokens.DefaultLimits(), counts)
		require.NoError(t, err)
		return b.Measure(conv)
	}
	want := map[string]int{
		"claude-sonnet-4": measure("claude-sonnet-4", tokens.NewCountCache(tokens.DefaultCountEntries)),
		"gpt-4o":          measure("gpt-4o", tokens.NewCountCache(tokens.DefaultCountEntries)),
	}
	for _, order := range [][]string{{"claude-sonnet-4", "gpt-4o"}, {"gpt-4o", "claude-sonnet-4"}} {
		shared := tokens.NewCountCache(tokens.DefaultCountEntries)
		for _, model := range order {
			require.Equal(t, want[model], measure(model, shared), "%s after %v", model, order)
			require.Equal(t, want[model], measure(model, shared), "%s again, from the cache", model)
		}
	}
}
