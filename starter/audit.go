package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/clitable"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// auditCommands are the operator's and auditor's commands: history,
// restore, diff, recovery search, export, status, replay, API keys and
// webhooks.
func auditCommands() []*cobra.Command {
	return []*cobra.Command{newRuns(), newShow(), newReplay(), newRestore(), newDiff(), newSearch(),
		newExport(), newStatus(), newAPIKey(), newReconcile(), newWebhooks(), newSession(), newPromote(), newWatermarks(),
		newRetention(), newErasure()}
}

// parseTime reads a time flag: RFC 3339, a date (UTC midnight), or a
// duration meaning that long before now ("24h"); "" is no bound.
func parseTime(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration ago (24h)", flag, s)
}

// runFilterFlags are the filters shared by runs and export.
type runFilterFlags struct {
	session, status, from, to, replayOf, after string
	limit                                      int
	degraded                                   bool
}

func (f *runFilterFlags) add(cmd *cobra.Command, limitDefault int) {
	cmd.Flags().StringVar(&f.session, "session", "", "only this session")
	cmd.Flags().StringVar(&f.status, "status", "", "only this status: pending, running, succeeded, over_limit, failed")
	cmd.Flags().StringVar(&f.from, "from", "", "started at or after (RFC 3339, date, or duration ago like 24h)")
	cmd.Flags().StringVar(&f.to, "to", "", "started before (same forms as --from)")
	cmd.Flags().StringVar(&f.replayOf, "replay-of", "", "only replays of this run")
	cmd.Flags().StringVar(&f.after, "after", "", "continue after this run id (paging)")
	cmd.Flags().IntVar(&f.limit, "limit", limitDefault, "at most this many runs (0: all)")
	cmd.Flags().BoolVar(&f.degraded, "degraded", false, "only the runs that reached their result through a fallback")
}

func (f *runFilterFlags) filter(now time.Time) (store.RunFilter, error) {
	out := store.RunFilter{Session: f.session, Status: store.RunStatus(f.status), ReplayOf: f.replayOf, AfterID: f.after, Limit: f.limit,
		Degraded: f.degraded}
	if f.status != "" && !out.Status.Valid() {
		return out, fmt.Errorf("--status %q: want pending, running, succeeded, over_limit or failed", f.status)
	}
	if f.limit < 0 {
		return out, fmt.Errorf("--limit %d: must not be negative", f.limit)
	}
	var err error
	if out.From, err = parseTime("from", f.from, now); err != nil {
		return out, err
	}
	if out.To, err = parseTime("to", f.to, now); err != nil {
		return out, err
	}
	return out, nil
}

func newRuns() *cobra.Command {
	var ff runFilterFlags
	var f store.RunFilter
	return command(spec{
		use:   "runs",
		short: "List compaction runs, newest first",
		args:  cobra.NoArgs,
		needs: needsRecords, tenant: true, json: true,
		flags: func(cmd *cobra.Command) { ff.add(cmd, 50) },
		check: func(*call) (err error) {
			f, err = ff.filter(time.Now())
			return err
		},
		run: func(c *call) error {
			runs, err := c.audit.Runs(c.ctx(), c.tenant, f)
			if err != nil {
				return err
			}
			return c.print(audit.Records(runs), func(w io.Writer) { printRuns(w, runs) })
		},
	})
}

// printRuns prints one line per run.
func printRuns(w io.Writer, runs []store.Run) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSESSION\tSTATUS\tDEGRADED\tTRIGGER\tPRESET\tMODEL\tTOKENS\tDURATION\tSTARTED\tERROR")
	for _, r := range runs {
		rec := audit.NewRunRecord(r)
		degraded := ""
		if rec.Degraded {
			degraded = "degraded"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d → %d\t%s\t%s\t%s\n", r.ID, r.Session, r.Status, degraded, r.Trigger, r.Preset,
			r.Model, r.TokensBefore, r.TokensAfter, (time.Duration(rec.DurationMS) * time.Millisecond).String(),
			r.StartedAt.Format(time.RFC3339), clip(oneLine(r.Error), 60))
	}
	tw.Flush()
}

func newShow() *cobra.Command {
	return command(spec{
		use:   "show RUN",
		short: "Show a run with its steps (attempts, LLM usage, errors) and drift verdicts",
		args:  cobra.ExactArgs(1),
		needs: needsRecords, tenant: true, json: true,
		run: func(c *call) error {
			d, err := c.audit.Run(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			return c.print(d, func(w io.Writer) { printDetail(w, d) })
		},
	})
}

// printDetail prints a run, its steps and its drift verdicts.
func printDetail(w io.Writer, d audit.RunDetail) {
	r := d.Run
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, printable(v))
		}
	}
	row("run", r.ID)
	row("session", r.Tenant+"/"+r.Session)
	row("status", string(r.Status))
	if r.Status == store.RunOverLimit {
		// The reason a run could not get under its limit, not an error.
		row("over limit", oneLine(r.Error))
	} else {
		row("error", oneLine(r.Error))
	}
	row("trigger", r.Trigger)
	row("event", r.EventID)
	row("preset", r.Preset)
	row("agent model", r.AgentModel)
	if st, err := r.ParseStats(); err == nil && st.ContextLimit > 0 {
		row("limit", fmt.Sprintf("%d %s", st.ContextLimit, st.Unit))
	} else if r.ContextLimit > 0 {
		row("limit", strconv.Itoa(r.ContextLimit))
	}
	row("summarizer", r.Model)
	row("prompt", r.PromptVersion)
	row("tokens", fmt.Sprintf("%d → %d (ratio %.3f, level %s)", r.TokensBefore, r.TokensAfter, r.Ratio, r.Level))
	row("llm usage", fmt.Sprintf("%d prompt + %d completion tokens", d.PromptTokens, d.CompletionTokens))
	row("started", r.StartedAt.Format(time.RFC3339))
	if !r.FinishedAt.IsZero() {
		row("finished", fmt.Sprintf("%s (%s)", r.FinishedAt.Format(time.RFC3339), d.Duration.Round(time.Millisecond)))
	}
	row("replay of", r.ReplayOf)
	row("archive", r.ArchiveKey)
	row("output", r.OutputKey)
	tw.Flush()

	if st, err := r.ParseStats(); err == nil && len(st.Passes) > 0 {
		fmt.Fprintf(w, "\npasses\n")
		tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "PASS\tAPPLIED\tCOUNT\tSAVED\tNOTE")
		for _, p := range st.Passes {
			fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\n", printable(p.Name), p.Applied, p.Count, p.TokensSaved, oneLine(p.Note))
		}
		tw.Flush()
	}

	fmt.Fprintf(w, "\nsteps (%d attempts)\n", len(d.Steps))
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tATTEMPT\tKIND\tIN\tOUT\tPROMPT\tCOMPLETION\tMODEL\tDURATION\tERROR")
	// A long error is cut in the table and written whole below it,
	// wrapped: its end (a host, a status, the cause) is what matters.
	var long []string
	for _, s := range d.Steps {
		msg := oneLine(s.Error)
		if cut := clip(msg, 60); cut != msg {
			long = append(long, fmt.Sprintf("[%d] %s, attempt %d: %s", len(long)+1, s.Name, s.Attempt, msg))
			msg = fmt.Sprintf("%s [%d]", cut, len(long))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Name, s.Attempt, s.Kind, s.InputSize, s.OutputSize,
			s.PromptTokens, s.CompletionTokens, s.Model, s.Duration.Round(time.Millisecond), msg)
	}
	tw.Flush()
	for _, l := range long {
		fmt.Fprintln(w, wrap(l, 100, "    "))
	}

	if len(d.Drift) == 0 {
		return
	}
	fmt.Fprintf(w, "\ndrift verdicts\n")
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tPASS\tSCORE\tPASSED\tVERDICT\tMISSING")
	for _, v := range d.Drift {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%v\t%s\t%s\n", v.Step, v.Pass, v.Score, v.Passed, v.Verdict, clip(strings.Join(v.Missing, ", "), 80))
	}
	tw.Flush()
}

func newReplay() *cobra.Command {
	var requestID, overrides, from, to string
	var req gateway.ReplayRequest
	var failed, overLimit bool
	var wait time.Duration
	var fromT, toT time.Time
	return command(spec{
		use:   "replay RUN | replay --failed [--from --to]",
		short: "Run a run again from its archived original, optionally with another preset, model or limit",
		long: "Replays one run, or with --failed every failed run started in [--from, --to). The new run links\n" +
			"to the one it replays. The same --request-id never replays a run twice: give the printed one\n" +
			"again to retry safely.",
		args: func(cmd *cobra.Command, args []string) error {
			if (failed || overLimit) && len(args) != 0 {
				return errors.New("--failed and --over-limit take no RUN")
			}
			if !failed && !overLimit && len(args) != 1 {
				return errors.New("give one RUN, or --failed / --over-limit")
			}
			return nil
		},
		needs: needsGateway, tenant: true, json: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key (default: a new one, printed)")
			cmd.Flags().StringVar(&req.Preset, "preset", "", "preset (default: the original run's)")
			cmd.Flags().StringVar(&overrides, "overrides", "", "preset overrides as JSON (default: the original run's when the preset is unchanged)")
			cmd.Flags().StringVar(&req.Model, "model", "", "the agent's model (default: the original run's)")
			cmd.Flags().IntVar(&req.ContextLimit, "limit", 0, "context limit (default: the original run's)")
			cmd.Flags().BoolVar(&failed, "failed", false, "replay every failed run started in [--from, --to)")
			cmd.Flags().BoolVar(&overLimit, "over-limit", false, "replay every over_limit run started in [--from, --to) (with --failed: both)")
			cmd.Flags().StringVar(&from, "from", "", "with --failed: started at or after (RFC 3339, date, or duration ago)")
			cmd.Flags().StringVar(&to, "to", "", "with --failed: started before")
			cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the replays and print their results (0: do not wait)")
		},
		check: func(*call) (err error) {
			now := time.Now()
			if fromT, err = parseTime("from", from, now); err != nil {
				return err
			}
			if toT, err = parseTime("to", to, now); err != nil {
				return err
			}
			req.RequestID = requestID
			if req.RequestID == "" {
				req.RequestID = fmt.Sprintf("cli-%d", now.UnixNano())
			}
			if overrides != "" {
				req.Overrides = json.RawMessage(overrides)
			}
			return nil
		},
		run: func(c *call) error {
			ctx, gw := c.ctx(), c.gw
			var subs []gateway.Submitted
			var err error
			if failed || overLimit {
				if failed {
					req.Statuses = append(req.Statuses, "failed")
				}
				if overLimit {
					req.Statuses = append(req.Statuses, "over_limit")
				}
				subs, err = gw.ReplayFailed(ctx, c.tenant, fromT, toT, req)
			} else {
				var sub gateway.Submitted
				sub, err = gw.Replay(ctx, c.tenant, c.args[0], req)
				if err == nil {
					subs = append(subs, sub)
				}
			}
			var ie *gateway.InputError
			if errors.As(err, &ie) && len(subs) == 0 {
				return fmt.Errorf("bad input: %w", err)
			}
			progress := c.errOut()
			fmt.Fprintf(progress, "request id %s: %d replay(s) submitted\n", req.RequestID, len(subs))
			if err != nil {
				// Some runs could not be replayed; the others were.
				fmt.Fprintf(progress, "not replayed: %v\n", err)
			}
			if wait <= 0 {
				if jerr := c.print(subs, func(w io.Writer) {
					for _, s := range subs {
						fmt.Fprintf(w, "%s\texisting=%v\n", s.RunID, s.Existing)
					}
				}); jerr != nil {
					return jerr
				}
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			for _, s := range subs {
				fmt.Fprintf(progress, "run %s submitted (existing: %v); waiting…\n", s.RunID, s.Existing)
				if _, werr := gw.Wait(wctx, s.RunID); werr != nil {
					return errors.Join(err, fmt.Errorf("run %s: %w", s.RunID, werr))
				}
				res, werr := c.audit.RunOutcome(ctx, c.tenant, s.RunID)
				if werr != nil {
					return errors.Join(err, fmt.Errorf("run %s: %w", s.RunID, werr))
				}
				if jerr := c.print(res, func(w io.Writer) { clitable.Run(w, res) }); jerr != nil {
					return jerr
				}
			}
			return err
		},
	})
}

func newRestore() *cobra.Command {
	var outPath string
	return command(spec{
		use:   "restore RUN",
		short: "Write a run's original conversation exactly as archived (sha256 checked)",
		args:  cobra.ExactArgs(1),
		needs: needsObjects, tenant: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file (default: stdout)")
		},
		run: func(c *call) error {
			data, err := c.audit.Restore(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			if outPath == "" || outPath == "-" {
				_, err = c.out().Write(data)
				return err
			}
			// Conversations may hold secrets: readable by the owner only.
			if err := os.WriteFile(outPath, data, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", outPath, err)
			}
			fmt.Fprintf(c.errOut(), "%d bytes written to %s (sha256 %s)\n", len(data), outPath, blob.SHA256Hex(data))
			return nil
		},
	})
}

func newDiff() *cobra.Command {
	var all bool
	return command(spec{
		use:   "diff RUN",
		short: "Show what a run removed, replaced, summarized or added, message by message",
		args:  cobra.ExactArgs(1),
		needs: needsObjects, tenant: true, json: true,
		flags: func(cmd *cobra.Command) { cmd.Flags().BoolVar(&all, "all", false, "list kept messages too") },
		run: func(c *call) error {
			d, err := c.audit.Diff(c.ctx(), c.tenant, c.args[0])
			if err != nil {
				return err
			}
			return c.print(d, func(w io.Writer) { printDiff(w, d, all) })
		},
	})
}

// printDiff prints the changed messages (all when all is set) and totals.
func printDiff(w io.Writer, d audit.Diff, all bool) {
	fmt.Fprintf(w, "run %s: %d kept, %d replaced, %d summarized, %d removed, %d added\n\n",
		d.RunID, d.Kept, d.Replaced, d.Summarized, d.Removed, d.Added)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MSG\tOUT\tROLE\tACTION\tCHARS\tNOTE")
	idx := func(i int) string {
		if i < 0 {
			return "-"
		}
		return fmt.Sprint(i)
	}
	for _, c := range d.Changes {
		if c.Action == audit.ActionKept && !all {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d → %d\t%s\n", idx(c.Index), idx(c.OutIndex), c.Role, c.Action, c.Before, c.After, c.Note)
	}
	tw.Flush()
}

func newSearch() *cobra.Command {
	var sessionFlag, session, query string
	var limit int
	return command(spec{
		use:   "search SESSION QUERY",
		short: "Find text in a session's offloaded results and archived originals (case-insensitive)",
		args:  cobra.RangeArgs(1, 2),
		needs: needsObjects, tenant: true, json: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&sessionFlag, "session", "", "the session (an alias of the first argument)")
			cmd.Flags().IntVar(&limit, "limit", audit.DefaultSearchLimit, "at most this many hits")
		},
		check: func(c *call) error {
			var rest []string
			var err error
			session, rest, err = sessionArg("search", sessionFlag, c.args)
			if err != nil {
				return err
			}
			if len(rest) != 1 {
				return errors.New("name what to find: starter search SESSION QUERY")
			}
			query = rest[0]
			return nil
		},
		run: func(c *call) error {
			res, err := c.audit.SearchScan(c.ctx(), c.tenant, session, query, limit)
			if err != nil {
				return err
			}
			hits := res.Hits
			if hits == nil && c.json {
				hits = []audit.Hit{}
			}
			return c.print(hits, func(w io.Writer) {
				printHits(w, hits)
				if res.Truncated {
					fmt.Fprintf(w, "(the search stopped after reading %d MiB: narrow the query)\n", audit.MaxSearchBytes>>20)
				}
			})
		},
	})
}

// printHits prints each hit's place, then its excerpt on one line.
func printHits(w io.Writer, hits []audit.Hit) {
	if len(hits) == 0 {
		fmt.Fprintln(w, "no matches")
		return
	}
	for _, h := range hits {
		where := h.Kind
		if h.Message >= 0 {
			where = fmt.Sprintf("%s message %d", h.Kind, h.Message)
		}
		fmt.Fprintf(w, "%s (run %s, %d match(es))\n  id %s\n  %s\n\n", where, h.RunID, h.Matches, h.ID, oneLine(h.Excerpt))
	}
}

func newExport() *cobra.Command {
	var format, outPath string
	var steps bool
	var ff runFilterFlags
	var f store.RunFilter
	return command(spec{
		use:   "export",
		short: "Export the run history as JSON lines or CSV",
		args:  cobra.NoArgs,
		needs: needsRecords, tenant: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&format, "format", audit.FormatJSONL, "jsonl or csv")
			cmd.Flags().BoolVar(&steps, "steps", false, `after each run, a line per step it recorded ({"record":"step",...}; jsonl only)`)
			cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file (default: stdout)")
			ff.add(cmd, 0)
		},
		check: func(*call) (err error) {
			f, err = ff.filter(time.Now())
			return err
		},
		run: func(c *call) error {
			if outPath == "" || outPath == "-" {
				return c.audit.Export(c.ctx(), c.tenant, f, format, steps, c.out())
			}
			file, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return fmt.Errorf("create %s: %w", outPath, err)
			}
			if err := c.audit.Export(c.ctx(), c.tenant, f, format, steps, file); err != nil {
				file.Close()
				return err
			}
			if err := file.Close(); err != nil {
				return fmt.Errorf("write %s: %w", outPath, err)
			}
			return nil
		},
	})
}

func newStatus() *cobra.Command {
	var sessionFlag, session string
	return command(spec{
		use:   "status SESSION",
		short: "The context status report of a session (levels and recommendation of the three-tier design)",
		args:  cobra.MaximumNArgs(1),
		needs: needsRecords, tenant: true, json: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&sessionFlag, "session", "", "the session (an alias of the argument)")
		},
		check: func(c *call) (err error) {
			session, err = oneSession("status", sessionFlag, c.args)
			return err
		},
		run: func(c *call) error {
			st, err := c.audit.Status(c.ctx(), c.tenant, session)
			if err != nil {
				return err
			}
			return c.print(st, func(w io.Writer) { printStatus(w, st) })
		},
	})
}

func newAPIKey() *cobra.Command {
	var tenant, expires, key string
	var until time.Time
	create := spec{
		use:   "create",
		short: "Create a key for a tenant and print it once (only its hash is stored)",
		args:  cobra.NoArgs,
		needs: needsRecords,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&tenant, "tenant", "default", "tenant the key acts for")
			cmd.Flags().StringVar(&expires, "expires", "", "expiry: a duration from now (720h) or an RFC 3339 time; empty never expires")
		},
		check: func(*call) (err error) {
			// Checked before anything is stored: a tenant that cannot be a
			// key prefix would give a key that only ever gets errors.
			if err := blob.ValidateTenant(tenant); err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			if until, err = parseExpiry(expires, time.Now()); err != nil {
				return err
			}
			key, err = newAPIKeyString()
			return err
		},
		run: func(c *call) error {
			k, err := c.deps.Store.CreateAPIKey(c.ctx(), tenant, key, until)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.out(), key)
			fmt.Fprintf(c.errOut(), "API key %s for tenant %s created; it is shown only this once.\n", k.ID, tenant)
			return nil
		},
	}
	var listTenant string
	list := spec{
		use:   "list",
		short: "List keys: id, prefix, tenant, created, expires, last used, revoked (never the key)",
		args:  cobra.NoArgs,
		needs: needsRecords, json: true,
		flags: func(cmd *cobra.Command) { cmd.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's keys") },
		run: func(c *call) error {
			keys, err := c.deps.Store.ListAPIKeys(c.ctx(), listTenant)
			if err != nil {
				return err
			}
			out := c.out()
			if c.json {
				return json.NewEncoder(out).Encode(keys)
			}
			tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPREFIX\tTENANT\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
			stamp := func(t time.Time) string {
				if t.IsZero() {
					return "-"
				}
				return t.Format(time.RFC3339)
			}
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Tenant, stamp(k.Created), stamp(k.Expires), stamp(k.LastUsed), stamp(k.Revoked))
			}
			return tw.Flush()
		},
	}
	var id string
	revoke := spec{
		use:   "revoke KEY|- | revoke --id ID",
		short: "Revoke a key by its id, or by the key itself (\"-\" reads it from stdin, keeping it out of the shell history)",
		args: func(cmd *cobra.Command, args []string) error {
			if (id == "") == (len(args) != 1) {
				return errors.New("give KEY (or -), or --id ID")
			}
			return nil
		},
		needs: needsRecords,
		flags: func(cmd *cobra.Command) { cmd.Flags().StringVar(&id, "id", "", "the key's id (from apikey list)") },
		run: func(c *call) error {
			var revoked bool
			var err error
			if id != "" {
				revoked, err = c.deps.Store.RevokeAPIKeyByID(c.ctx(), id)
			} else {
				key := c.args[0]
				if key == "-" {
					data, rerr := io.ReadAll(c.cmd.InOrStdin())
					if rerr != nil {
						return fmt.Errorf("read key: %w", rerr)
					}
					key = strings.TrimSpace(string(data))
				}
				revoked, err = c.deps.Store.RevokeAPIKey(c.ctx(), key)
			}
			if err != nil {
				return err
			}
			if !revoked {
				return errors.New("no live key matches")
			}
			fmt.Fprintln(c.errOut(), "key revoked")
			return nil
		},
	}
	return group("apikey", "Manage API keys of the HTTP gateway", "", create, list, revoke)
}

// parseExpiry reads --expires: empty is never, a duration is from now, or
// an RFC 3339 time in the future.
func parseExpiry(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires: %s is not in the future", v)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires: %q is neither a duration (720h) nor an RFC 3339 time", v)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("--expires: %s is not in the future", v)
	}
	return t, nil
}

// newAPIKeyString returns a random key: 32 bytes from the OS, URL-safe.
func newAPIKeyString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return "cck_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// oneLine folds line breaks so that a value fits a table cell, and
// escapes what could drive the terminal (see printable).
func oneLine(s string) string {
	return printable(strings.Join(strings.Fields(s), " "))
}

// printable escapes control and format characters (ESC sequences, bidi
// overrides, invalid UTF-8) as Go escapes, so that a stored value can
// never drive an operator's terminal.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clip shortens s to max characters, marking the cut.
// wrap breaks s at spaces into lines of at most width runes (a longer
// word stays whole), each after the first indented by indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		n := len([]rune(word))
		if i > 0 && line+1+n > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
}

func clip(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}
