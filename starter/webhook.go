package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/config"
)

// newWebhooks manages a tenant's completion webhooks: the same operations
// as the API's /v1/webhooks routes, for an operator.
func newWebhooks() *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "Manage a tenant's completion webhooks and read their delivery log"}
	var tenant string
	cmd.PersistentFlags().StringVar(&tenant, "tenant", config.Tenant(), "tenant whose webhooks these are (default $COMPACTOR_TENANT, else default)")

	var description string
	add := &cobra.Command{
		Use:   "add URL",
		Short: "Register an endpoint and print its secret once (https, or http on a host:port in WEBHOOK_ALLOW_HOSTS)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				w, created, err := deps.Gateway(nil).AddWebhook(cmd.Context(), tenant, args[0], description)
				if err != nil {
					return err
				}
				if !created {
					return fmt.Errorf("tenant %s already has endpoint %s for this URL; its secret was shown when it was registered (`webhooks rotate %s` gives a new one)", tenant, w.ID, w.ID)
				}
				fmt.Fprintln(cmd.OutOrStdout(), w.Secret)
				fmt.Fprintf(cmd.ErrOrStderr(), "webhook %s for tenant %s registered; its secret is shown only this once.\n", w.ID, tenant)
				return nil
			})
		},
	}
	add.Flags().StringVar(&description, "description", "", "what the endpoint is for")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the live endpoints (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				ws, err := deps.Store.ListWebhooks(cmd.Context(), tenant)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tURL\tCREATED\tROTATED\tDESCRIPTION")
				for _, w := range ws {
					rotated := "-"
					if !w.RotatedAt.IsZero() {
						rotated = w.RotatedAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.ID, oneLine(w.URL), w.CreatedAt.UTC().Format(time.RFC3339), rotated, oneLine(w.Description))
				}
				return tw.Flush()
			})
		},
	}

	rotate := &cobra.Command{
		Use:   "rotate ID",
		Short: "Give an endpoint a new secret (printed once); the old one signs beside it for 24 hours",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				w, err := deps.Gateway(nil).RotateWebhook(cmd.Context(), tenant, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), w.Secret)
				fmt.Fprintf(cmd.ErrOrStderr(), "the old secret signs beside it until %s\n", w.PreviousExpires.UTC().Format(time.RFC3339))
				return nil
			})
		},
	}

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Stop deliveries to an endpoint (its delivery log stays)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				return deps.Store.DeleteWebhook(cmd.Context(), tenant, args[0])
			})
		},
	}

	deliveries := &cobra.Command{
		Use:   "deliveries RUN",
		Short: "A run's deliveries with every attempt: time, response code, error",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				ds, err := deps.Store.ListDeliveries(cmd.Context(), tenant, args[0])
				if err != nil {
					return err
				}
				if len(ds) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "No deliveries.")
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "DELIVERY\tENDPOINT\tEVENT\tSTATUS\tATTEMPT\tAT\tCODE\tERROR")
				for _, d := range ds {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\t\t\t%s\n", d.ID, d.EndpointID, d.EventType, d.Status, oneLine(d.LastError))
					for _, a := range d.Log {
						fmt.Fprintf(tw, "\t\t\t\t%d\t%s\t%d\t%s\n", a.Attempt, a.At.UTC().Format(time.RFC3339), a.Code, oneLine(a.Error))
					}
				}
				return tw.Flush()
			})
		},
	}

	redeliver := &cobra.Command{
		Use:   "redeliver DELIVERY",
		Short: "Send a delivery again with the same webhook-id (needs Temporal)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gw, closeAll, err := openGateway(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			wf, err := gw.Redeliver(cmd.Context(), tenant, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "redelivery of %s started (workflow %s)\n", args[0], wf)
			return nil
		},
	}
	cmd.AddCommand(add, list, rotate, del, deliveries, redeliver)
	return cmd
}
