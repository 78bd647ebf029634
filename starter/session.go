package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// sessionArg is the session a command names: its first argument, or the
// --session flag (kept as an alias of the argument); rest are the other
// arguments. Both given must agree; neither is an error saying how to
// name it.
func sessionArg(cmd, flag string, args []string) (session string, rest []string, err error) {
	switch {
	case flag != "" && len(args) > 0 && args[0] == flag:
		return flag, args[1:], nil
	case flag != "":
		return flag, args, nil
	case len(args) > 0 && args[0] != "":
		return args[0], args[1:], nil
	}
	return "", nil, fmt.Errorf("name the session: starter %s SESSION (or --session SESSION)", cmd)
}

// oneSession is the one session a command names (sessionArg), for the
// commands that take no other argument.
func oneSession(cmd, flag string, args []string) (string, error) {
	session, rest, err := sessionArg(cmd, flag, args)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("two sessions named: %q and --session %q", rest[0], session)
	}
	return session, nil
}

// newSession holds the session commands: erasure.
func newSession() *cobra.Command {
	var by string
	var wait time.Duration
	del := spec{
		use:   "delete SESSION",
		short: "Erase a session: its conversations, outputs, offloads and history rows, leaving a tombstone (needs Temporal)",
		args:  cobra.ExactArgs(1),
		needs: needsGateway, tenant: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&by, "by", "operator", "who asks, recorded on the tombstone")
			cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the erasure to finish")
		},
		run: func(c *call) error {
			session := c.args[0]
			e, wf, err := c.gw.EraseSession(c.ctx(), c.tenant, session, "cli "+by)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.errOut(), "erasure %s of session %s under way (workflow %s)\n", e.ID, session, wf)
			deadline := time.Now().Add(wait)
			for {
				e, err = c.gw.Store.GetErasure(c.ctx(), c.tenant, e.ID)
				if err != nil {
					return err
				}
				if !e.FinishedAt.IsZero() {
					fmt.Fprintf(c.out(), "erased session %s: %d runs, %d rows, %d objects deleted, %d kept (held by another session)\n",
						session, e.Runs, e.RowsDeleted, e.ObjectsDeleted, e.ObjectsKept)
					return nil
				}
				if time.Now().After(deadline) {
					fmt.Fprintf(c.out(), "erasure %s still under way; it goes on without this command\n", e.ID)
					return nil
				}
				time.Sleep(500 * time.Millisecond)
			}
		},
	}
	return group("session", "Erase a session", "", del)
}

// printStatus prints the report in the three-tier design's layout. The
// figures are the session's state: its runs and promoted replays. A
// replay that was not promoted is listed as audit only, and a run a
// promoted replay repaired as replaced, so that a reader never takes a
// what-if for the session's life, nor counts a repair twice.
func printStatus(w io.Writer, st audit.SessionStatus) {
	fmt.Fprintf(w, "## Context Status Report: %s/%s\n", st.Tenant, st.Session)
	fmt.Fprintf(w, "**Timestamp:** %s\n", st.Time.Format(time.RFC3339))
	repairs := map[string]string{}
	for _, p := range st.Promotions {
		repairs[p.RunID] = p.ReplayOf
	}
	if st.LastRunID == "" {
		fmt.Fprintf(w, "**Estimated Usage:** unknown (no run succeeded yet)\n")
	} else {
		after := "after run " + st.LastRunID
		if orig, ok := repairs[st.LastRunID]; ok {
			after = fmt.Sprintf("after promoted replay %s of run %s", st.LastRunID, orig)
		}
		fmt.Fprintf(w, "**Estimated Usage:** %.1f%% (%d of %d, %s)\n", st.Usage*100, st.Tokens, st.ContextLimit, after)
		fmt.Fprintf(w, "**Level:** %s\n", st.Level)
	}
	fmt.Fprintf(w, "\n### Current State\n")
	fmt.Fprintf(w, "- **Tool results offloaded:** %d (%d tokens saved)\n", st.Offloads, st.OffloadTokens)
	fmt.Fprintf(w, "- **Tool inputs truncated:** %d (%d tokens saved)\n", st.Truncations, st.TruncatedTokens)
	fmt.Fprintf(w, "- **Summarisations performed:** %d\n", st.Summarisations)
	if st.Watermark != "" {
		fmt.Fprintf(w, "- **Watermark:** %s\n", st.Watermark)
	}
	var counts []string
	for _, s := range []store.RunStatus{store.RunSucceeded, store.RunOverLimit, store.RunFailed, store.RunRunning, store.RunPending} {
		if n := st.Runs[string(s)]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(w, "- **Runs:** %s\n", strings.Join(counts, ", "))
	for _, p := range st.Promotions {
		fmt.Fprintf(w, "- **Promoted replay:** %s repairs run %s (the session's state since %s)\n", p.RunID, p.ReplayOf, p.PromotedAt.UTC().Format(time.RFC3339))
	}
	if st.Replays > 0 {
		fmt.Fprintf(w, "- **Replays:** %d (audit only: not the session's state)\n", st.Replays)
	}
	if st.Breaker != nil {
		fmt.Fprintf(w, "- **Breaker:** open until %s: %s\n", st.Breaker.Until.Format(time.RFC3339), oneLine(st.Breaker.Reason))
	}
	if st.Recommendation != "" {
		fmt.Fprintf(w, "\n### Recommendation\n%s\n", st.Recommendation)
	}
	fmt.Fprintf(w, "\n### Compression History\n| Time | Run | Type | Count | Tokens Saved |\n|------|-----|------|-------|--------------|\n")
	for _, h := range st.History {
		run := h.RunID
		switch {
		case h.Replay:
			run += " (replay, audit only)"
		case h.Promoted:
			run += " (promoted replay)"
		case h.Superseded:
			run += " (replaced by its promoted replay)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d |\n", h.Time.Format(time.RFC3339), run, h.Type, h.Count, h.TokensSaved)
	}
}
