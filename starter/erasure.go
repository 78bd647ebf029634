package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// newErasure reads an erasure's tombstone, as GET /v1/erasures/{id} does:
// who asked, when, and what went.
func newErasure() *cobra.Command {
	return command(spec{
		use:   "erasure ID",
		short: "Show a session erasure: who asked, when, whether it finished, and what it deleted",
		args:  cobra.ExactArgs(1),
		needs: needsRecords, tenant: true,
		run: func(c *call) error {
			e, err := c.deps.Store.GetErasure(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			w := c.out()
			status, finished := "erasing", "-"
			if !e.FinishedAt.IsZero() {
				status, finished = "erased", e.FinishedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "Erasure:      %s\n", e.ID)
			fmt.Fprintf(w, "Session:      %s/%s\n", e.Tenant, oneLine(e.Session))
			fmt.Fprintf(w, "Status:       %s\n", status)
			fmt.Fprintf(w, "Requested by: %s at %s\n", oneLine(e.RequestedBy), e.RequestedAt.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "Finished:     %s\n", finished)
			fmt.Fprintf(w, "Deleted:      %d runs, %d rows, %d objects (%d kept: held by another session)\n",
				e.Runs, e.RowsDeleted, e.ObjectsDeleted, e.ObjectsKept)
			for _, sha := range e.DeletedSHA256 {
				fmt.Fprintf(w, "  sha256 %s\n", sha)
			}
			return nil
		},
	})
}
