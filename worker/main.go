// Command worker runs the compaction workflows and activities. It reads
// its configuration from the environment (docs/configuration.md) and stops
// on SIGINT/SIGTERM within WORKER_STOP_TIMEOUT (and 5 s); what it had in
// flight, Temporal retries on another worker.
package main

import (
	"fmt"
	"log/slog"
	"os"

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
	ctx, stop := app.SignalContext()
	defer stop()
	p, err := app.StartWaiting(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if cfg.TenantRunsInFlight > 0 {
		p.Metrics.WatchAdmission(p.AdmissionLoad)
	}
	if cfg.MetricsAddr != "" {
		stopMetrics, err := app.ServeMetrics(cfg.MetricsAddr, p.Metrics)
		if err != nil {
			return err
		}
		defer stopMetrics()
		slog.Info("serving metrics", "addr", cfg.MetricsAddr)
	}
	if err := app.EnsureRetentionSchedule(ctx, p.Temporal, cfg); err != nil {
		return err
	}
	w := p.NewWorkers(p.Temporal)
	slog.Info("worker started", "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace, "task_queue", cfg.TaskQueue, "llm_task_queue", cfg.LLMTaskQueue, "llm_rate_per_second", cfg.LLMRatePerSecond)
	// Run ends with ctx, on SIGINT or SIGTERM, however early it came, and
	// stops the workers at once, bounded by WORKER_STOP_TIMEOUT.
	if err := w.Run(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}
