// Command bench measures the orchestrator on the real stack in one process
// tree: the in-process Temporal server, Postgres (a fresh schema of the
// local test database or DATABASE_URL), an S3 server (versitygw when
// installed, else the embedded s3local) and the OpenAI-compatible test
// server with a per-call latency and failure rate. It prints one table and
// writes it, with the machine it ran on, to -out.
//
// Every comparison is a ratio of two figures measured in the same run;
// absolute times only mean something on the machine printed with them.
//
// It links the Temporal server, so it lives under deploy/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// The real conversations: the shared folder beside the checkout, else the
// repository's copy of the same runs.
const (
	defaultDataDir  = "../shared/data"
	fallbackDataDir = "testdata/conversations"
)

// options are the sizes of one bench run; -quick shrinks every one.
type options struct {
	quick   bool
	dataDir string

	ceilingWorkers int
	ceilingWindow  time.Duration
	// warmup runs a closed loop before its window opens.
	warmup        time.Duration
	criticalRuns  int
	mapReduceReps int
	loadSessions  int
	loadWindow    time.Duration
	loadSizes     []int
	// repeatWindow is the second batch of the smallest size that the
	// worker's heap is compared after.
	repeatWindow time.Duration
	// apiWindow is how long the sessions post the largest size through
	// the HTTP API, for the API's heap.
	apiWindow    time.Duration
	faultRuns    int
	engineTime   time.Duration
	qualityConvs int
	probeConvs   int
	// judgeOut is where measurement 8's LLM judge stores its graded runs.
	judgeOut   string
	llmLatency time.Duration
	faultRate  float64
	// historySizes are measurement 9's sizes of one tenant's history, in
	// runs; historySamples the listing calls of each page and
	// historyWrites the runs written, at each size.
	historySizes   []int
	historySamples int
	historyWrites  int
	// fairFlood is measurement 11's flood, in events, and fairIdle its
	// quiet tenant's idle series, in runs.
	fairFlood int
	// fairSessions is how many sessions the flood's events go to (each
	// new session starts a session workflow whose first task the
	// others' admissions queue behind).
	fairSessions int
	// fairModes are the modes of measurement 11 to run; nil runs all.
	fairModes map[string]bool
	fairIdle  int
}

func newOptions(quick bool, dataDir string) options {
	o := options{
		quick: quick, dataDir: dataDir,
		ceilingWorkers: 8, ceilingWindow: 15 * time.Second, warmup: 5 * time.Second,
		criticalRuns: 24, mapReduceReps: 2,
		loadSessions: 4, loadWindow: 30 * time.Second, loadSizes: []int{100 << 10, 1 << 20, 5 << 20}, repeatWindow: 10 * time.Second, apiWindow: 10 * time.Second,
		faultRuns: 20, engineTime: 2 * time.Second, qualityConvs: 3, probeConvs: len(probeFiles),
		llmLatency: 500 * time.Millisecond, faultRate: 0.3,
		historySizes: []int{1_000, 100_000}, historySamples: 500, historyWrites: 300,
		fairFlood: 300, fairIdle: 15, fairSessions: 40,
	}
	if quick {
		o.ceilingWindow = 5 * time.Second
		o.warmup = 2 * time.Second
		o.criticalRuns = 6
		o.mapReduceReps = 1
		o.loadSessions = 2
		o.loadWindow = 6 * time.Second
		o.repeatWindow = 4 * time.Second
		o.apiWindow = 3 * time.Second
		o.faultRuns = 6
		o.engineTime = 500 * time.Millisecond
		o.qualityConvs = 1
		o.probeConvs = 1
		o.historySizes = []int{1_000, 10_000}
		o.historySamples = 50
		o.historyWrites = 50
		o.fairFlood = 100
		o.fairIdle = 5
	}
	return o
}

// memProfileRate samples the heap profile every 128 KB instead of 512 KB,
// so that the worker's live heap (4.) is split with about a 1 MB error.
const memProfileRate = 128 << 10

func main() {
	// Set first, before the allocations it should see.
	runtime.MemProfileRate = memProfileRate
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	quick := flag.Bool("quick", false, "shorter windows and fewer runs (about 2 minutes)")
	out := flag.String("out", "", "also write the table and the machine to this Markdown file")
	judgeOut := flag.String("judge-out", "", "with OPENAI_BASE_URL set: write measurement 8's LLM-judge grades of every run to this JSON file")
	dataDir := flag.String("data", defaultDataDir, "folder of the shared real conversations ("+fallbackDataDir+" when the default is missing)")
	only := flag.String("only", "", "comma-separated measurements to run (1-12); empty runs all")
	workers := flag.Int("workers", 0, "concurrent callers of the ceiling (1.); 0 keeps the default")
	sessions := flag.Int("sessions", 0, "concurrent sessions of the load (4.); 0 keeps the default")
	flood := flag.Int("flood", 0, "events of the flooding tenant (11.); 0 keeps the default (300, -quick 100)")
	floodSessions := flag.Int("flood-sessions", 0, "sessions the flood's events go to, each new (11.); 0 keeps the default (40)")
	fairOnly := flag.String("fair-modes", "", "comma-separated modes of measurement 11 to run (before, after, after-api-limit); empty runs all")
	flag.BoolVar(&verbose, "v", false, "print progress details to stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole bench process to this file (use with -only)")
	flag.StringVar(&windowProfiles, "window-profiles", "", "write the CPU profile of each profiled window of the ceiling (1.) to this folder, named by kind and window")
	flag.Parse()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if st, err := os.Stat(*dataDir); err != nil || !st.IsDir() {
		// A fresh clone has no ../shared: the repository's copy of the
		// same runs (testdata/conversations/README.md) serves.
		if *dataDir != defaultDataDir {
			return fmt.Errorf("data folder %s not found (set -data)", *dataDir)
		}
		fmt.Fprintf(os.Stderr, "bench: %s not found; using the repository's copy in %s\n", *dataDir, fallbackDataDir)
		*dataDir = fallbackDataDir
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	selected := func(id string) bool { return len(want) == 0 || want[id] }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := newOptions(*quick, *dataDir)
	opts.judgeOut = *judgeOut
	if *workers > 0 {
		opts.ceilingWorkers = *workers
	}
	if *sessions > 0 {
		opts.loadSessions = *sessions
	}
	if *floodSessions > 0 {
		opts.fairSessions = *floodSessions
	}
	if *flood > 0 {
		opts.fairFlood = *flood
	}
	if *fairOnly != "" {
		known := map[string]bool{}
		for _, m := range fairModes {
			known[m.name] = true
		}
		opts.fairModes = map[string]bool{}
		for _, m := range strings.Split(*fairOnly, ",") {
			m = strings.TrimSpace(m)
			if !known[m] {
				fmt.Fprintf(os.Stderr, "bench: -fair-modes: unknown mode %q (before, after, after-api-limit)\n", m)
				os.Exit(2)
			}
			opts.fairModes[m] = true
		}
	}
	rep := &report{opts: opts}
	phases := []struct {
		id   string
		name string
		fn   func(context.Context, *stack, options, *report) error
	}{
		{"1", "orchestration ceiling", benchCeiling},
		{"2", "overhead on the critical path", benchCritical},
		{"3", "map-reduce", benchMapReduce},
		{"4", "sustained load", benchLoad},
		{"5", "under faults", benchFaults},
		{"6", "engine", benchEngine},
		{"7", "quality", benchQuality},
		{"8", "agent probes", benchProbes},
		{"9", "history at scale", benchHistory},
		{"10", "session life", benchSessionLife},
		{"11", "fairness between tenants", benchFairness},
		{"12", "proxy", benchProxy},
	}
	// dbOnly are the measurements that need Postgres alone, no stack.
	dbOnly := map[string]bool{"9": true}
	started := time.Now()
	// The stack starts only when a selected measurement needs it.
	needStack := false
	for _, p := range phases {
		needStack = needStack || (selected(p.id) && !dbOnly[p.id])
	}
	var st *stack
	var err error
	if needStack {
		fmt.Fprintln(os.Stderr, "bench: starting the stack…")
		st, err = startStack(ctx)
	} else {
		st, err = startDatabase(ctx)
	}
	if err != nil {
		return err
	}
	defer func() {
		if err := st.close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stop stack:", err)
		}
	}()
	if needStack {
		fmt.Fprintf(os.Stderr, "bench: stack up in %s (S3: %s; Postgres %s, schema %s)\n",
			time.Since(started).Round(time.Millisecond), st.s3Name, st.pgServer, st.schema)
	} else {
		fmt.Fprintf(os.Stderr, "bench: Postgres %s only (no Temporal, no S3: the selected measurements need none)\n", st.pgServer)
	}

	for _, p := range phases {
		if !selected(p.id) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s. %s…\n", p.id, p.name)
		if err := p.fn(ctx, st, opts, rep); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s. %s failed: %v\n", p.id, p.name, err)
			rep.add(row{id: p.id, name: p.name, value: "failed: " + err.Error(), met: "no"})
		}
		fmt.Fprintf(os.Stderr, "bench: %s. done in %s\n", p.id, time.Since(t0).Round(100*time.Millisecond))
	}
	rep.elapsed = time.Since(started)
	rep.machine = describeMachine(st)

	fmt.Println(rep.table())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(rep.markdown()+soakSection(*out)), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *out, err)
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", *out)
	}
	return nil
}

// soakSectionHeading starts the part of BENCHMARKS.md that `make soak
// -benchmarks` appends to (cmd/soak); the bench keeps it when it rewrites
// the file, since a soak takes far longer than a bench to redo.
const soakSectionHeading = "\n## Chaos soak"

// soakSection is that part of the file at path, "" if it has none.
func soakSection(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i := strings.Index(string(old), soakSectionHeading)
	if i < 0 {
		return ""
	}
	return string(old[i:])
}
