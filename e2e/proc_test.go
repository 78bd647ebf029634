//go:build linux

// The worker-process test is Linux only: its children get a parent-death
// signal (Pdeathsig), so that a test binary that dies without running its
// cleanups (a panic, a timeout) leaves no worker polling behind.

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// workerProcess is a running binary of the repository (a worker, the API,
// the stack).
type workerProcess struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	log    string // file holding its stdout and stderr
	exited chan struct{}
}

// startWorkerProcess starts bin with args and exactly env as its
// environment. It is killed when the test ends, and its output is logged
// if the test failed.
func startWorkerProcess(t *testing.T, bin, name string, env []string, args ...string) *workerProcess {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start worker %s: %v", name, err)
	}
	p := &workerProcess{t: t, name: name, cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of worker %s:\n%s", name, p.output())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *workerProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("worker %s (pid %d) still running 10s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// checkAlive fails the test if the process has exited on its own.
func (p *workerProcess) checkAlive() {
	p.t.Helper()
	select {
	case <-p.exited:
		p.t.Fatalf("worker %s exited on its own (%v); output:\n%s", p.name, p.cmd.ProcessState, p.output())
	default:
	}
}

// output is the last 8 KB of the process's output.
func (p *workerProcess) output() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(data) > 8<<10 {
		data = data[len(data)-8<<10:]
	}
	return string(bytes.TrimSpace(data))
}

func TestWorkerKilledMidRun(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "worker")

	// The worker processes and the test share one schema and one bucket;
	// the test's env has no worker of its own on the task queue.
	dbURL := storetest.NewURL(t)
	st := storetest.Open(t, dbURL)
	bcfg := blobtest.NewConfig(t)
	bs, err := blob.New(context.Background(), bcfg)
	require.NoError(t, err)
	e := newEnv(t, noWorker(), withBlob(bs), withLLM(llmtest.WithLatency(500*time.Millisecond)))
	e.store, e.gw.Store = st, st

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(), // no user's AWS or other config leaks in
		"TEMPORAL_ADDRESS=" + server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE=" + server.GetDefaultNamespace(),
		"TEMPORAL_TASK_QUEUE=" + e.taskQueue,
		"DATABASE_URL=" + dbURL,
		"S3_ENDPOINT=" + bcfg.Endpoint,
		"S3_BUCKET=" + bcfg.Bucket,
		"S3_ACCESS_KEY=" + bcfg.AccessKey,
		"S3_SECRET_KEY=" + bcfg.SecretKey,
		"S3_PATH_STYLE=true",
		"OPENAI_BASE_URL=" + e.llm.URL(),
		"OPENAI_API_KEY=test-key",
		// Longer than the wait for the hung calls (15s at most), so the
		// first worker still waits on them when killed.
		"LLM_TIMEOUT=20s",
	}
	first := startWorkerProcess(t, bin, "first", env)

	// 400,000 characters: eight chunk summaries, enough for a kill in the
	// middle of them.
	input := hugeReact(t, "swe-agent-deepseek/django__django-11742.json", 400000)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	// Three chunk summaries at a time, 500ms each.
	const hung = 3
	sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "s1", EventID: "ev-1", Preset: "react-two-layer",
		Overrides: overrides(t, map[string]any{"large_result": map[string]any{"parallelism": hung}}), Conversation: input})
	require.NoError(t, err)

	// The run's records reach Postgres with its end; while it runs, its
	// workflow's progress query says which steps ended.
	waitFor(t, ctx, time.Minute, "a chunk summary to end", func() bool {
		first.checkAlive()
		p, err := e.gw.Progress(ctx, sub.RunID)
		if err != nil {
			return false
		}
		for _, s := range p.Steps {
			if strings.Contains(s.Name, "/summarize/") {
				return true
			}
		}
		return false
	})
	// The next three calls hang, filling the three slots, so that the
	// kill surely lands in the middle of summaries. Three calls in flight
	// with none finishing for 2s (four times the latency) are those.
	e.llm.Enqueue(llmtest.FaultTimeout{}, llmtest.FaultTimeout{}, llmtest.FaultTimeout{})
	waitFor(t, ctx, 15*time.Second, "three summarizer calls to hang", func() bool {
		first.checkAlive()
		if e.llm.InFlight() != hung {
			return false
		}
		done := len(e.llm.Calls())
		time.Sleep(2 * time.Second)
		return e.llm.InFlight() == hung && len(e.llm.Calls()) == done
	})
	first.kill()
	killedAt := time.Now()
	second := startWorkerProcess(t, bin, "second", env)

	res, err := e.gw.Wait(ctx, sub.RunID)
	second.checkAlive()
	require.NoError(t, err, "run %s after the first worker was killed", sub.RunID)
	t.Logf("run finished %s after the kill", time.Since(killedAt).Round(time.Second))

	checkRun(t, e, input, sub, res)
	checkOneRun(t, e, "s1", sub.RunID)
	run := mustRun(t, e, sub.RunID)
	require.Equal(t, res.OutputKey, run.OutputKey, "the committed output is the workflow's")
	require.Equal(t, res.OutputSHA256, run.OutputSHA256)

	// The kill cut the hung calls short: each was answered by no one.
	cut := 0
	for _, c := range e.llm.Calls() {
		if c.Status == 499 && c.PromptChars > 0 {
			cut++
		}
	}
	require.Equal(t, hung, cut, "the hung summarizer calls ended with the first worker")

	// Their attempts died with the first worker, unrecorded, and ran
	// again on the second one as later attempts.
	list := steps(t, e, sub.RunID)
	recorded := make(map[string]bool, len(list))
	for _, s := range list {
		recorded[stepKey(s.Name, s.Attempt)] = true
	}
	resumed := 0
	for _, s := range list {
		if s.Kind == "llm" && s.Attempt > 1 && s.Error == "" && !recorded[stepKey(s.Name, s.Attempt-1)] {
			resumed++
		}
	}
	require.Equal(t, hung, resumed, "each summary interrupted by the kill was retried on the second worker")
}

// procStack is the deployment in processes for the kill tests: the dev
// stack's Temporal server (-worker=false, kept on a folder so that it can
// be killed and started again), a Postgres schema of the test, the tests'
// S3 server, and the environment the product's processes get.
type procStack struct {
	dev   string
	dir   string
	base  []string
	stack *workerProcess
	store *store.Store
	s3    blob.Config
	// env is what a worker or a starter of this deployment runs with.
	env []string
}

// startProcStack starts it; extra is added to env.
func startProcStack(t *testing.T, extra ...string) *procStack {
	t.Helper()
	p := &procStack{dev: buildCommand(t, "cmd/dev"), dir: t.TempDir(), s3: blobtest.NewConfig(t)}
	dbURL := storetest.NewURL(t)
	p.store = storetest.Open(t, dbURL)
	p.base = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DATABASE_URL=" + dbURL}
	p.stack = startWorkerProcess(t, p.dev, "stack", p.base, "-dir", p.dir, "-worker=false")
	p.env = append(append(append([]string{}, p.base...), readSettings(t, p.stack)...), "S3_ENDPOINT="+p.s3.Endpoint,
		"S3_BUCKET="+p.s3.Bucket, "S3_ACCESS_KEY="+p.s3.AccessKey, "S3_SECRET_KEY="+p.s3.SecretKey, "S3_PATH_STYLE=true",
		"LOG_LEVEL=warn")
	p.env = append(p.env, extra...)
	return p
}

// killServer SIGKILLs the Temporal server and starts it again on its
// files, returning once it serves.
func (p *procStack) killServer(t *testing.T) {
	t.Helper()
	p.stack.kill()
	p.stack = startWorkerProcess(t, p.dev, "stack-again", p.base, "-dir", p.dir, "-worker=false")
	readSettings(t, p.stack)
}
