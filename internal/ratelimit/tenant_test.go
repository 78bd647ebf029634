package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTenantsPerTenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limits Limits
		// admitted is how many of 5 back-to-back requests (none released)
		// are admitted.
		admitted int
	}{
		{"no limits", Limits{}, 5},
		{"burst of 3", Limits{RatePerSecond: 0.001, Burst: 3}, 3},
		{"2 in flight", Limits{Concurrent: 2}, 2},
		{"both: the tighter wins", Limits{RatePerSecond: 0.001, Burst: 4, Concurrent: 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := NewTenants(tt.limits)
			admitted := 0
			for i := 0; i < 5; i++ {
				_, err := l.Acquire("acme")
				if err != nil {
					var r *Refusal
					require.ErrorAs(t, err, &r)
					require.GreaterOrEqual(t, r.RetryAfterSeconds(), 1)
					continue
				}
				admitted++
			}
			require.Equal(t, tt.admitted, admitted)
			_, err := l.Acquire("other")
			require.NoError(t, err, "another tenant has its own limits")
		})
	}
	l := NewTenants(Limits{Concurrent: 1})
	release, err := l.Acquire("acme")
	require.NoError(t, err)
	release()
	_, err = l.Acquire("acme")
	require.NoError(t, err, "a released slot is free again")
}
