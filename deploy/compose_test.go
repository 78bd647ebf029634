// Package deploy holds what deploys: the Dockerfile, the Kubernetes
// manifests, the Grafana dashboard. This test checks the compose file at
// the repository's root, which CI cannot run (no Docker engine).
package deploy

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ctxcompact/orchestrator/contract"
)

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestComposeRunsWhatShips: pinned images, state on volumes, health
// checks the services wait on, the workflows' search attributes
// registered, the worker's metrics served, every variable documented.
func TestComposeRunsWhatShips(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(data, &c))
	readme, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)

	for name, s := range c.Services {
		require.NotEmpty(t, s.Image, name)
		require.Contains(t, s.Image, ":", "%s: pin the image", name)
		require.False(t, strings.HasSuffix(s.Image, ":latest"), "%s: pin the image", name)
		for k := range s.Environment {
			if strings.HasPrefix(k, "POSTGRES_") || strings.HasPrefix(k, "ROOT_") {
				continue // the images' own settings
			}
			require.Contains(t, string(readme), "`"+k+"`", "%s sets %s, which the README does not document", name, k)
		}
	}
	for _, name := range []string{"postgres", "temporal", "s3"} {
		s := c.Services[name]
		require.NotEmpty(t, s.Volumes, "%s keeps its state on a volume", name)
		vol := strings.SplitN(s.Volumes[0], ":", 2)[0]
		require.Contains(t, c.Volumes, vol, "%s's volume is declared", name)
	}
	for _, name := range []string{"postgres", "temporal", "gateway"} {
		require.NotNil(t, c.Services[name].Healthcheck, "%s has a health check", name)
	}
	require.Contains(t, c.Services["gateway"].Healthcheck.Test, "ready", "the gateway's check is `starter ready` (a distroless image has no curl)")
	worker := c.Services["worker"]
	for _, dep := range []string{"postgres", "temporal"} {
		require.Equal(t, "service_healthy", worker.DependsOn[dep].Condition, "the worker waits for %s", dep)
	}
	require.NotEmpty(t, worker.Environment["METRICS_ADDR"], "the run metrics come from the worker")
	require.Equal(t, "true", worker.Environment["TEMPORAL_SEARCH_ATTRIBUTES"])
	cmd := strings.Join(c.Services["temporal"].Command, " ")
	for _, sa := range []string{contract.SATenant.GetName(), contract.SASession.GetName(), contract.SAPreset.GetName(), contract.SAOutcome.GetName()} {
		require.Contains(t, cmd, sa+"=Keyword", "the namespace has the search attribute %s", sa)
	}
	require.Contains(t, cmd, "--db-filename", "Temporal keeps its state")
}
