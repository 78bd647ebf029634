// Command worker runs the compaction workflows and activities. It reads
// its configuration from the environment (see README) and stops cleanly
// on SIGINT/SIGTERM, letting running activities finish.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/worker"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	deps, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer deps.Close()
	c, err := app.DialWith(cfg, deps.Metrics)
	if err != nil {
		return err
	}
	defer c.Close()
	if cfg.MetricsAddr != "" {
		stopMetrics, err := app.ServeMetrics(cfg.MetricsAddr, deps.Metrics)
		if err != nil {
			return err
		}
		defer stopMetrics()
		slog.Info("serving metrics", "addr", cfg.MetricsAddr)
	}
	if err := app.EnsureRetentionSchedule(ctx, c, cfg); err != nil {
		return err
	}
	w := deps.NewWorkers(c)
	slog.Info("worker started", "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace, "task_queue", cfg.TaskQueue, "llm_task_queue", cfg.LLMTaskQueue, "llm_rate_per_second", cfg.LLMRatePerSecond)
	// worker.InterruptCh stops polling on a signal and waits for the
	// activities in flight, which is the graceful shutdown we want.
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}
