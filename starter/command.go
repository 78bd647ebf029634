package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/ctxcompact/orchestrator/internal/app"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/config"
	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// needs is what a command opens from the environment before it runs, and
// closes after it.
type needs int

const (
	// needsNothing: the command opens nothing of the deployment.
	needsNothing needs = iota
	// needsRecords: Postgres only, for the commands that read or manage
	// records and never an object: they run without S3 credentials.
	needsRecords
	// needsObjects: Postgres and S3, for the commands that read objects.
	needsObjects
	// needsGateway: Postgres, S3 and Temporal, for the commands that start
	// workflows or wait for them.
	needsGateway
)

// spec is what a command says of itself: its help, its arguments, its
// own flags, what it needs opened and what it does. command adds what
// every command repeats: --tenant and --json when asked for, and opening
// what it needs before run and closing it after.
type spec struct {
	use, short, long string
	args             cobra.PositionalArgs
	needs            needs
	// tenant adds --tenant (tenantFlag), read as call.tenant. A command
	// of a group with a persistent --tenant reads that one instead.
	tenant bool
	// json adds --json (jsonFlag), read as call.json and followed by
	// call.print.
	json bool
	// flags adds the command's own flags.
	flags func(cmd *cobra.Command)
	// check runs before anything is opened: the checks of the command's
	// flags and arguments, so that their errors come first and need no
	// database.
	check func(c *call) error
	// run is the command's work, with what it needs opened.
	run func(c *call) error
}

// call is one run of a command: its arguments, its --tenant and --json,
// and what it needs, opened.
type call struct {
	cmd    *cobra.Command
	args   []string
	tenant string
	json   bool
	// deps is Postgres (needsRecords), with S3 (needsObjects, needsGateway).
	deps *app.Deps
	// audit reads the records (needsRecords) and the objects
	// (needsObjects, needsGateway).
	audit *audit.Service
	// gw is the gateway over Postgres, S3 and Temporal (needsGateway).
	gw *gateway.Gateway
}

func (c *call) ctx() context.Context { return c.cmd.Context() }

// out is standard output: the command's result.
func (c *call) out() io.Writer { return c.cmd.OutOrStdout() }

// errOut is standard error: progress and notes beside the result.
func (c *call) errOut() io.Writer { return c.cmd.ErrOrStderr() }

// print writes v as indented JSON with --json, else text writes it for a
// reader.
func (c *call) print(v any, text func(w io.Writer)) error {
	if c.json {
		return printJSON(c.out(), v)
	}
	text(c.out())
	return nil
}

// tenantFlag adds --tenant, whose default is $COMPACTOR_TENANT, else
// "default": every command that reads or changes a tenant's records.
func tenantFlag(cmd *cobra.Command, tenant *string) {
	cmd.Flags().StringVar(tenant, "tenant", config.Tenant(), "tenant (default $COMPACTOR_TENANT, else default)")
}

// jsonFlag adds --json: print JSON for scripts instead of a table.
func jsonFlag(cmd *cobra.Command, asJSON *bool) {
	cmd.Flags().BoolVar(asJSON, "json", false, "print JSON")
}

// printJSON writes v indented, for scripts.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// command builds the command s describes.
func command(s spec) *cobra.Command {
	return s.build(nil)
}

// group is a command that holds subcommands only. With tenantUsage set it
// gives them one persistent --tenant, so described, which their
// call.tenant reads.
func group(use, short, tenantUsage string, subs ...spec) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	var tenant *string
	if tenantUsage != "" {
		tenant = new(string)
		cmd.PersistentFlags().StringVar(tenant, "tenant", config.Tenant(), tenantUsage)
	}
	for _, s := range subs {
		cmd.AddCommand(s.build(tenant))
	}
	return cmd
}

// build builds the command; a non-nil groupTenant is its group's
// persistent --tenant.
func (s spec) build(groupTenant *string) *cobra.Command {
	var tenant string
	var asJSON bool
	cmd := &cobra.Command{Use: s.use, Short: s.short, Long: s.long, Args: s.args}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c := &call{cmd: cmd, args: args, tenant: tenant, json: asJSON}
		if groupTenant != nil {
			c.tenant = *groupTenant
		}
		if s.check != nil {
			if err := s.check(c); err != nil {
				return err
			}
		}
		closeAll, err := c.open(s.needs)
		if err != nil {
			return err
		}
		defer closeAll()
		return s.run(c)
	}
	if s.tenant {
		tenantFlag(cmd, &tenant)
	}
	if s.flags != nil {
		s.flags(cmd)
	}
	if s.json {
		jsonFlag(cmd, &asJSON)
	}
	return cmd
}

// open opens from the environment what a command needs; closeAll closes
// it.
func (c *call) open(n needs) (closeAll func(), err error) {
	if n == needsNothing {
		return func() {}, nil
	}
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	switch n {
	case needsRecords:
		deps, err := app.OpenStore(c.ctx(), cfg)
		if err != nil {
			return nil, err
		}
		c.deps, c.audit = deps, &audit.Service{Store: deps.Store}
		return deps.Close, nil
	case needsObjects:
		deps, err := app.Open(c.ctx(), cfg)
		if err != nil {
			return nil, err
		}
		c.deps, c.audit = deps, &audit.Service{Store: deps.Store, Blob: deps.Blob}
		return deps.Close, nil
	default:
		p, err := app.Start(c.ctx(), cfg)
		if err != nil {
			return nil, err
		}
		c.deps, c.audit, c.gw = p.Deps, &audit.Service{Store: p.Store, Blob: p.Blob}, p.Gateway(p.Temporal)
		return p.Close, nil
	}
}
