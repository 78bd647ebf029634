// Package clitable prints the human-readable tables of the CLI.
package clitable

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/plan"
)

// Inspect prints one row per preset, then each preset's passes.
func Inspect(w io.Writer, reports []plan.Report) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "PRESET\tUNIT\tLIMIT\tSIZE\tUSAGE\tLEVEL\tAFTER DETERMINISTIC\tMAP-REDUCE\tLAYER 2\tHISTORY")
	for _, r := range reports {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\terror: %s\n", r.Preset, r.Encoding, r.Limit, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f%%\t%s\t%d (%.1f%%)\t%d\t%d\t%s\n",
			r.Preset, r.Encoding, r.Limit, r.SizeBefore, r.Usage*100, r.Level,
			r.SizeAfter, r.UsageAfter*100, r.LargeResults, r.GlobalResults, r.HistoryNote)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range reports {
		if r.Error != "" {
			continue
		}
		fmt.Fprintf(w, "%s: %s; budget: %s\n", r.Preset, r.Recommendation, r.Budget)
		for _, p := range r.Passes {
			state := "skipped"
			if p.Applied {
				state = "applied"
			}
			note := ""
			if p.Note != "" {
				note = " — " + p.Note
			}
			fmt.Fprintf(w, "  %-16s %-8s count %-4d saved %d%s\n", p.Name, state, p.Count, p.TokensSaved, note)
		}
	}
}

// Run prints a run's outcome: figures, levels, drift, keys and passes.
func Run(w io.Writer, r contract.Outcome) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", r.RunID)
	fmt.Fprintf(tw, "status\t%s\n", r.Status)
	if r.Error != "" && !r.OverLimit {
		fmt.Fprintf(tw, "error\t%s\n", r.Error)
	}
	if r.OverLimit {
		fmt.Fprintf(tw, "over limit\t%s\n", r.OverLimitReason)
	}
	if r.OutputKey == "" {
		tw.Flush()
		return
	}
	fmt.Fprintf(tw, "format\t%s\n", r.Format)
	fmt.Fprintf(tw, "before\t%d %s (%s)\n", r.TokensBefore, r.Unit, r.LevelBefore)
	fmt.Fprintf(tw, "after\t%d %s of %d (%s)\n", r.TokensAfter, r.Unit, r.ContextLimit, r.LevelAfter)
	if r.LevelReason != "" {
		fmt.Fprintf(tw, "level\t%s\n", r.LevelReason)
	}
	if r.Counter != "" {
		fmt.Fprintf(tw, "counter\t%s\n", r.Counter)
	}
	fmt.Fprintf(tw, "ratio\t%.3f\n", r.Ratio)
	if r.Drift != "" {
		fmt.Fprintf(tw, "drift\t%s\n", r.Drift)
	}
	if r.HistoryFailed {
		fmt.Fprintf(tw, "history\tsummary failed: history left unchanged\n")
	}
	fmt.Fprintf(tw, "archive\t%s\n", r.ArchiveKey)
	fmt.Fprintf(tw, "output\t%s\n", r.OutputKey)
	tw.Flush()
	for _, p := range r.Passes {
		state := "skipped"
		if p.Applied {
			state = "applied"
		}
		fmt.Fprintf(w, "  %-16s %-8s count %-4d saved %d %s\n", p.Name, state, p.Count, p.TokensSaved, p.Note)
	}
}
