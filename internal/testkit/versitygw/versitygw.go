// Package versitygw starts and stops versitygw, a production S3 gateway,
// as a local S3 server over a folder (its posix backend). The tests'
// shared S3 server (blob/blobtest) and the bench (cmd/bench) both use
// it; neither production binary does.
package versitygw

import (
	"bytes"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// startTimeout bounds the wait for versitygw to answer after launch.
const startTimeout = 30 * time.Second

// Find looks for the binary in PATH, then in each GOPATH's bin, where
// `go install` (and deploy/install-versitygw.sh) puts it.
func Find() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("versitygw binary not found in PATH or GOPATH/bin (run deploy/install-versitygw.sh)")
}

// Version is what `bin --version` names its version ("" if it does not
// say): versitygw prints "Version  : git" and more lines.
func Version(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if _, v, ok := strings.Cut(first, ":"); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// Server is a running versitygw.
type Server struct {
	// Endpoint is its base URL; Addr its host:port.
	Endpoint string
	Addr     string
	// PID is its process id.
	PID  int
	stop func() error
}

// Start runs bin's posix backend over dir (created if missing) on a free
// loopback port, with the given root credentials, and waits until it
// answers. Object metadata goes to xattrs where dir's filesystem has
// them, else to a sidecar folder. The kernel kills the server if the
// calling process dies without Stop (Linux).
func Start(bin, dir, accessKey, secretKey string) (*Server, error) {
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("versitygw data dir: %w", err)
	}
	var backendArgs []string
	if err := checkXattr(root); err != nil {
		side := filepath.Join(dir, "sidecar")
		if err := os.MkdirAll(side, 0o755); err != nil {
			return nil, fmt.Errorf("versitygw sidecar dir: %w", err)
		}
		backendArgs = append(backendArgs, "--sidecar", side)
	}
	// The port is picked by listening on :0 and releasing it; another
	// process could grab it in between, so a failed start is retried.
	var lastErr error
	for try := 0; try < 3; try++ {
		srv, err := launch(bin, root, backendArgs, accessKey, secretKey)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// Stop kills the server and waits for it to exit. It is safe to call more
// than once.
func (s *Server) Stop() error {
	return s.stop()
}

func launch(bin, root string, backendArgs []string, accessKey, secretKey string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", addr, "--quiet", "posix"}, backendArgs...)
	args = append(args, root)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+accessKey, "ROOT_SECRET_KEY="+secretKey)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	// exited is closed once the process is gone, so any number of waiters
	// can watch it.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	endpoint := "http://" + addr
	if err := waitReady(endpoint, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return nil, fmt.Errorf("versitygw on %s: %w (exit: %v); output: %s", addr, err, waitErr, output.String())
	}
	var once sync.Once
	return &Server{Endpoint: endpoint, Addr: addr, PID: cmd.Process.Pid, stop: func() error {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited // a kill's "signal: killed" is expected, not an error
		})
		return nil
	}}, nil
}

// waitReady polls until the server answers HTTP at all (an unsigned
// request gets 403, which proves it is serving) or the process exits.
func waitReady(endpoint string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before serving")
		default:
		}
		resp, err := client.Get(endpoint + "/")
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not serving after %s", startTimeout)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	return addr, nil
}
