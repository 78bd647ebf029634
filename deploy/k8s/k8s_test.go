// Package k8s holds the Kubernetes manifests; this test checks that they
// give a working deployment: the worker's metrics are served and scraped,
// readiness means the dependencies answer, every pod has requests and a
// disruption budget, images are pinned, and every configured variable is
// one the README documents.
package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ctxcompact/orchestrator/internal/config"
)

// doc is one manifest, read generically.
type doc map[string]any

func (d doc) get(path ...string) any {
	var cur any = map[string]any(d)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func load(t *testing.T) []doc {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "the manifests must be beside this test")
	var out []doc
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			// Into a plain map: nested maps then decode as plain maps too.
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			if m != nil {
				out = append(out, doc(m))
			}
		}
	}
	return out
}

func byKind(docs []doc, kind, name string) doc {
	for _, d := range docs {
		if d["kind"] == kind && d.get("metadata", "name") == name {
			return d
		}
	}
	return nil
}

func container(t *testing.T, d doc) map[string]any {
	t.Helper()
	cs, _ := d.get("spec", "template", "spec", "containers").([]any)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

func envOf(c map[string]any) map[string]string {
	out := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		out[m["name"].(string)], _ = m["value"].(string)
	}
	return out
}

func TestManifestsDeployWhatShips(t *testing.T) {
	t.Parallel()
	docs := load(t)
	readme, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)

	for _, name := range []string{"compactor-worker", "compactor-gateway"} {
		dep := byKind(docs, "Deployment", name)
		require.NotNil(t, dep, name)
		c := container(t, dep)
		image, _ := c["image"].(string)
		require.NotContains(t, image, ":latest", "%s: pin the image", name)
		require.Contains(t, image, ":", "%s: pin the image", name)
		req, _ := c["resources"].(map[string]any)["requests"].(map[string]any)
		require.NotEmpty(t, req["cpu"], name)
		require.NotEmpty(t, req["memory"], name)
		ann, _ := dep.get("spec", "template", "metadata", "annotations").(map[string]any)
		require.Equal(t, "true", ann["prometheus.io/scrape"], "%s is scraped", name)
		pdb := byKind(docs, "PodDisruptionBudget", name)
		require.NotNil(t, pdb, "%s has a disruption budget", name)
		require.Equal(t, dep.get("spec", "selector", "matchLabels"), pdb.get("spec", "selector", "matchLabels"))
		for _, ref := range c["envFrom"].([]any) {
			m := ref.(map[string]any)
			for kind, v := range m {
				refName := v.(map[string]any)["name"].(string)
				want := map[string]string{"configMapRef": "ConfigMap", "secretRef": "Secret"}[kind]
				require.NotNil(t, byKind(docs, want, refName), "%s's %s %s is in the examples", name, want, refName)
			}
		}
	}

	// The run metrics come from the worker: it must serve them where the
	// annotation says.
	worker := byKind(docs, "Deployment", "compactor-worker")
	wenv := envOf(container(t, worker))
	require.NotEmpty(t, wenv["METRICS_ADDR"], "the worker serves its metrics")
	port := wenv["METRICS_ADDR"][strings.LastIndex(wenv["METRICS_ADDR"], ":")+1:]
	require.Equal(t, port, worker.get("spec", "template", "metadata", "annotations").(map[string]any)["prometheus.io/port"])

	// A rolling deploy replaces a worker only with a ready one, and the
	// worker is ready once it opened its dependencies.
	require.Equal(t, "/readyz", container(t, worker)["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"])
	require.Equal(t, port, fmt.Sprint(container(t, worker)["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["port"]))
	require.Equal(t, 0, worker.get("spec", "strategy", "rollingUpdate").(map[string]any)["maxUnavailable"])

	// Ready means Postgres, S3 and Temporal answer: /readyz, not /healthz.
	gw := container(t, byKind(docs, "Deployment", "compactor-gateway"))
	require.Equal(t, "/readyz", gw["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"])
	// It may wait STARTUP_TIMEOUT for them at start: the liveness probe
	// must not restart it meanwhile.
	startup := gw["startupProbe"].(map[string]any)
	window := time.Duration(startup["periodSeconds"].(int)*startup["failureThreshold"].(int)) * time.Second
	require.GreaterOrEqual(t, window, config.DefaultStartupTimeout, "the startup probe outlasts STARTUP_TIMEOUT")

	// Every variable the examples set is documented.
	for _, kind := range []string{"ConfigMap", "Secret"} {
		for _, d := range docs {
			if d["kind"] != kind {
				continue
			}
			data, _ := d["data"].(map[string]any)
			if data == nil {
				data, _ = d["stringData"].(map[string]any)
			}
			require.NotEmpty(t, data)
			for k := range data {
				require.Contains(t, string(readme), "`"+k+"`", "%s %s sets %s, which the README does not document", kind, d.get("metadata", "name"), k)
			}
		}
	}
	for _, c := range []map[string]any{container(t, worker), gw} {
		for k := range envOf(c) {
			require.Contains(t, string(readme), "`"+k+"`", "%s is not documented", k)
		}
	}
}
