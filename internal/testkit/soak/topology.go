package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/testkit/versitygw"
)

// S3 credentials of the soak's versitygw.
const (
	s3AccessKey = "soak"
	s3SecretKey = "soak-secret-key"
	s3Bucket    = "soak"
)

// topology is the production deployment of one soak run, each component
// its own process: the Temporal server (cmd/dev -worker=false, its SQLite
// file kept in a folder so that a SIGKILL and a restart lose nothing),
// versitygw, the workers and two API replicas, over a fresh Postgres
// database. Every link from a worker or an API replica to Postgres, S3
// and Temporal goes through a Toxiproxy proxy of links; the soak itself
// reaches them directly.
type topology struct {
	cfg   Config
	dir   string
	links *links

	dbName  string
	dbURL   string // direct, for the soak's checks
	adminDB string

	temporalAddr string // direct
	namespace    string
	s3           blob.Config // direct
	hookAddr     string      // the webhook receiver

	temporal *proc
	s3proc   *proc
	apis     []*proc
	apiAddrs []string

	mu      sync.Mutex
	workers []*proc
	nextID  int

	workerEnv []string
	apiEnv    []string
}

// startTopology starts everything and returns once both API replicas
// answer /readyz with 200.
func startTopology(ctx context.Context, cfg Config, hookAddr string) (*topology, error) {
	t := &topology{cfg: cfg, dir: cfg.Dir, links: newLinks(), adminDB: cfg.PostgresURL, hookAddr: hookAddr}
	if err := t.createDatabase(ctx); err != nil {
		return nil, err
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(t.dir, "home")}
	if err := os.MkdirAll(filepath.Join(t.dir, "home"), 0o755); err != nil {
		return nil, err
	}

	// The Temporal server, on fixed ports so that a restart serves where
	// the proxies point.
	tport, err := freePort()
	if err != nil {
		return nil, err
	}
	sport, err := freePort()
	if err != nil {
		return nil, err
	}
	t.temporalAddr = "127.0.0.1:" + strconv.Itoa(tport)
	t.temporal = &proc{name: "temporal", role: "temporal", bin: cfg.Bins.Dev, log: filepath.Join(t.dir, "temporal.log"),
		args: []string{"-dir", filepath.Join(t.dir, "temporal"), "-worker=false", "-temporal-port", strconv.Itoa(tport), "-s3-port", strconv.Itoa(sport)},
		env:  append(append([]string{}, base...), "DATABASE_URL="+t.dbURL, "LOG_LEVEL=warn")}
	if err := t.startTemporal(ctx); err != nil {
		return nil, err
	}

	// versitygw, on a fixed port.
	vbin, err := versitygw.Find()
	if err != nil {
		return nil, err
	}
	s3Addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	root, side := filepath.Join(t.dir, "s3", "root"), filepath.Join(t.dir, "s3", "sidecar")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(side, 0o755); err != nil {
		return nil, err
	}
	t.s3proc = &proc{name: "versitygw", role: "s3", bin: vbin, log: filepath.Join(t.dir, "versitygw.log"),
		args: []string{"--port", s3Addr, "--quiet", "posix", "--sidecar", side, root},
		env:  append(append([]string{}, base...), "ROOT_ACCESS_KEY="+s3AccessKey, "ROOT_SECRET_KEY="+s3SecretKey)}
	t.s3 = blob.Config{Endpoint: "http://" + s3Addr, Bucket: s3Bucket, AccessKey: s3AccessKey, SecretKey: s3SecretKey, PathStyle: true}
	if err := t.startS3(ctx); err != nil {
		return nil, err
	}
	store, err := blob.New(ctx, t.s3)
	if err != nil {
		return nil, err
	}
	if err := store.EnsureBucket(ctx); err != nil {
		return nil, fmt.Errorf("create bucket: %w", err)
	}

	// The proxies: each side's own link to each dependency.
	pgHost, err := hostOf(t.dbURL)
	if err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	for _, side := range []string{"worker", "api"} {
		for dep, up := range map[string]string{"pg": pgHost, "s3": s3Addr, "temporal": t.temporalAddr} {
			a, err := t.links.add(side+"-"+dep, up)
			if err != nil {
				return nil, err
			}
			addrs[side+"-"+dep] = a
		}
	}
	envFor := func(side string) []string {
		u, _ := url.Parse(t.dbURL)
		u.Host = addrs[side+"-pg"]
		return append(append([]string{}, base...),
			"DATABASE_URL="+u.String(),
			"TEMPORAL_ADDRESS="+addrs[side+"-temporal"], "TEMPORAL_NAMESPACE="+t.namespace,
			"TEMPORAL_SEARCH_ATTRIBUTES=true",
			"S3_ENDPOINT=http://"+addrs[side+"-s3"], "S3_BUCKET="+s3Bucket, "S3_ACCESS_KEY="+s3AccessKey,
			"S3_SECRET_KEY="+s3SecretKey, "S3_PATH_STYLE=true",
			"WEBHOOK_ALLOW_HOSTS="+hookAddr, "LOG_LEVEL=warn")
	}
	t.workerEnv, t.apiEnv = envFor("worker"), envFor("api")
	t.workerEnv = append(t.workerEnv, cfg.WorkerEnv...)
	if cfg.RunsInFlight > 0 {
		t.workerEnv = append(t.workerEnv, fmt.Sprintf("TENANT_RUNS_IN_FLIGHT=%d", cfg.RunsInFlight))
	}

	for i := 0; i < cfg.Workers; i++ {
		if _, err := t.addWorker(); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 2; i++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p := &proc{name: fmt.Sprintf("api-%d", i+1), role: "api", bin: cfg.Bins.Starter, args: []string{"serve"},
			log: filepath.Join(t.dir, fmt.Sprintf("api-%d.log", i+1)), env: append(append([]string{}, t.apiEnv...), "HTTP_ADDR="+addr),
			ready: "http://" + addr + "/readyz"}
		if err := p.start(); err != nil {
			return nil, err
		}
		t.apis, t.apiAddrs = append(t.apis, p), append(t.apiAddrs, addr)
	}
	for _, a := range t.apis {
		if err := a.waitReady(ctx, 2*time.Minute, true); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// createDatabase makes the run's own database on the cluster of the
// admin URL, so that nothing of another run (or of the tests) is counted.
func (t *topology) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, t.adminDB)
	if err != nil {
		return fmt.Errorf("postgres %s: %w", redact(t.adminDB), err)
	}
	defer conn.Close(ctx)
	t.dbName = "soak_" + time.Now().UTC().Format("20060102_150405") + "_" + randomHex(3)
	if _, err := conn.Exec(ctx, "create database "+pgx.Identifier{t.dbName}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", t.dbName, err)
	}
	u, err := url.Parse(t.adminDB)
	if err != nil {
		return err
	}
	u.Path = "/" + t.dbName
	t.dbURL = u.String()
	return nil
}

// dropDatabase removes the run's database (Keep leaves it for a look).
func (t *topology) dropDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, t.adminDB)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "drop database if exists "+pgx.Identifier{t.dbName}.Sanitize()+" with (force)")
	return err
}

// startTemporal starts the server and waits for the settings it prints
// once it serves (the Nth time, after N starts).
func (t *topology) startTemporal(ctx context.Context) error {
	before := strings.Count(readFile(t.temporal.log), "export S3_PATH_STYLE=")
	if err := t.temporal.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		data := readFile(t.temporal.log)
		if strings.Count(data, "export S3_PATH_STYLE=") > before {
			if _, v, ok := strings.Cut(data[strings.LastIndex(data, "export TEMPORAL_NAMESPACE="):], "="); ok {
				line, _, _ := strings.Cut(v, "\n")
				t.namespace = strings.Trim(line, `"`)
			}
			return nil
		}
		if !t.temporal.running() {
			return fmt.Errorf("temporal server exited: %s", t.temporal.tail(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("temporal server not serving after 3 minutes: %s", t.temporal.tail(4000))
}

// startS3 starts versitygw and waits until it answers HTTP.
func (t *topology) startS3(ctx context.Context) error {
	if err := t.s3proc.start(); err != nil {
		return err
	}
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := c.Get(t.s3.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		if !t.s3proc.running() {
			return fmt.Errorf("versitygw exited: %s", t.s3proc.tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("versitygw not serving after 30s")
}

// addWorker starts one more worker process.
func (t *topology) addWorker() (*proc, error) {
	// Its own METRICS_ADDR, for its /readyz (the rolling deploy waits
	// for it, as the Kubernetes manifest's readiness probe does).
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.nextID++
	p := &proc{name: fmt.Sprintf("worker-%d", t.nextID), role: "worker", bin: t.cfg.Bins.Worker,
		log: filepath.Join(t.dir, fmt.Sprintf("worker-%d.log", t.nextID)),
		env: append(append([]string(nil), t.workerEnv...), "METRICS_ADDR="+metrics), ready: "http://" + metrics + "/readyz"}
	t.workers = append(t.workers, p)
	t.mu.Unlock()
	return p, p.start()
}

// liveWorkers are the workers not retired by a rolling deploy.
func (t *topology) liveWorkers() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*proc
	for _, w := range t.workers {
		w.mu.Lock()
		retired := w.retired
		w.mu.Unlock()
		if !retired {
			out = append(out, w)
		}
	}
	return out
}

// components are what the kill schedule picks from.
func (t *topology) components() []*proc {
	return append(append(t.liveWorkers(), t.apis...), t.temporal, t.s3proc)
}

// apiKey creates an API key for tenant with the starter's CLI.
func (t *topology) apiKey(tenant string) (string, error) {
	u, _ := url.Parse(t.dbURL)
	env := append(append([]string{}, t.apiEnv...), "DATABASE_URL="+u.String())
	cmd := exec.Command(t.cfg.Bins.Starter, "apikey", "create", "--tenant", tenant)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("apikey create: %w: %s", err, ee.Stderr)
		}
		return "", err
	}
	key, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(key), nil
}

// stop ends every process and proxy.
func (t *topology) stop() {
	var all []*proc
	t.mu.Lock()
	all = append(all, t.workers...)
	t.mu.Unlock()
	all = append(append(all, t.apis...), t.temporal, t.s3proc)
	for _, p := range all {
		if p != nil {
			p.kill()
		}
	}
	t.links.close()
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func hostOf(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func freePort() (int, error) {
	a, err := freeAddr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides a password in a database URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
