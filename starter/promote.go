package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// newPromote is `starter promote RUN`: a replay that repaired a failed or
// over-limit run becomes its session's state (POST /v1/runs/{run}/promote).
func newPromote() *cobra.Command {
	var tenant string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "promote RUN",
		Short: "Make a succeeded replay of a failed or over_limit run its session's state (the agent continues from it)",
		Long: "Promote replay RUN: the session's status then reports it as its last run and counts it as the session's\n" +
			"run in place of its original (status, the web UI and the export alike), the session's watermark moves\n" +
			"to the one the replay reached, and the tenant's webhook endpoints get a run.promoted event, always after\n" +
			"the replay's own run.succeeded. The replay must have succeeded, its original must have failed or ended\n" +
			"over_limit, and no run of the session may have committed since the original. Promoting again prints the\n" +
			"same promotion.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gw, closeAll, err := openGateway(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			p, fresh, err := gw.Promote(cmd.Context(), tenant, args[0], "cli")
			var pe *store.PromoteError
			if errors.As(err, &pe) {
				return fmt.Errorf("cannot promote: %w", err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), p)
			}
			what := "promoted"
			if !fresh {
				what = "already promoted"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "run %s %s: session %s continues from it (it repairs run %s)\n", p.RunID, what, p.Session, p.ReplayOf)
			if p.Watermark != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "watermark: %s\n", p.Watermark)
			}
			return nil
		},
	}
	tenantFlag(cmd, &tenant)
	jsonFlag(cmd, &asJSON)
	return cmd
}

// newWatermarks is `starter watermarks SESSION`: every watermark the
// session had, oldest first, and the run that moved it there.
func newWatermarks() *cobra.Command {
	var tenant, session string
	cmd := &cobra.Command{
		Use:   "watermarks SESSION",
		Short: "A session's watermark history: each watermark, the run that set it, when",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			session, rest, err := sessionArg("watermarks", session, args)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return fmt.Errorf("two sessions named: %q and --session %q", rest[0], session)
			}
			return withRecords(cmd, func(deps *app.Deps, _ *audit.Service) error {
				hist, err := deps.Store.ListWatermarks(cmd.Context(), tenant, session)
				if err != nil {
					return err
				}
				if len(hist) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no watermark")
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "WATERMARK\tRUN\tAT")
				for _, h := range hist {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", h.ToolUseID, h.RunID, h.At.Format("2006-01-02T15:04:05Z07:00"))
				}
				return tw.Flush()
			})
		},
	}
	tenantFlag(cmd, &tenant)
	cmd.Flags().StringVar(&session, "session", "", "the session (an alias of the argument)")
	return cmd
}
