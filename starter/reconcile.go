package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/server"
)

func newReconcile() *cobra.Command {
	var after time.Duration
	return command(spec{
		use:   "reconcile",
		short: "Mark failed the live runs no workflow will finish (terminated, timed out, past retention, never started)",
		long: "Looks at every pending or running run older than --after and marks it failed when its\n" +
			"workflow ended without recording it or no longer exists, or when it never started and\n" +
			"its session does not have it queued. `starter serve` does this every minute.",
		args:  cobra.NoArgs,
		needs: needsGateway, json: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().DurationVar(&after, "after", server.ReconcileAfter, "only runs started longer ago than this")
		},
		run: func(c *call) error {
			res, err := c.gw.Reconcile(c.ctx(), after)
			if err != nil {
				return err
			}
			out := c.out()
			if c.json {
				return json.NewEncoder(out).Encode(res)
			}
			fmt.Fprintf(out, "checked %d live runs, marked %d failed\n", res.Checked, len(res.Failed))
			for id, why := range res.Failed {
				fmt.Fprintf(out, "%s\t%s\n", id, oneLine(why))
			}
			return nil
		},
	})
}
