package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/config"
)

// newRetention reads and changes a tenant's retention, as the API's
// /v1/retention routes do, for an operator.
func newRetention() *cobra.Command {
	cmd := &cobra.Command{Use: "retention", Short: "Show, set or unset how long a tenant's final runs are kept"}
	var tenant string
	cmd.PersistentFlags().StringVar(&tenant, "tenant", config.Tenant(), "tenant (default $COMPACTOR_TENANT, else default)")

	show := &cobra.Command{
		Use:   "show",
		Short: "Print the tenant's retention in days, or that its runs are kept for good",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				days, ok, err := deps.Store.Retention(cmd.Context(), tenant)
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: no retention, runs are kept for good\n", tenant)
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: final runs are deleted %s days after they end\n", tenant,
					strconv.FormatFloat(days, 'f', -1, 64))
				return nil
			})
		},
	}
	set := &cobra.Command{
		Use:   "set DAYS",
		Short: "Delete the tenant's final runs and their objects DAYS days after they end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			days, err := strconv.Atoi(args[0])
			if err != nil || days < 1 || days > 36500 {
				return fmt.Errorf("DAYS: %q is not a whole number of days from 1 to 36500", args[0])
			}
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				if err := deps.Store.SetRetention(cmd.Context(), tenant, float64(days)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: final runs are deleted %d days after they end\n", tenant, days)
				return nil
			})
		},
	}
	unset := &cobra.Command{
		Use:   "unset",
		Short: "Keep the tenant's runs for good again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				if err := deps.Store.UnsetRetention(cmd.Context(), tenant); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: no retention, runs are kept for good\n", tenant)
				return nil
			})
		},
	}
	cmd.AddCommand(show, set, unset)
	return cmd
}
