package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestGatewayBreaker: the gateway gets the configured loop breaker, and
// none at all (no query per event) when it is disabled.
func TestGatewayBreaker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*config.Config)
		want store.BreakerRule
	}{
		{name: "defaults", edit: func(*config.Config) {}, want: store.BreakerRule{Runs: 3, Window: time.Hour, MinFreed: 0.05}},
		{name: "BREAKER_RUNS=0 disables it", edit: func(c *config.Config) { c.BreakerRuns = 0 }},
		{name: "a minimum interval alone still applies", edit: func(c *config.Config) { c.BreakerRuns, c.MinEventInterval = 0, time.Minute },
			want: store.BreakerRule{Window: time.Hour, MinFreed: 0.05, MinInterval: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := config.Defaults()
			tt.edit(&c)
			require.Equal(t, tt.want, (&Deps{Config: c}).Gateway(nil).Breaker)
		})
	}
}
