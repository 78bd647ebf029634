package soak

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one component of the topology in its own process (a worker, an
// API replica, the Temporal server, versitygw). It can be killed and
// started again with the same arguments, so that a restarted API replica
// or Temporal server comes back on the same port and the proxies in
// front of it need no change.
type proc struct {
	name string
	role string // "worker", "api", "temporal", "s3"
	bin  string
	args []string
	env  []string
	log  string // appended to across restarts
	// ready is the URL that answers 200 once the process opened its
	// dependencies (a worker's /readyz on its METRICS_ADDR); empty when
	// not watched.
	ready string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// retired is set once a rolling deploy replaced the process: the
	// fault schedule and the supervisor leave it alone.
	retired bool
	// held is set while the fault schedule keeps the process down (between
	// its SIGKILL and its restart), so that the supervisor does not
	// restart it early.
	held bool
}

// setHeld marks the process as kept down (or not) by the schedule.
func (p *proc) setHeld(v bool) {
	p.mu.Lock()
	p.held = v
	p.mu.Unlock()
}

// supervised reports whether the supervisor should keep it running.
func (p *proc) supervised() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.held && !p.retired
}

// lastLine is the last line of the process's log: why it exited.
func (p *proc) lastLine() string {
	data := strings.TrimSpace(p.tail(2000))
	if i := strings.LastIndex(data, "\n"); i >= 0 {
		data = data[i+1:]
	}
	return data
}

// start launches the process. Its children die with the soak (Pdeathsig),
// so an interrupted soak leaves nothing behind.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "\n=== %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether the last started process is still alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to wait for the process to exit; it
// reports whether it did.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return true
	case <-time.After(wait):
		return false
	}
}

// kill is SIGKILL, waiting for the process to be gone.
func (p *proc) kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// pid is the current process's id, 0 when none runs.
func (p *proc) pid() int {
	if !p.running() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// rssKB is the process's resident set (VmRSS in /proc/<pid>/status), in
// KB; 0 when it does not run.
func (p *proc) rssKB() int64 {
	pid := p.pid()
	if pid == 0 {
		return 0
	}
	return readRSS(pid)
}

func readRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// liveHeapBytes reads the process's live heap (go_gc_heap_live_bytes)
// from the /metrics beside its ready URL.
func (p *proc) liveHeapBytes(ctx context.Context) (int64, error) {
	base, ok := strings.CutSuffix(p.ready, "/readyz")
	if !ok {
		return 0, fmt.Errorf("%s has no metrics address", p.name)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_gc_heap_live_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s metrics: go_gc_heap_live_bytes %q: %w", p.name, v, err)
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	return 0, fmt.Errorf("%s metrics: no go_gc_heap_live_bytes (status %d)", p.name, resp.StatusCode)
}

// tail is the last n bytes of the process's log, for a failure report.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// waitReady waits up to limit for p's ready URL to answer 200, as a
// Kubernetes readiness probe does. With exitFails, a process that has
// exited fails the wait at once (a start that cannot succeed); without,
// the wait goes on through a restart by the supervisor.
func (p *proc) waitReady(ctx context.Context, limit time.Duration, exitFails bool) error {
	if p.ready == "" {
		return nil
	}
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := c.Get(p.ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if exitFails && !p.running() {
			return fmt.Errorf("%s exited: %s", p.name, p.tail(4000))
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %s", p.name, limit, p.tail(4000))
}
