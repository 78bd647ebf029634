// Command starter is the operator's and the agent platform's entry point:
// it inspects conversations, submits compactions to a running deployment
// and waits for them. Configuration comes from the environment (docs/configuration.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/clitable"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "starter",
		Short:         "Context-compression orchestrator: inspect and compact agent conversations",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newInspect(), newCompact(), newServe(), newProxy(), newMCP(), newReady())
	root.AddCommand(auditCommands()...)
	return root
}

// readInput reads a file, or stdin for "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

func newInspect() *cobra.Command {
	var presets []string
	var model string
	var limit int
	return command(spec{
		use:   "inspect FILE|-",
		short: "Measure a conversation and show what each preset would do (no LLM, nothing stored)",
		args:  cobra.ExactArgs(1),
		json:  true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringSliceVar(&presets, "preset", nil, "presets to show (default: all)")
			cmd.Flags().StringVar(&model, "model", "gpt-4o", "the agent's model (picks the encoding and the default limit)")
			cmd.Flags().IntVar(&limit, "limit", 0, "context limit in the preset's unit (default: the preset's, else the model's)")
		},
		run: func(c *call) error {
			data, err := readInput(c.args[0], c.cmd.InOrStdin())
			if err != nil {
				return err
			}
			conv, err := conversation.ParseAny(data)
			if err != nil {
				return fmt.Errorf("%s: %w", c.args[0], err)
			}
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			limits, err := cfg.TokenLimits()
			if err != nil {
				return err
			}
			if len(presets) == 0 {
				presets = policy.Names()
			}
			var reports []plan.Report
			for _, name := range presets {
				p, err := policy.Resolve(name, cfg.PresetOverrides[name])
				if err != nil {
					return err
				}
				r, err := plan.Inspect(conv, p, model, limit, limits)
				if err != nil {
					return err
				}
				reports = append(reports, r)
			}
			return c.print(map[string]any{"format": conv.Format, "messages": len(conv.Messages), "presets": reports}, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %s conversation, %d messages\n\n", c.args[0], conv.Format, len(conv.Messages))
				clitable.Inspect(w, reports)
			})
		},
	})
}

func newCompact() *cobra.Command {
	var ev gateway.Event
	var overrides string
	var wait time.Duration
	var asJSON bool
	var outPath string
	return command(spec{
		use:   "compact FILE|-",
		short: "Submit a conversation to the running deployment and wait for the compacted result",
		args:  cobra.ExactArgs(1),
		needs: needsGateway, tenant: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&ev.Session, "session", "cli", "session")
			cmd.Flags().StringVar(&ev.EventID, "event-id", "", "event id (default: a new one); the same id twice returns the same run")
			cmd.Flags().StringVar(&ev.Kind, "kind", gateway.KindManual, "threshold, checkpoint or manual")
			cmd.Flags().StringVar(&ev.Model, "model", "gpt-4o", "the agent's model")
			cmd.Flags().IntVar(&ev.ContextLimit, "limit", 0, "context limit (default: the preset's, else the model's)")
			cmd.Flags().StringVar(&ev.Preset, "preset", "", "preset (default: COMPACTOR_DEFAULT_PRESET)")
			cmd.Flags().StringVar(&overrides, "overrides", "", `preset overrides as JSON, e.g. '{"history":{"keep_last":4}}'`)
			cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the run")
			cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
			cmd.Flags().StringVarP(&outPath, "output", "o", "", "write the compacted conversation to this file")
		},
		check: func(c *call) error {
			data, err := readInput(c.args[0], c.cmd.InOrStdin())
			if err != nil {
				return err
			}
			ev.Tenant = c.tenant
			ev.Conversation = data
			if overrides != "" {
				ev.Overrides = json.RawMessage(overrides)
			}
			if ev.EventID == "" {
				ev.EventID = fmt.Sprintf("cli-%d", time.Now().UnixNano())
			}
			return nil
		},
		run: func(c *call) error {
			return compactAndReport(c.ctx(), c.gw, ev, wait, asJSON, outPath, c.out(), c.errOut())
		},
	})
}

// compactAndReport submits an event, shows progress while waiting, prints
// the report and optionally writes the compacted conversation.
func compactAndReport(ctx context.Context, gw *gateway.Gateway, ev gateway.Event, wait time.Duration, asJSON bool, outPath string, out, progress io.Writer) error {
	sub, err := gw.Submit(ctx, ev)
	var ie *gateway.InputError
	if errors.As(err, &ie) {
		return fmt.Errorf("bad input: %w", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "run %s submitted (existing: %v); waiting…\n", sub.RunID, sub.Existing)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stopProgress := showProgress(wctx, gw, sub.RunID, progress)
	_, err = gw.Wait(wctx, sub.RunID)
	stopProgress()
	if err != nil {
		return fmt.Errorf("run %s: %w", sub.RunID, err)
	}
	// The outcome is read from the run's row, as the API answers it.
	res, err := (&audit.Service{Store: gw.Store, Blob: gw.Blob}).RunOutcome(ctx, ev.Tenant, sub.RunID)
	if err != nil {
		return fmt.Errorf("run %s: %w", sub.RunID, err)
	}
	if outPath != "" {
		data, err := gw.Blob.GetVerified(ctx, res.OutputKey, res.OutputSHA256)
		if err != nil {
			return fmt.Errorf("read output: %w", err)
		}
		if err := os.WriteFile(outPath, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", outPath, err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	clitable.Run(out, res)
	if outPath != "" {
		fmt.Fprintf(out, "compacted conversation written to %s\n", outPath)
	}
	return nil
}

// showProgress prints the last step a run finished while it waits, each
// time it changes, read every half second: from the run's workflow (its
// progress query), else from its step records in Postgres (runs that
// write each record at once).
func showProgress(ctx context.Context, gw *gateway.Gateway, runID string, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			name, attempt, ok := lastStep(ctx, gw, runID)
			if ok && name != last {
				last = name
				fmt.Fprintf(w, "  … %s (attempt %d)\n", name, attempt)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// lastStep is the last step a run finished: from its progress query when
// its workflow answers one with steps, else from Postgres.
func lastStep(ctx context.Context, gw *gateway.Gateway, runID string) (name string, attempt int, ok bool) {
	if p, err := gw.Progress(ctx, runID); err == nil && len(p.Steps) > 0 {
		s := p.Steps[len(p.Steps)-1]
		return s.Name, s.Attempt, true
	}
	steps, err := gw.Store.ListSteps(ctx, runID)
	if err != nil || len(steps) == 0 {
		return "", 0, false
	}
	s := steps[len(steps)-1]
	return s.Name, s.Attempt, true
}
