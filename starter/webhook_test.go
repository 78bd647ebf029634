package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWebhooksTenantFromEnvironment: `starter webhooks` acts for
// $COMPACTOR_TENANT when --tenant is not given, as the other commands do
// (not for "default", which would register or delete another tenant's
// endpoints).
func TestWebhooksTenantFromEnvironment(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("COMPACTOR_TENANT", "acme")
	cmd := newWebhooks()
	require.Equal(t, "acme", cmd.PersistentFlags().Lookup("tenant").DefValue)
	list, _, err := cmd.Find([]string{"list"})
	require.NoError(t, err)
	require.Equal(t, "acme", list.InheritedFlags().Lookup("tenant").DefValue, "every subcommand inherits it")

	t.Setenv("COMPACTOR_TENANT", "")
	require.Equal(t, "default", newWebhooks().PersistentFlags().Lookup("tenant").DefValue)
}
