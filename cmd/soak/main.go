// Command soak is the chaos soak an operator runs before trusting a build
// in production (`make soak`): it starts the production topology as
// separate processes (the Temporal server, versitygw, N workers, two API
// replicas, over a fresh database on the Postgres cluster of -postgres),
// with Toxiproxy on every link of the workers and the APIs, posts events
// from several tenants over HTTP while killing components and degrading
// links, and checks the end state (see internal/soak). It prints a table,
// appends it to BENCHMARKS.md with -benchmarks, and exits 1 when a check
// failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ctxcompact/orchestrator/internal/soak"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
}

func run() error {
	var cfg soak.Config
	flag.IntVar(&cfg.Events, "events", 2000, "events to post (each one run; about 2% more invalid ones are posted and must be refused)")
	flag.IntVar(&cfg.Sessions, "sessions", 60, "sessions, spread evenly over the tenants")
	flag.IntVar(&cfg.Tenants, "tenants", 3, "tenants")
	flag.IntVar(&cfg.Workers, "workers", 2, "worker processes")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long faults are injected; the events are spread over it")
	flag.Float64Var(&cfg.FaultRate, "fault-rate", 1, "scale of the fault schedule: 1 is a SIGKILL every 10s and a link fault every 8s on average; 0 none")
	flag.DurationVar(&cfg.Settle, "settle", 5*time.Minute, "bound for every accepted run to be final once the faults stopped")
	flag.IntVar(&cfg.Concurrency, "concurrency", 8, "clients posting at once")
	flag.IntVar(&cfg.ReplayMax, "replay-max", 0, "replay at most this many runs' histories (0: all)")
	flag.StringVar(&cfg.PostgresURL, "postgres", envOr("SOAK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"admin URL of the Postgres cluster; the run creates its own database there")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the run's database and folder")
	flag.StringVar(&cfg.DataDir, "data", "testdata/conversations", "conversations to post")
	flag.StringVar(&cfg.Dir, "dir", "", "folder for the processes' state and logs (default: a new temporary one)")
	bench := flag.String("benchmarks", "", "append the table to this file (BENCHMARKS.md)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Dir == "" {
		d, err := soak.DefaultDir()
		if err != nil {
			return err
		}
		cfg.Dir = d
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
	}
	cfg.Log = os.Stderr
	bins, err := build(ctx, filepath.Join(cfg.Dir, "bin"))
	if err != nil {
		return err
	}
	cfg.Bins = bins
	started := time.Now()
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var b strings.Builder
	rep.Table(&b)
	fmt.Fprintf(&b, "Wall time %s on %s.\n\n", time.Since(started).Round(time.Second), machine())
	fmt.Print(b.String())
	if *bench != "" {
		f, err := os.OpenFile(*bench, os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteString("\n" + b.String()); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
	return nil
}

// build compiles the worker, the starter and cmd/dev (the Temporal
// server's process) from this checkout.
func build(ctx context.Context, dir string) (soak.Bins, error) {
	bins := soak.Bins{Worker: filepath.Join(dir, "worker"), Starter: filepath.Join(dir, "starter"), Dev: filepath.Join(dir, "dev")}
	for out, pkg := range map[string]string{bins.Worker: "./worker", bins.Starter: "./starter", bins.Dev: "./cmd/dev"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return bins, fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return bins, nil
}

func machine() string {
	return fmt.Sprintf("%d cores", numCPU())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func numCPU() int { return runtime.NumCPU() }
