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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Mark failed the live runs no workflow will finish (terminated, timed out, past retention, never started)",
		Long: "Looks at every pending or running run older than --after and marks it failed when its\n" +
			"workflow ended without recording it or no longer exists, or when it never started and\n" +
			"its session does not have it queued. `starter serve` does this every minute.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			gw, closeAll, err := openGateway(ctx)
			if err != nil {
				return err
			}
			defer closeAll()
			res, err := gw.Reconcile(ctx, after)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(res)
			}
			fmt.Fprintf(out, "checked %d live runs, marked %d failed\n", res.Checked, len(res.Failed))
			for id, why := range res.Failed {
				fmt.Fprintf(out, "%s\t%s\n", id, oneLine(why))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&after, "after", server.ReconcileAfter, "only runs started longer ago than this")
	jsonFlag(cmd, &asJSON)
	return cmd
}
