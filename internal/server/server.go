// Package server runs the HTTP API process: the API and web UI handler
// with the tenant and authentication limits, the reconciler, and a
// graceful shutdown. `starter serve` and the dev command both run it, so
// that what a newcomer tries is what production runs.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/mcp"
	"github.com/ctxcompact/orchestrator/internal/proxy"
	"github.com/ctxcompact/orchestrator/internal/ratelimit"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// ShutdownGrace is how long a stopping server lets requests in flight
// finish. Waiting requests are told to stop waiting first, so this only
// covers submissions and reads.
const ShutdownGrace = 30 * time.Second

// The reconciler's pace: a run is looked at once it is older than
// ReconcileAfter (far longer than a queued run waits for its start), every
// reconcileEvery.
const (
	reconcileEvery = time.Minute
	// ReconcileAfter is also `starter reconcile`'s default.
	ReconcileAfter = 15 * time.Minute
)

// llmPing is the readiness check of the configured summarizer endpoint,
// nil when none is configured (the offline summarizer needs no network).
func llmPing(deps *app.Deps) func(context.Context) error {
	if p, ok := deps.Summarizer.(interface{ Ping(context.Context) error }); ok {
		return p.Ping
	}
	return nil
}

// Run serves the API on ln until ctx ends, then shuts down gracefully:
// waiting requests answer 202 with their run id, requests in flight get
// ShutdownGrace. The reconciler runs beside it.
func Run(ctx context.Context, deps *app.Deps, gw *gateway.Gateway, ln net.Listener, logger *slog.Logger) error {
	return run(ctx, deps, gw, ln, logger, false)
}

// RunProxy is Run for the proxy's routes alone (`starter proxy`), with
// the health, readiness and metrics routes beside them.
func RunProxy(ctx context.Context, deps *app.Deps, gw *gateway.Gateway, ln net.Listener, logger *slog.Logger) error {
	if deps.Config.ProxyAnthropicURL == "" && deps.Config.ProxyOpenAIURL == "" {
		return errors.New("starter proxy: no upstream: set PROXY_ANTHROPIC_URL, PROXY_OPENAI_URL or both (docs/proxy.md)")
	}
	return run(ctx, deps, gw, ln, logger, true)
}

func run(ctx context.Context, deps *app.Deps, gw *gateway.Gateway, ln net.Listener, logger *slog.Logger, proxyOnly bool) error {
	cfg := deps.Config
	draining, drain := context.WithCancel(context.Background())
	defer drain()
	auditSvc := &audit.Service{Store: deps.Store, Blob: deps.Blob, Breaker: gw.Breaker}
	// The MCP server at /mcp: the same gateway and audit service as the
	// JSON API, behind its authentication and tenant limits.
	mcpSvc, err := mcp.New(mcp.Deps{Gateway: gw, Audit: auditSvc, MaxWait: httpapi.DefaultMaxWait,
		MaxRequestBytes: cfg.MaxRequestBytes, Draining: draining, Logger: logger})
	if err != nil {
		return err
	}
	handler := httpapi.New(httpapi.Deps{
		Gateway: gw, Audit: auditSvc,
		Store: deps.Store, Blob: deps.Blob, MaxRequestBytes: cfg.MaxRequestBytes,
		MaxWait: httpapi.DefaultMaxWait, Draining: draining, Logger: logger,
		Limits:                ratelimit.Limits{RatePerSecond: cfg.TenantRatePerSecond, Burst: cfg.TenantBurst, Concurrent: cfg.TenantConcurrent},
		AuthFailuresPerMinute: cfg.AuthFailuresPerMinute, TrustedProxies: cfg.TrustedProxies, UISessionTTL: cfg.UISessionTTL,
		Metrics: deps.Metrics, MCP: mcpSvc.HTTPHandler(), LLM: llmPing(deps),
		Proxy: ProxyConfig(cfg), ProxyOnly: proxyOnly,
	})
	srv := &http.Server{
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
	logger.Info("serving HTTP API", "addr", ln.Addr().String(), "max_request_bytes", cfg.MaxRequestBytes)

	rctx, stopReconcile := context.WithCancel(ctx)
	defer stopReconcile()
	go reconcileLoop(rctx, gw, logger)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down HTTP API", "grace", ShutdownGrace.String())
	drain()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
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

// ProxyConfig is the proxy's part of the configuration.
func ProxyConfig(cfg config.Config) proxy.Config {
	limits, err := cfg.TokenLimits()
	if err != nil {
		limits = tokens.DefaultLimits() // config.Load has checked them
	}
	return proxy.Config{AnthropicURL: cfg.ProxyAnthropicURL, OpenAIURL: cfg.ProxyOpenAIURL, Trigger: cfg.ProxyTrigger,
		Target: cfg.ProxyTarget, WaitFor: cfg.ProxyWait, SilentWait: !cfg.ProxyInterim, ColdAfter: cfg.ProxyColdAfter, ColdTrigger: cfg.ProxyColdTrigger, Preset: cfg.DefaultPreset, Limits: limits, MaxRequestBytes: cfg.MaxRequestBytes}
}

// reconcileLoop marks failed, every reconcileEvery, the live runs that no
// workflow will finish, and starts the claimed runs that never reached
// Temporal (gateway.Reconcile), until ctx ends. Several API processes may
// run it: marking a run failed happens at most once.
func reconcileLoop(ctx context.Context, g *gateway.Gateway, logger *slog.Logger) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := g.Reconcile(ctx, ReconcileAfter)
		if err != nil {
			logger.Warn("reconcile runs", "error", err)
			continue
		}
		for id, why := range res.Failed {
			logger.Warn("reconciler marked a run failed", "run", id, "reason", why)
		}
		for _, id := range res.Started {
			logger.Info("reconciler started a run claimed while Temporal was down", "run", id)
		}
	}
}
