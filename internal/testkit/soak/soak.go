// Package soak is the chaos soak of the production topology: the
// Temporal server, versitygw, N workers and two API replicas, each its
// own process, over a fresh Postgres database, with Toxiproxy between
// every worker and API replica and each of Postgres, S3 and Temporal. It
// posts events from several tenants and sessions over HTTP while a
// schedule kills components and degrades links, then, with the faults
// stopped, checks that nothing accepted was lost or done twice. cmd/soak
// is the operator's command (`make soak`); e2e runs a short version.
package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Bins are the binaries the topology runs.
type Bins struct {
	Worker, Starter string
	// Dev is cmd/dev, run as the Temporal server only (-worker=false):
	// the server package in its own process, never linked into the
	// worker or the starter.
	Dev string
}

// Config is one soak run.
type Config struct {
	Events   int // events posted (each a run); about 2% more are invalid ones that must be refused
	Sessions int // sessions, spread over the tenants
	Tenants  int
	Workers  int
	// Duration is how long the faults go on; the events are spread over
	// it.
	Duration time.Duration
	// FaultRate scales the schedule: 1 is a SIGKILL every KillEvery and a
	// link fault every LinkEvery on average; 0 injects nothing.
	FaultRate float64
	KillEvery time.Duration
	LinkEvery time.Duration
	// Settle bounds the time every accepted event's run gets to reach a
	// final status once the faults stopped.
	Settle time.Duration
	// Concurrency is the number of clients posting at once.
	Concurrency int
	// Dir holds the processes' state and logs.
	Dir string
	// PostgresURL is the admin URL of the cluster; the run makes its own
	// database there and drops it at the end unless Keep.
	PostgresURL string
	Keep        bool
	DataDir     string // folders of conversations, comma-separated (testdata/conversations)
	Bins        Bins
	// WorkerEnv is added to each worker's environment.
	WorkerEnv []string
	// RunsInFlight is the workers' TENANT_RUNS_IN_FLIGHT (0: their
	// default).
	RunsInFlight int
	// ReplayMax bounds the runs whose history is replayed (0: all).
	ReplayMax int
	Log       io.Writer
}

// The warm-up's size and the bound for its runs to be final.
const (
	warmMax   = 200
	warmFinal = 3 * time.Minute
)

// Defaults fills what is zero.
func (c *Config) Defaults() {
	if c.Tenants == 0 {
		c.Tenants = 3
	}
	if c.Sessions == 0 {
		c.Sessions = 60
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.KillEvery == 0 {
		c.KillEvery = 10 * time.Second
	}
	if c.LinkEvery == 0 {
		c.LinkEvery = 8 * time.Second
	}
	if c.Settle == 0 {
		c.Settle = 5 * time.Minute
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Sessions < c.Tenants {
		c.Sessions = c.Tenants
	}
}

// Run starts the topology, runs the load under faults and checks the end
// state. The error is for a soak that could not run; what the checks
// found is in the report's Failures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Defaults()
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%s soak: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	var samples []sample
	for _, dir := range strings.Split(cfg.DataDir, ",") {
		more, err := readSamples(strings.TrimSpace(dir))
		if err != nil {
			return nil, err
		}
		samples = append(samples, more...)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	hooks, err := startHooks()
	if err != nil {
		return nil, err
	}
	defer hooks.close()

	logf("starting the topology in %s", cfg.Dir)
	topo, err := startTopology(ctx, cfg, hooks.addr)
	if err != nil {
		return nil, err
	}
	defer func() {
		topo.stop()
		if !cfg.Keep {
			if err := topo.dropDatabase(); err != nil {
				logf("drop database %s: %v", topo.dbName, err)
			}
		}
	}()
	logf("topology up: database %s, temporal %s, s3 %s, APIs %v", topo.dbName, topo.temporalAddr, topo.s3.Endpoint, topo.apiAddrs)

	gen := &loadGen{apis: topo.apiAddrs, keys: map[string]string{}, samples: samples, answered: map[int]int{},
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}}}
	for i := 0; i < cfg.Tenants; i++ {
		tenant := fmt.Sprintf("tenant-%d", i+1)
		key, err := topo.apiKey(tenant)
		if err != nil {
			return nil, err
		}
		gen.keys[tenant] = key
		if err := hooks.register(ctx, topo.apiAddrs[0], key, tenant); err != nil {
			return nil, err
		}
	}

	// The events, in order: a quiet warm-up (no faults) first, which
	// gives the quiet latency and memory, then the rest under faults.
	type job struct {
		s    *submission
		body []byte
	}
	var jobs []job
	for i := 0; i < cfg.Events; i++ {
		tenantIdx := i % cfg.Tenants
		tenant := fmt.Sprintf("tenant-%d", tenantIdx+1)
		perTenant := max(cfg.Sessions/cfg.Tenants, 1)
		session := fmt.Sprintf("s-%d-%d", tenantIdx+1, rand.IntN(perTenant))
		sm := samples[i%len(samples)]
		preset := presets[(i/len(samples))%len(presets)]
		if sm.format == "react" {
			preset = "react-two-layer"
		}
		limit := []int{20000, 60000}[i%2]
		id := fmt.Sprintf("ev-%06d", i)
		jobs = append(jobs, job{s: &submission{tenant: tenant, session: session, eventID: id}, body: eventBody(id, preset, limit, sm.body)})
		if i%50 == 25 {
			// An invalid event (an unknown preset): refused with a 4xx,
			// and it must not consume its event id.
			bad := fmt.Sprintf("bad-%06d", i)
			jobs = append(jobs, job{s: &submission{tenant: tenant, session: session, eventID: bad, bad: true},
				body: eventBody(bad, "no-such-preset", limit, sm.body)})
		}
	}
	// A twentieth of the events, at most warmMax: enough to fill the
	// workers' caches for the quiet memory level, and few enough to be
	// final within warmFinal under the tenants' admission bound (a
	// 10,000-event soak's 510 were not, at about 2.5 runs/s).
	warm := min(max(len(jobs)/20, 10), warmMax, len(jobs))

	var wg sync.WaitGroup
	unposted := 0 // events the load's time ran out for
	post := func(ctx context.Context, js []job, pace time.Duration) {
		ch := make(chan job)
		for i := 0; i < cfg.Concurrency; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range ch {
					gen.post(ctx, j.s, j.body)
					gen.mu.Lock()
					gen.subs = append(gen.subs, j.s)
					gen.mu.Unlock()
				}
			}()
		}
		handed := feed(ctx, len(js), pace, func(i int) bool {
			select {
			case ch <- js[i]:
				return true
			case <-ctx.Done():
				return false
			}
		})
		close(ch)
		wg.Wait()
		unposted += len(js) - handed
	}

	logf("warm-up: %d events without faults", warm)
	warmCtx, cancelWarm := context.WithTimeout(ctx, 5*time.Minute)
	post(warmCtx, jobs[:warm], 0)
	cancelWarm()
	var warmRuns []string
	for _, s := range gen.subs {
		if s.accepted {
			warmRuns = append(warmRuns, s.runID)
		}
	}
	chk, err := newChecker(ctx, topo, logf)
	if err != nil {
		return nil, err
	}
	defer chk.close()
	if missing := chk.waitFinal(ctx, warmRuns, warmFinal); len(missing) > 0 {
		return nil, fmt.Errorf("warm-up: %d runs not final after %s without faults (%v)", len(missing), warmFinal, head(missing, 5))
	}
	quiet := memory(topo)
	quietHeap := liveHeap(ctx, topo, logf)
	logf("quiet memory: RSS %v KB, live heap %v KB", quiet, quietHeap)

	// The faults, for Duration, while the rest of the events are
	// posted at an even pace over it; the supervisor runs until the
	// checks end.
	f := &faults{topo: topo, cfg: cfg, log: logf}
	superCtx, stopSupervisor := context.WithCancel(ctx)
	defer stopSupervisor()
	go f.supervise(superCtx)
	faultCtx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	faultsDone := make(chan struct{})
	faultStart := time.Now()
	var faultEnd time.Time // written before faultsDone closes
	go func() {
		f.run(faultCtx)
		faultEnd = time.Now()
		logf("faults stopped after %s (every fault lifted, every component restarted)", faultEnd.Sub(faultStart).Round(time.Second))
		close(faultsDone)
	}()
	rest := jobs[warm:]
	pace := time.Duration(0)
	if len(rest) > 0 {
		pace = cfg.Duration * 9 / 10 / time.Duration(len(rest))
	}
	// Clients keep retrying past the faults' end, for up to Settle.
	loadCtx, cancelLoad := context.WithTimeout(ctx, cfg.Duration+cfg.Settle)
	logf("faults on for %s; %d events at one per %s", cfg.Duration, len(rest), pace)
	post(loadCtx, rest, pace)
	<-faultCtx.Done()
	stopFaults()
	<-faultsDone
	cancelLoad()
	postedAt := time.Now()
	for _, a := range topo.apis {
		if err := a.waitReady(ctx, 2*time.Minute, true); err != nil {
			logf("after the faults: %v", err)
		}
	}
	logf("posting ended %s after the faults; checking", postedAt.Sub(faultEnd).Round(time.Second))

	rep := &Report{Config: cfg, Samples: len(samples), Quiet: quiet, QuietHeap: quietHeap, FaultStart: faultStart, FaultEnd: faultEnd, Unposted: unposted}
	chk.run(ctx, rep, gen, f, hooks, cfg)
	return rep, nil
}

// feed hands out jobs 0..n-1 in order, job i when it is due (i × pace
// after the start, or as soon as send takes it when the clients are
// behind), and stops when ctx ends: the jobs it did not hand out are
// never posted. send reports whether it handed the job on. It returns
// how many it did. A feeder that slept pace after each job kept going
// after the load's end, 334 ms per job left, for half an hour in the
// 10,000-event run, and the checks never ran.
func feed(ctx context.Context, n int, pace time.Duration, send func(i int) bool) int {
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * pace)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return i
			case <-t.C:
			}
		}
		if ctx.Err() != nil || !send(i) {
			return i
		}
	}
	return n
}

// memory is the largest RSS per role (worker, api) of the live
// processes, in KB.
func memory(t *topology) map[string]int64 {
	out := map[string]int64{}
	for _, p := range append(t.liveWorkers(), t.apis...) {
		out[p.role] = max(out[p.role], p.rssKB())
	}
	return out
}

// liveHeap is the largest live heap per role (worker, api) of the live
// processes, in KB: the Go runtime's heap after each one's last
// collection (go_gc_heap_live_bytes on its /metrics). A process that does
// not answer is left out.
func liveHeap(ctx context.Context, t *topology, logf func(string, ...any)) map[string]int64 {
	out := map[string]int64{}
	for _, p := range append(t.liveWorkers(), t.apis...) {
		b, err := p.liveHeapBytes(ctx)
		if err != nil {
			logf("live heap: %v", err)
			continue
		}
		out[p.role] = max(out[p.role], b>>10)
	}
	return out
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// hooks is the webhook receiver every tenant registers: it answers 204
// and counts each webhook-id it sees, so that a delivery received twice
// shows.
type hooks struct {
	addr string
	srv  *http.Server

	mu   sync.Mutex
	seen map[string]int
}

func startHooks() (*hooks, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hooks{addr: l.Addr().String(), seen: map[string]int{}}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.seen[r.Header.Get("webhook-id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(l) }()
	return h, nil
}

func (h *hooks) close() { _ = h.srv.Close() }

// register adds the receiver as tenant's webhook endpoint.
func (h *hooks) register(ctx context.Context, api, key, tenant string) error {
	body := fmt.Sprintf(`{"url":"http://%s/%s","description":"soak receiver"}`, h.addr, tenant)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/v1/webhooks", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("register webhook for %s: %d %s", tenant, resp.StatusCode, data)
	}
	return nil
}

// received is how many distinct webhook ids arrived and how many of them
// arrived more than once.
func (h *hooks) received() (ids, repeated int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.seen {
		ids++
		if n > 1 {
			repeated++
		}
	}
	return ids, repeated
}

// DefaultDir is a fresh folder for a run's state under the system's
// temporary folder.
func DefaultDir() (string, error) {
	return os.MkdirTemp("", "soak-")
}
