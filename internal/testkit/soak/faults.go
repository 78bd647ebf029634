package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// fault is one injected fault and the time it lasted (for a kill: from
// the SIGKILL to the restarted process serving).
type fault struct {
	kind, target string
	start, end   time.Time
}

// faults runs the schedule and keeps what it injected.
type faults struct {
	topo *topology
	cfg  Config
	log  func(format string, args ...any)

	mu   sync.Mutex
	list []fault
	busy map[string]bool // links with a fault on
	// crashes counts exits on their own per role; crashWhy is the last
	// such exit's last log line.
	crashes  map[string]int
	crashWhy map[string]string
	wg       sync.WaitGroup
}

func (f *faults) record(kind, target string, start, end time.Time) {
	f.mu.Lock()
	f.list = append(f.list, fault{kind: kind, target: target, start: start, end: end})
	f.mu.Unlock()
}

// exp is an exponentially distributed pause of mean m (a Poisson
// schedule: faults do not arrive on a beat the system could learn).
func exp(m time.Duration) time.Duration { return time.Duration(rand.ExpFloat64() * float64(m)) }

// between is uniform in [lo, hi].
func between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// sleep waits d or until ctx ends; it reports whether ctx is still on.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// run injects faults until ctx ends, then waits for every fault to be
// lifted: toxics removed, killed components restarted.
func (f *faults) run(ctx context.Context) {
	f.busy = map[string]bool{}
	if f.cfg.FaultRate > 0 {
		f.wg.Add(3)
		go f.kills(ctx)
		go f.linkFaults(ctx)
		go f.milestones(ctx)
	}
	<-ctx.Done()
	f.wg.Wait()
	f.topo.links.reset()
}

// kills SIGKILLs a random running component every KillEvery on average
// and starts it again after a random pause of 1-8 s.
func (f *faults) kills(ctx context.Context) {
	defer f.wg.Done()
	for sleep(ctx, exp(time.Duration(float64(f.cfg.KillEvery)/f.cfg.FaultRate))) {
		var up []*proc
		for _, p := range f.topo.components() {
			if p.running() {
				up = append(up, p)
			}
		}
		if len(up) == 0 {
			continue
		}
		p := up[rand.IntN(len(up))]
		start := time.Now()
		p.setHeld(true)
		p.kill()
		f.log("fault: SIGKILL %s", p.name)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			// The pause ends early when the schedule stops: the end
			// checks need every component back.
			sleep(ctx, between(time.Second, 8*time.Second))
			p.mu.Lock()
			retired := p.retired // the rolling deploy replaced it meanwhile
			p.mu.Unlock()
			if !retired {
				if err := p.start(); err != nil {
					f.log("restart %s: %v", p.name, err)
				}
			}
			p.setHeld(false)
			f.record("kill "+p.role, p.name, start, time.Now())
		}()
	}
}

// linkFaults puts a fault on a random link every LinkEvery on average:
// latency 100-2,000 ms with jitter, a bandwidth limit, connection resets
// or a full partition, each for 5-60 s.
func (f *faults) linkFaults(ctx context.Context) {
	defer f.wg.Done()
	names := f.topo.links.names()
	n := 0
	for sleep(ctx, exp(time.Duration(float64(f.cfg.LinkEvery)/f.cfg.FaultRate))) {
		link := names[rand.IntN(len(names))]
		f.mu.Lock()
		if f.busy[link] {
			f.mu.Unlock()
			continue
		}
		f.busy[link] = true
		f.mu.Unlock()
		n++
		name := fmt.Sprintf("f%d", n)
		var kind string
		var err error
		switch rand.IntN(4) {
		case 0:
			lat := between(100*time.Millisecond, 2000*time.Millisecond)
			kind = "latency"
			err = f.topo.links.toxic(link, name, "latency", "", map[string]any{"latency": lat.Milliseconds(), "jitter": lat.Milliseconds() / 2})
		case 1:
			kind = "bandwidth"
			err = f.topo.links.toxic(link, name, "bandwidth", "", map[string]any{"rate": 16 + rand.IntN(240)}) // KB/s
		case 2:
			kind = "reset"
			err = f.topo.links.toxic(link, name, "reset_peer", "downstream", map[string]any{"timeout": rand.IntN(500)})
		default:
			// A timeout toxic of 0 holds every byte until removed: the
			// peers see a silent network, not a refused connection.
			kind = "partition"
			err = f.topo.links.toxic(link, name, "timeout", "", map[string]any{"timeout": 0})
		}
		if err != nil {
			f.log("fault %s on %s: %v", kind, link, err)
			f.mu.Lock()
			f.busy[link] = false
			f.mu.Unlock()
			continue
		}
		f.log("fault: %s on %s", kind, link)
		f.wg.Add(1)
		go func(link, name, kind string) {
			defer f.wg.Done()
			start := time.Now()
			sleep(ctx, between(5*time.Second, 60*time.Second))
			f.topo.links.clear(link, name)
			f.record(kind, link, start, time.Now())
			f.mu.Lock()
			f.busy[link] = false
			f.mu.Unlock()
		}(link, name, kind)
	}
}

// milestones are the once-per-run faults: a full 30 s partition of both
// Postgres links at 30% of the run (the machine's Postgres is shared, so
// it is cut off rather than restarted), and a rolling deploy of the
// workers at 50%: each in turn gets SIGTERM once a new one is ready.
func (f *faults) milestones(ctx context.Context) {
	defer f.wg.Done()
	begin := time.Now()
	if !sleep(ctx, f.cfg.Duration*3/10) {
		return
	}
	start := time.Now()
	for _, l := range []string{"worker-pg", "api-pg"} {
		if err := f.topo.links.toxic(l, "pg-partition", "timeout", "", map[string]any{"timeout": 0}); err != nil {
			f.log("postgres partition: %v", err)
		}
	}
	f.log("fault: partition of both Postgres links for 30s")
	sleep(ctx, 30*time.Second)
	for _, l := range []string{"worker-pg", "api-pg"} {
		f.topo.links.clear(l, "pg-partition")
	}
	f.record("postgres partition", "worker-pg+api-pg", start, time.Now())

	if !sleep(ctx, time.Until(begin.Add(f.cfg.Duration/2))) {
		return
	}
	start = time.Now()
	f.log("fault: rolling deploy of the workers")
	for _, old := range f.topo.liveWorkers() {
		nw, err := f.topo.addWorker()
		if err != nil {
			f.log("rolling deploy: %v", err)
			return
		}
		// An old worker goes once its replacement is ready, as with the
		// manifest's maxUnavailable 0 and readiness probe.
		if err := nw.waitReady(ctx, 3*time.Minute, false); err != nil {
			f.log("rolling deploy: %s goes anyway: %v", old.name, truncate(err.Error(), 300))
		}
		old.mu.Lock()
		old.retired = true
		old.mu.Unlock()
		if !old.signal(syscall.SIGTERM, 2*time.Minute) {
			f.log("rolling deploy: %s still running 2 min after SIGTERM; killed", old.name)
			old.kill()
		}
	}
	f.record("rolling deploy", "workers", start, time.Now())
}

// supervise restarts, until ctx ends, a component that exited on its
// own (not killed by the schedule), as systemd or Kubernetes would: after
// 1 s, doubling up to 8 s while it keeps exiting, so that a process that
// cannot start while a dependency is down does not take the machine's
// two cores. It counts those exits per role with the last line each
// wrote.
func (f *faults) supervise(ctx context.Context) {
	type backoff struct {
		wait  time.Duration
		since time.Time // when it exited; it restarts at since+wait
		start time.Time // last restart
	}
	state := map[*proc]*backoff{}
	for sleep(ctx, 250*time.Millisecond) {
		for _, p := range f.topo.components() {
			if p.running() || !p.supervised() {
				continue
			}
			b := state[p]
			if b == nil {
				b = &backoff{}
				state[p] = b
			}
			if b.since.IsZero() {
				// Newly seen down: a process that ran 30 s starts its
				// backoff over.
				if time.Since(b.start) > 30*time.Second || b.wait == 0 {
					b.wait = time.Second
				} else {
					b.wait = min(b.wait*2, 8*time.Second)
				}
				b.since = time.Now()
				f.mu.Lock()
				if f.crashes == nil {
					f.crashes, f.crashWhy = map[string]int{}, map[string]string{}
				}
				f.crashes[p.role]++
				f.crashWhy[p.role] = p.lastLine()
				f.mu.Unlock()
				f.log("%s exited on its own (%s); restarting in %s", p.name, truncate(p.lastLine(), 200), b.wait)
			}
			if time.Since(b.since) < b.wait {
				continue
			}
			b.since, b.start = time.Time{}, time.Now()
			if err := p.start(); err != nil {
				f.log("restart %s: %v", p.name, err)
			}
		}
	}
}

// overlaps reports whether [a, b] meets any fault.
func (f *faults) overlaps(a, b time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.list {
		if a.Before(x.end) && b.After(x.start) {
			return true
		}
	}
	return false
}
