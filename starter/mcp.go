package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/mcp"
)

// newMCP is `starter mcp`: the MCP server over stdio for a local agent.
// Like `compact`, it is the gateway in-process: it talks to Temporal,
// Postgres and S3 with the environment's settings, and acts for one
// tenant (--tenant, else COMPACTOR_TENANT). Standard output carries the
// protocol only; logs go to standard error.
func newMCP() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the MCP tools and resources over stdio for a local agent (one tenant)",
		Long: "Serve the MCP server over stdin/stdout (newline-delimited JSON-RPC) for a local agent: the tools\n" +
			"compress_to_checkpoint, recover_context, search_context and context_status, and the resources\n" +
			"ctxcompact://runs/{run}/output and /original, for one tenant. It runs the gateway in-process against\n" +
			"Temporal, Postgres and S3 (the environment, as for `starter compact`); a worker must run. See docs/mcp.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := blob.ValidateTenant(tenant); err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			ctx := cmd.Context()
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			p, err := app.StartWaiting(ctx, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			gw := p.Gateway(p.Temporal)
			svc, err := mcp.New(mcp.Deps{Gateway: gw, Audit: &audit.Service{Store: p.Store, Blob: p.Blob, Breaker: gw.Breaker},
				Logger: app.Logger(cfg)})
			if err != nil {
				return err
			}
			return svc.ServeStdio(ctx, tenant)
		},
	}
	tenantFlag(cmd, &tenant)
	return cmd
}
