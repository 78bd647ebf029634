package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// newPromote is `starter promote RUN`: a replay that repaired a failed or
// over-limit run becomes its session's state (POST /v1/runs/{run}/promote).
func newPromote() *cobra.Command {
	return command(spec{
		use:   "promote RUN",
		short: "Make a succeeded replay of a failed or over_limit run its session's state (the agent continues from it)",
		long: "Promote replay RUN: the session's status then reports it as its last run and counts it as the session's\n" +
			"run in place of its original (status, the web UI and the export alike), the session's watermark moves\n" +
			"to the one the replay reached, and the tenant's webhook endpoints get a run.promoted event, always after\n" +
			"the replay's own run.succeeded. The replay must have succeeded, its original must have failed or ended\n" +
			"over_limit, and no run of the session may have committed since the original. Promoting again prints the\n" +
			"same promotion.",
		args:  cobra.ExactArgs(1),
		needs: needsGateway, tenant: true, json: true,
		run: func(c *call) error {
			p, fresh, err := c.gw.Promote(c.ctx(), c.tenant, c.args[0], "cli")
			var pe *store.PromoteError
			if errors.As(err, &pe) {
				return fmt.Errorf("cannot promote: %w", err)
			}
			if err != nil {
				return err
			}
			return c.print(p, func(w io.Writer) {
				what := "promoted"
				if !fresh {
					what = "already promoted"
				}
				fmt.Fprintf(w, "run %s %s: session %s continues from it (it repairs run %s)\n", p.RunID, what, p.Session, p.ReplayOf)
				if p.Watermark != "" {
					fmt.Fprintf(w, "watermark: %s\n", p.Watermark)
				}
			})
		},
	})
}

// newWatermarks is `starter watermarks SESSION`: every watermark the
// session had, oldest first, and the run that moved it there.
func newWatermarks() *cobra.Command {
	var sessionFlag, session string
	return command(spec{
		use:   "watermarks SESSION",
		short: "A session's watermark history: each watermark, the run that set it, when",
		args:  cobra.MaximumNArgs(1),
		needs: needsRecords, tenant: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&sessionFlag, "session", "", "the session (an alias of the argument)")
		},
		check: func(c *call) (err error) {
			session, err = oneSession("watermarks", sessionFlag, c.args)
			return err
		},
		run: func(c *call) error {
			hist, err := c.deps.Store.ListWatermarks(c.ctx(), c.tenant, session)
			if err != nil {
				return err
			}
			if len(hist) == 0 {
				fmt.Fprintln(c.out(), "no watermark")
				return nil
			}
			tw := tabwriter.NewWriter(c.out(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "WATERMARK\tRUN\tAT")
			for _, h := range hist {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", h.ToolUseID, h.RunID, h.At.Format("2006-01-02T15:04:05Z07:00"))
			}
			return tw.Flush()
		},
	})
}
