package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
)

// shutdownGrace is how long a stopping server lets requests in flight
// finish. Waiting requests are told to stop waiting first, so this only
// covers submissions and reads.
const shutdownGrace = 30 * time.Second

func newServe() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP JSON API (HTTP_ADDR) until SIGTERM or Ctrl-C",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg)
		},
	}
}

// serve runs the API until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg config.Config) error {
	logger := app.Logger(cfg)
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

	draining, drain := context.WithCancel(context.Background())
	defer drain()
	gw := deps.Gateway(c)
	handler := httpapi.New(httpapi.Deps{
		Gateway: gw, Audit: &audit.Service{Store: deps.Store, Blob: deps.Blob, Breaker: gw.Breaker},
		Store: deps.Store, Blob: deps.Blob, MaxRequestBytes: cfg.MaxRequestBytes,
		MaxWait: httpapi.DefaultMaxWait, Draining: draining, Logger: logger,
		Limits:                ratelimit.Limits{RatePerSecond: cfg.TenantRatePerSecond, Burst: cfg.TenantBurst, Concurrent: cfg.TenantConcurrent},
		AuthFailuresPerMinute: cfg.AuthFailuresPerMinute, TrustedProxies: cfg.TrustedProxies, UISessionTTL: cfg.UISessionTTL,
		Metrics: deps.Metrics,
	})
	srv := &http.Server{
		Addr:              cfg.HTTPAddr,
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// A full-size body over a slow link must still arrive.
		ReadTimeout: 5 * time.Minute,
		// Longer than the longest wait a request may ask for.
		WriteTimeout:   httpapi.DefaultMaxWait + time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	logger.Info("serving HTTP API", "addr", ln.Addr().String(), "max_request_bytes", cfg.MaxRequestBytes)

	rctx, stopReconcile := context.WithCancel(ctx)
	defer stopReconcile()
	go reconcileLoop(rctx, deps.Gateway(c), logger)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down HTTP API", "grace", shutdownGrace.String())
	drain()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// The reconciler's pace: a run is looked at once it is older than
// reconcileAfter (far longer than a queued run waits for its start), every
// reconcileEvery.
const (
	reconcileEvery = time.Minute
	reconcileAfter = 15 * time.Minute
)

// reconcileLoop marks failed, every reconcileEvery, the live runs that no
// workflow will finish (gateway.Reconcile), until ctx ends. Several API
// processes may run it: marking a run failed happens at most once.
func reconcileLoop(ctx context.Context, g *gateway.Gateway, logger *slog.Logger) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := g.Reconcile(ctx, reconcileAfter)
		if err != nil {
			logger.Warn("reconcile runs", "error", err)
			continue
		}
		for id, why := range res.Failed {
			logger.Warn("reconciler marked a run failed", "run", id, "reason", why)
		}
	}
}
