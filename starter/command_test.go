package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestCommandSpec: command gives a spec its --tenant and --json, runs
// check before run (and a failed check stops it), and group hands its
// persistent --tenant to its commands.
func TestCommandSpec(t *testing.T) {
	t.Parallel()
	var ran []string
	s := spec{
		use: "echo", tenant: true, json: true,
		check: func(c *call) error {
			ran = append(ran, "check")
			if len(c.args) > 0 && c.args[0] == "bad" {
				return errors.New("bad argument")
			}
			return nil
		},
		run: func(c *call) error {
			ran = append(ran, "run")
			return c.print(map[string]string{"tenant": c.tenant}, func(w io.Writer) { fmt.Fprintf(w, "tenant %s\n", c.tenant) })
		},
	}
	exec := func(cmd *cobra.Command, args ...string) (string, error) {
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}

	out, err := exec(command(s), "--tenant", "acme")
	require.NoError(t, err)
	require.Equal(t, "tenant acme\n", out)
	require.Equal(t, []string{"check", "run"}, ran)

	out, err = exec(command(s), "--tenant", "acme", "--json")
	require.NoError(t, err)
	require.Equal(t, "{\n  \"tenant\": \"acme\"\n}\n", out)

	ran = nil
	_, err = exec(command(s), "bad")
	require.EqualError(t, err, "bad argument")
	require.Equal(t, []string{"check"}, ran, "a failed check runs nothing")

	s.tenant = false
	g := group("g", "a group", "the tenant", s)
	require.Nil(t, g.Commands()[0].Flags().Lookup("tenant"), "the group's --tenant, not its own")
	out, err = exec(g, "echo", "--tenant", "other")
	require.NoError(t, err)
	require.Equal(t, "tenant other\n", out)
}
