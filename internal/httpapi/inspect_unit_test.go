package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnitInspectionsPerTenant: one tenant holds at most its share of
// the inspection slots; another tenant still gets one, and a released
// slot is the tenant's again.
func TestUnitInspectionsPerTenant(t *testing.T) {
	t.Parallel()
	var c tenantCount
	for range maxTenantInspections {
		require.True(t, c.take("a", maxTenantInspections))
	}
	require.False(t, c.take("a", maxTenantInspections), "tenant a holds its share")
	require.True(t, c.take("b", maxTenantInspections), "tenant b is not starved by a")
	require.LessOrEqual(t, 2*maxTenantInspections, maxInspections, "two tenants at their share fit the server's slots")
	c.release("a")
	require.True(t, c.take("a", maxTenantInspections))
}
