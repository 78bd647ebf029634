package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/config"
)

// newSession holds the session commands: erasure.
func newSession() *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Erase a session"}
	var tenant, by string
	var wait time.Duration
	del := &cobra.Command{
		Use:   "delete SESSION",
		Short: "Erase a session: its conversations, outputs, offloads and history rows, leaving a tombstone (needs Temporal)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gw, closeAll, err := openGateway(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			e, wf, err := gw.EraseSession(cmd.Context(), tenant, args[0], "cli "+by)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "erasure %s of session %s under way (workflow %s)\n", e.ID, args[0], wf)
			deadline := time.Now().Add(wait)
			for {
				e, err = gw.Store.GetErasure(cmd.Context(), tenant, e.ID)
				if err != nil {
					return err
				}
				if !e.FinishedAt.IsZero() {
					fmt.Fprintf(cmd.OutOrStdout(), "erased session %s: %d runs, %d rows, %d objects deleted, %d kept (held by another session)\n",
						args[0], e.Runs, e.RowsDeleted, e.ObjectsDeleted, e.ObjectsKept)
					return nil
				}
				if time.Now().After(deadline) {
					fmt.Fprintf(cmd.OutOrStdout(), "erasure %s still under way; it goes on without this command\n", e.ID)
					return nil
				}
				time.Sleep(500 * time.Millisecond)
			}
		},
	}
	del.Flags().StringVar(&tenant, "tenant", config.Tenant(), "tenant (default $COMPACTOR_TENANT, else default)")
	del.Flags().StringVar(&by, "by", "operator", "who asks, recorded on the tombstone")
	del.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the erasure to finish")
	cmd.AddCommand(del)
	return cmd
}
