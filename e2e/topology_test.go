//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/client"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestProductionTopology runs the deployment as in production, each part
// its own process: the stack (a Temporal server; `dev -worker=false`), the
// tests' S3 server (versitygw under .ci/run),
// two `bin/worker` processes and `bin/starter serve`, over a Postgres
// schema of this test. Events arrive over HTTP in several sessions; one
// worker is SIGKILLed under load; every run completes exactly once, and
// the API's and the surviving worker's /metrics reflect the runs.
func TestProductionTopology(t *testing.T) {
	t.Parallel()
	devBin := buildCommand(t, "cmd/dev")
	workerBin := buildCommand(t, "worker")
	starterBin := buildCommand(t, "starter")
	llm := llmtest.New(llmtest.WithLatency(300 * time.Millisecond))
	t.Cleanup(llm.Close)
	dbURL := storetest.NewURL(t)
	st := storetest.Open(t, dbURL)

	// The stack, in its own process; it prints the settings to use.
	stackDir, err := os.MkdirTemp("", "topology-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(stackDir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(stackDir) })
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
	stack := startWorkerProcess(t, devBin, "stack", base, "-dir", stackDir, "-worker=false")
	settings := readSettings(t, stack)

	taskQueue := "topology-" + strings.ReplaceAll(t.Name(), "/", "-")
	env := append(append([]string{}, base...), settings...)
	// S3 is the tests' S3 server in its own process (versitygw under
	// .ci/run), not the stack's embedded one: later entries win.
	s3 := blobtest.NewConfig(t)
	env = append(env, "S3_ENDPOINT="+s3.Endpoint, "S3_BUCKET="+s3.Bucket, "S3_ACCESS_KEY="+s3.AccessKey,
		"S3_SECRET_KEY="+s3.SecretKey, "S3_PATH_STYLE=true")
	t.Logf("S3: %s at %s", blobtest.ServerName(t), s3.Endpoint)
	env = append(env, "TEMPORAL_TASK_QUEUE="+taskQueue, "OPENAI_BASE_URL="+llm.URL(), "OPENAI_API_KEY=test-key",
		"LOG_LEVEL=warn", "BREAKER_RUNS=0")
	metricsAddr := freeAddr(t)
	first := startWorkerProcess(t, workerBin, "worker-1", env)
	second := startWorkerProcess(t, workerBin, "worker-2", append(append([]string{}, env...), "METRICS_ADDR="+metricsAddr))
	apiAddr := freeAddr(t)
	startWorkerProcess(t, starterBin, "api", append(append([]string{}, env...), "HTTP_ADDR="+apiAddr), "serve")

	keyOut, err := runCommand(starterBin, env, "apikey", "create", "--tenant", "topo")
	require.NoError(t, err, "%s", keyOut)
	key := strings.TrimSpace(strings.SplitN(keyOut, "\n", 2)[0])
	c := client.New("http://"+apiAddr, key, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitFor(t, ctx, time.Minute, "the API to be ready", func() bool {
		resp, err := http.Get("http://" + apiAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Load: nine events over three sessions, each run a history summary
	// on the slow summarizer.
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	var runs []string
	for i := 0; i < 9; i++ {
		_, acc, err := c.Submit(ctx, fmt.Sprintf("session-%d", i%3), client.Event{EventID: fmt.Sprintf("ev-%d", i), Kind: "manual",
			Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		require.NoError(t, err)
		runs = append(runs, acc.RunID)
	}
	waitFor(t, ctx, time.Minute, "runs under way", func() bool {
		return len(llm.Calls()) > 0
	})
	first.kill() // SIGKILL, under load

	for _, id := range runs {
		var run client.RunAnswer
		for !run.Final() {
			run, err = c.WaitRun(ctx, id, 30*time.Second)
			require.NoError(t, err)
		}
		require.Equal(t, "succeeded", run.Status, "run %s: %s", id, run.Error)
	}
	all, err := st.ListRuns(ctx, store.RunFilter{Tenant: "topo"})
	require.NoError(t, err)
	require.Len(t, all, len(runs), "every event ran exactly once")
	objects, err := blob.New(ctx, s3)
	require.NoError(t, err)
	for _, r := range all {
		require.Equal(t, store.RunSucceeded, r.Status)
		_, err := objects.GetVerified(ctx, r.OutputKey, r.OutputSHA256)
		require.NoError(t, err, "run %s's output is in the S3 server", r.ID)
	}
	second.checkAlive()

	api := scrape(t, "http://"+apiAddr+"/metrics")
	require.Contains(t, api, `compactor_http_requests_total{route="POST /v1/sessions/{session}/events",status="202"} 9`)
	work := scrape(t, "http://"+metricsAddr+"/metrics")
	require.Contains(t, work, `compactor_runs_total{format="openai",outcome="succeeded",preset="offload-compact"}`)
	require.Contains(t, work, "temporal_")
}

// readSettings waits for the `export K="V"` lines the stack prints once it
// runs, in its log.
func readSettings(t *testing.T, stack *workerProcess) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(stack.log)
		require.NoError(t, err)
		if strings.Contains(string(data), "export S3_PATH_STYLE=") {
			var env []string
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, found := strings.Cut(strings.TrimPrefix(line, "export "), "="); found && strings.HasPrefix(line, "export ") {
					env = append(env, k+"="+strings.Trim(v, `"`))
				}
			}
			return env
		}
		stack.checkAlive()
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the stack did not print its settings within 3 minutes")
	return nil
}

// runCommand runs bin to completion and returns its standard output.
func runCommand(bin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.Output()
	return string(out), err
}

// freeAddr is a free 127.0.0.1 address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// scrape reads a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(data)
}
