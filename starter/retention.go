package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// newRetention reads and changes a tenant's retention, as the API's
// /v1/retention routes do, for an operator.
func newRetention() *cobra.Command {
	show := spec{
		use:   "show",
		short: "Print the tenant's retention in days, or that its runs are kept for good",
		args:  cobra.NoArgs,
		needs: needsRecords,
		run: func(c *call) error {
			days, ok, err := c.deps.Store.Retention(c.ctx(), c.tenant)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(c.out(), "tenant %s: no retention, runs are kept for good\n", c.tenant)
				return nil
			}
			fmt.Fprintf(c.out(), "tenant %s: final runs are deleted %s days after they end\n", c.tenant,
				strconv.FormatFloat(days, 'f', -1, 64))
			return nil
		},
	}
	var days int
	set := spec{
		use:   "set DAYS",
		short: "Delete the tenant's final runs and their objects DAYS days after they end",
		args:  cobra.ExactArgs(1),
		needs: needsRecords,
		check: func(c *call) (err error) {
			days, err = strconv.Atoi(c.args[0])
			if err != nil || days < 1 || days > 36500 {
				return fmt.Errorf("DAYS: %q is not a whole number of days from 1 to 36500", c.args[0])
			}
			return nil
		},
		run: func(c *call) error {
			if err := c.deps.Store.SetRetention(c.ctx(), c.tenant, float64(days)); err != nil {
				return err
			}
			fmt.Fprintf(c.out(), "tenant %s: final runs are deleted %d days after they end\n", c.tenant, days)
			return nil
		},
	}
	unset := spec{
		use:   "unset",
		short: "Keep the tenant's runs for good again",
		args:  cobra.NoArgs,
		needs: needsRecords,
		run: func(c *call) error {
			if err := c.deps.Store.UnsetRetention(c.ctx(), c.tenant); err != nil {
				return err
			}
			fmt.Fprintf(c.out(), "tenant %s: no retention, runs are kept for good\n", c.tenant)
			return nil
		},
	}
	return group("retention", "Show, set or unset how long a tenant's final runs are kept",
		"tenant (default $COMPACTOR_TENANT, else default)", show, set, unset)
}
