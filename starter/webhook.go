package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// newWebhooks manages a tenant's completion webhooks: the same operations
// as the API's /v1/webhooks routes, for an operator.
func newWebhooks() *cobra.Command {
	var description string
	add := spec{
		use:   "add URL",
		short: "Register an endpoint and print its secret once (https, or http on a host:port in WEBHOOK_ALLOW_HOSTS)",
		args:  cobra.ExactArgs(1),
		needs: needsRecords,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&description, "description", "", "what the endpoint is for")
		},
		run: func(c *call) error {
			w, created, err := c.deps.Gateway(nil).AddWebhook(c.ctx(), c.tenant, c.args[0], description)
			if err != nil {
				return err
			}
			if !created {
				return fmt.Errorf("tenant %s already has endpoint %s for this URL; its secret was shown when it was registered (`webhooks rotate %s` gives a new one)", c.tenant, w.ID, w.ID)
			}
			fmt.Fprintln(c.out(), w.Secret)
			fmt.Fprintf(c.errOut(), "webhook %s for tenant %s registered; its secret is shown only this once.\n", w.ID, c.tenant)
			return nil
		},
	}

	list := spec{
		use:   "list",
		short: "List the live endpoints (never their secrets)",
		args:  cobra.NoArgs,
		needs: needsRecords,
		run: func(c *call) error {
			ws, err := c.deps.Store.ListWebhooks(c.ctx(), c.tenant)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tCREATED\tROTATED\tDESCRIPTION")
			for _, w := range ws {
				rotated := "-"
				if !w.RotatedAt.IsZero() {
					rotated = w.RotatedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.ID, oneLine(w.URL), w.CreatedAt.UTC().Format(time.RFC3339), rotated, oneLine(w.Description))
			}
			return tw.Flush()
		},
	}

	rotate := spec{
		use:   "rotate ID",
		short: "Give an endpoint a new secret (printed once); the old one signs beside it for 24 hours",
		args:  cobra.ExactArgs(1),
		needs: needsRecords,
		run: func(c *call) error {
			w, err := c.deps.Gateway(nil).RotateWebhook(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(c.out(), w.Secret)
			fmt.Fprintf(c.errOut(), "the old secret signs beside it until %s\n", w.PreviousExpires.UTC().Format(time.RFC3339))
			return nil
		},
	}

	del := spec{
		use:   "delete ID",
		short: "Stop deliveries to an endpoint (its delivery log stays)",
		args:  cobra.ExactArgs(1),
		needs: needsRecords,
		run: func(c *call) error {
			return c.deps.Store.DeleteWebhook(c.ctx(), c.tenant, c.args[0])
		},
	}

	deliveries := spec{
		use:   "deliveries RUN",
		short: "A run's deliveries with every attempt: time, response code, error",
		args:  cobra.ExactArgs(1),
		needs: needsRecords,
		run: func(c *call) error {
			ds, err := c.deps.Store.ListDeliveries(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			if len(ds) == 0 {
				fmt.Fprintln(c.out(), "No deliveries.")
				return nil
			}
			tw := tabwriter.NewWriter(c.out(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DELIVERY\tENDPOINT\tEVENT\tSTATUS\tATTEMPT\tAT\tCODE\tERROR")
			for _, d := range ds {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\t\t\t%s\n", d.ID, d.EndpointID, d.EventType, d.Status, oneLine(d.LastError))
				for _, a := range d.Log {
					fmt.Fprintf(tw, "\t\t\t\t%d\t%s\t%d\t%s\n", a.Attempt, a.At.UTC().Format(time.RFC3339), a.Code, oneLine(a.Error))
				}
			}
			return tw.Flush()
		},
	}

	redeliver := spec{
		use:   "redeliver DELIVERY",
		short: "Send a delivery again with the same webhook-id (needs Temporal)",
		args:  cobra.ExactArgs(1),
		needs: needsGateway,
		run: func(c *call) error {
			wf, err := c.gw.Redeliver(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.out(), "redelivery of %s started (workflow %s)\n", c.args[0], wf)
			return nil
		},
	}
	return group("webhooks", "Manage a tenant's completion webhooks and read their delivery log",
		"tenant whose webhooks these are (default $COMPACTOR_TENANT, else default)",
		add, list, rotate, del, deliveries, redeliver)
}
