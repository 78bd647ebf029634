package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/server"
)

func newServe() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP JSON API and web UI (HTTP_ADDR) until SIGTERM or Ctrl-C",
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

func newProxy() *cobra.Command {
	return &cobra.Command{
		Use:   "proxy",
		Short: "Serve only the provider-compatible proxy (HTTP_ADDR; PROXY_ANTHROPIC_URL, PROXY_OPENAI_URL) until SIGTERM or Ctrl-C",
		Long: `Serve only the provider-compatible proxy routes, /proxy/anthropic/v1/messages
(and count_tokens) and /proxy/openai/v1/chat/completions, with /healthz,
/readyz and /metrics: an agent points its provider base URL at
http://HTTP_ADDR/proxy/anthropic or http://HTTP_ADDR/proxy/openai/v1 and
sends the compactor's API key in X-Compactor-Key (docs/proxy.md).
'starter serve' serves the same routes beside the JSON API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			if cfg.ProxyAnthropicURL == "" && cfg.ProxyOpenAIURL == "" {
				// Said before the stack starts, not after.
				return errors.New("starter proxy: no upstream: set PROXY_ANTHROPIC_URL, PROXY_OPENAI_URL or both (docs/proxy.md)")
			}
			return serveWith(cmd.Context(), cfg, server.RunProxy)
		},
	}
}

// serve runs the API until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg config.Config) error {
	return serveWith(ctx, cfg, server.Run)
}

// serveWith runs run (server.Run or server.RunProxy) on HTTP_ADDR.
func serveWith(ctx context.Context, cfg config.Config, run func(context.Context, *app.Deps, *gateway.Gateway, net.Listener, *slog.Logger) error) error {
	logger := app.Logger(cfg)
	p, err := app.StartWaiting(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	return run(ctx, p.Deps, p.Gateway(p.Temporal), ln, logger)
}
