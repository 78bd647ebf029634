package main

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/config"
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

// serve runs the API until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg config.Config) error {
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
	return server.Run(ctx, p.Deps, p.Gateway(p.Temporal), ln, logger)
}
