// Command dev is the one-command demo and development stack: it starts an
// in-process Temporal server on a SQLite file, Postgres (DATABASE_URL, or a
// throw-away cluster from the local PostgreSQL binaries), an S3-compatible
// store on a local folder and a worker, then compacts a conversation (the
// shipped sample by default) and prints the before/after report and where
// the archive is. With --serve it keeps the stack running for `starter`.
//
// It links the Temporal server, so it lives under deploy/, apart from the
// production binaries.
package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/clitable"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/devkit/devstack"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/server"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// demoTenant is the tenant of the demo run and of the printed API key.
const demoTenant = "demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

// sample is the demo conversation, embedded so that the command works
// from any directory: a real SWE-bench run of 141 messages (the copy of
// testdata/conversations/django__django-11742.json, provenance there).
//
//go:embed sample.json
var sample []byte

func run() error {
	dir := flag.String("dir", ".devstack", "folder for the stack's state (Temporal SQLite file, Postgres cluster, S3 objects, ports.json)")
	file := flag.String("file", "", "conversation to compact (default: the embedded sample, a real SWE-bench run); \"none\" skips the demo")
	temporalPort := flag.Int("temporal-port", 0, "Temporal frontend port (default: the port this -dir used last, else a free one)")
	s3Port := flag.Int("s3-port", 0, "S3 port (default: the port this -dir used last, else a free one)")
	pgPort := flag.Int("pg-port", 0, "private Postgres port (default: the port this -dir used last, else a free one)")
	runWorker := flag.Bool("worker", true, "run a worker in this process (false: the stack only, for separate worker processes; implies -file none)")
	httpAddr := flag.String("http", "", "also serve the HTTP API on this address (e.g. 127.0.0.1:8080) and print an API key for tenant demo; implies -serve")
	preset := flag.String("preset", "", "preset (default: COMPACTOR_DEFAULT_PRESET, adaptive)")
	model := flag.String("model", "gpt-4o", "the agent's model")
	limit := flag.Int("limit", 40000, "context limit in the preset's unit; the default puts the sample over its thresholds")
	out := flag.String("o", "", "write the compacted conversation to this file")
	serve := flag.Bool("serve", false, "keep the stack and worker running after the demo (Ctrl-C stops)")
	flag.Parse()
	if *httpAddr != "" {
		*serve = true
	}
	if !*runWorker {
		*file, *serve = "none", true
	}

	ctx, stop := app.SignalContext()
	defer stop()

	fmt.Println("starting the embedded stack in", *dir, "…")
	started := time.Now()
	stack, err := devstack.Start(ctx, devstack.Options{Dir: *dir, DatabaseURL: os.Getenv("DATABASE_URL"), Log: os.Stderr,
		TemporalPort: *temporalPort, S3Port: *s3Port, PostgresPort: *pgPort})
	if err != nil {
		return fmt.Errorf("start stack: %w", err)
	}
	defer stack.Close()
	// The stack's addresses become the configuration, exactly as a real
	// deployment passes them through the environment.
	if os.Getenv("LOG_LEVEL") == "" {
		// The demo prints its own report; the worker's info lines would
		// bury it.
		_ = os.Setenv("LOG_LEVEL", "warn")
	}
	for k, v := range map[string]string{
		"TEMPORAL_ADDRESS": stack.TemporalAddress, "TEMPORAL_NAMESPACE": stack.Namespace,
		"DATABASE_URL": stack.DatabaseURL, "S3_ENDPOINT": stack.S3Endpoint, "S3_BUCKET": stack.S3Bucket,
		"S3_ACCESS_KEY": stack.S3AccessKey, "S3_SECRET_KEY": stack.S3SecretKey, "S3_PATH_STYLE": "true",
		"TEMPORAL_SEARCH_ATTRIBUTES": "true",
	} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	if os.Getenv("WEBHOOK_ALLOW_HOSTS") == "" {
		// A webhook receiver on this machine's port 9000, over plain
		// http: entries are host:port, so that an endpoint cannot reach
		// the stack's other ports (Postgres, the API).
		_ = os.Setenv("WEBHOOK_ALLOW_HOSTS", "127.0.0.1:9000,localhost:9000,[::1]:9000")
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	p, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	deps, c := p.Deps, p.Temporal
	// The stack's namespace gets the workflows' search attributes, so that
	// `temporal workflow list --query 'CompactionTenant="demo"'` works.
	if err := app.RegisterSearchAttributes(ctx, c, cfg.TemporalNamespace); err != nil {
		return err
	}
	if *runWorker {
		if err := app.EnsureRetentionSchedule(ctx, c, cfg); err != nil {
			return err
		}
		w := deps.NewWorkers(c)
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
	}
	summarizer := "offline extractive summarizer (set OPENAI_BASE_URL for an LLM)"
	if cfg.OpenAIBaseURL != "" {
		summarizer = cfg.OpenAIBaseURL + " model " + cfg.SummarizerModel
	}
	fmt.Printf("stack ready in %s: temporal %s, s3 %s, summarizer: %s\n\n", time.Since(started).Round(time.Millisecond), stack.TemporalAddress, stack.S3Endpoint, summarizer)

	gw := deps.Gateway(c)
	if *file != "none" {
		if err := demo(ctx, deps, gw, stack, *dir, *file, *preset, *model, *limit, *out); err != nil {
			return err
		}
	}
	if !*serve {
		return nil
	}
	if *httpAddr != "" {
		key, stopHTTP, err := serveAPI(ctx, deps, gw, *dir, *httpAddr)
		if err != nil {
			return err
		}
		defer stopHTTP()
		fmt.Printf("\nHTTP API on http://%s (tenant demo), API key:\n  %s\n", *httpAddr, key)
		fmt.Printf("ui http://%s/ui/ (sign in with that key)\n", *httpAddr)
	}
	fmt.Println("\nstack running; Ctrl-C stops. Settings for worker and starter (the ports stay the same for this -dir):")
	if os.Getenv("COMPACTOR_TENANT") == "" {
		// The demo's tenant: the CLI then shows the runs the printed key
		// made.
		_ = os.Setenv("COMPACTOR_TENANT", demoTenant)
	}
	for _, k := range []string{"COMPACTOR_TENANT", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_SEARCH_ATTRIBUTES", "DATABASE_URL", "S3_ENDPOINT", "S3_BUCKET", "S3_ACCESS_KEY", "S3_SECRET_KEY", "S3_PATH_STYLE", "WEBHOOK_ALLOW_HOSTS"} {
		fmt.Printf("export %s=%q\n", k, os.Getenv(k))
	}
	<-ctx.Done()
	return nil
}

// demo compacts one conversation and prints the report.
func demo(ctx context.Context, deps *app.Deps, gw *gateway.Gateway, stack *devstack.Stack, dir, file, preset, model string, limit int, out string) error {
	data, name := sample, "the embedded sample (django__django-11742, 141 messages)"
	if file != "" {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		name = file
	}
	file = name
	ev := gateway.Event{
		Tenant: demoTenant, Session: "demo", EventID: fmt.Sprintf("dev-%d", time.Now().UnixNano()), Kind: gateway.KindThreshold,
		Model: model, ContextLimit: limit, Preset: preset, Conversation: data,
	}
	sub, err := gw.Submit(ctx, ev)
	if err != nil {
		return fmt.Errorf("submit %s: %w", file, err)
	}
	fmt.Printf("compacting %s (run %s)…\n", file, sub.RunID)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := gw.Wait(wctx, sub.RunID); err != nil {
		return fmt.Errorf("run %s: %w", sub.RunID, err)
	}
	res, err := (&audit.Service{Store: deps.Store, Blob: deps.Blob}).RunOutcome(ctx, ev.Tenant, sub.RunID)
	if err != nil {
		return fmt.Errorf("run %s: %w", sub.RunID, err)
	}
	clitable.Run(os.Stdout, res)
	fmt.Printf("\nthe original is archived (sha256 verified) at s3://%s/%s under %s/s3\n", stack.S3Bucket, res.ArchiveKey, dir)
	body, err := deps.Blob.GetVerified(ctx, res.OutputKey, res.OutputSHA256)
	if err != nil {
		return fmt.Errorf("read output: %w", err)
	}
	printSummary(body)
	if out != "" {
		if err := os.WriteFile(out, body, 0o644); err != nil {
			return err
		}
		fmt.Println("compacted conversation written to", out)
	}
	return nil
}

// summaryLines bounds the summary printed by the demo.
const summaryLines = 60

// printSummary prints the summary the agent gets in place of its older
// messages, the first thing a new user wants to judge.
func printSummary(output []byte) {
	conv, err := conversation.ParseAny(output)
	if err != nil {
		return
	}
	for _, m := range conv.Messages {
		if !strategy.IsSummary(m) {
			continue
		}
		for _, b := range m.Blocks {
			if b.Kind != conversation.KindText {
				continue
			}
			lines := strings.Split(b.Text, "\n")
			fmt.Printf("\nthe summary the agent gets in place of its older messages (%d lines):\n\n", len(lines))
			for i, l := range lines {
				if i == summaryLines {
					fmt.Printf("  … %d more lines (-out FILE writes the whole compacted conversation)\n", len(lines)-summaryLines)
					break
				}
				fmt.Println("  " + l)
			}
			return
		}
	}
}

// serveAPI serves the HTTP API and web UI on addr as `starter serve`
// does (internal/server: limits, draining, reconciler) and returns a key
// of tenant demo: the one it printed before for this -dir, or a new one.
func serveAPI(ctx context.Context, deps *app.Deps, gw *gateway.Gateway, dir, addr string) (string, func(), error) {
	key, err := demoKey(ctx, deps, dir)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s (-http): %w", addr, err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := server.Run(sctx, deps, gw, ln, app.Logger(deps.Config)); err != nil {
			fmt.Fprintln(os.Stderr, "HTTP API:", err)
		}
	}()
	return key, func() { stop(); <-done }, nil
}

// demoKeyFile holds the demo tenant's API key in the stack's folder, so
// that a restart of the stack on the same -dir keeps the key a newcomer
// already exported (only its hash is in Postgres).
const demoKeyFile = "demo-api-key"

// demoKey returns the stack's demo API key: the one kept in dir while it
// still signs in, else a new one, kept there (mode 0600).
func demoKey(ctx context.Context, deps *app.Deps, dir string) (string, error) {
	path := filepath.Join(dir, demoKeyFile)
	if data, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(data))
		if _, ok, err := deps.Store.Authenticate(ctx, key); err == nil && ok {
			return key, nil
		}
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	key := "cck_dev_" + hex.EncodeToString(raw)
	if _, err := deps.Store.CreateAPIKey(ctx, demoTenant, key, time.Time{}); err != nil {
		return "", fmt.Errorf("create the demo API key: %w", err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the demo API key in %s: %w", path, err)
	}
	return key, nil
}
