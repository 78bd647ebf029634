package strategy

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLevelFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		usage float64
		want  Level
	}{
		{-0.1, LevelGreen}, {0, LevelGreen}, {0.2499, LevelGreen},
		{0.25, LevelYellow}, {0.4999, LevelYellow},
		{0.50, LevelOrange}, {0.7499, LevelOrange},
		{0.75, LevelRed}, {0.8499, LevelRed},
		{0.85, LevelCritical}, {1.0, LevelCritical}, {3.2, LevelCritical},
		{math.NaN(), LevelCritical}, {math.Inf(1), LevelCritical},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, LevelFor(tt.usage), "usage %v", tt.usage)
	}
}

func TestRecommendation(t *testing.T) {
	t.Parallel()
	want := map[Level]string{
		LevelGreen:    "Continue normally",
		LevelYellow:   "Monitor, prepare compression",
		LevelOrange:   "Apply Tier 1 & 2",
		LevelRed:      "Apply Tier 3 summarisation",
		LevelCritical: "Checkpoint + fresh session",
		Level("BLUE"): "",
	}
	for l, s := range want {
		require.Equal(t, s, Recommendation(l), "level %s", l)
	}
}
