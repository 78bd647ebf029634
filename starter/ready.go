package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// newReady checks a running API's readiness: the container healthcheck
// of an image with no shell or curl (distroless).
func newReady() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "ready",
		Short: "Exit 0 when the HTTP API at --url answers 200 (its /readyz: Postgres, S3 and Temporal answer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get(url)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: %s answered %d", url, resp.StatusCode)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ready")
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080/readyz", "the API's readiness URL")
	return cmd
}
