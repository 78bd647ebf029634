package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// profiledSize is the conversation size whose load is CPU-profiled for
// measurement 6.
const profiledSize = 1 << 20

// Where a sample of a profile belongs. The first four are found anywhere
// on the stack; the rest by the nearest non-standard-library frame.
const (
	catFakeLLM       = "fake LLM server (llmtest)"
	catHarness       = "bench harness (building the input conversations)"
	catS3Local       = "S3 server (s3local, in-process)"
	catTokens        = "token counting"
	catDeterministic = "deterministic passes (without their token counting)"
	catConversation  = "conversation parse/render"
	catText          = "drift and textcut (identifiers, extractive, chunking)"
	catProduct       = "other product code (activities, gateway, store, blob)"
	catServer        = "Temporal server (in-process)"
	catSDK           = "Temporal Go SDK (worker, client)"
	catAWS           = "AWS SDK (S3 client)"
	catPgx           = "pgx (Postgres client)"
	catGRPC          = "gRPC and protobuf"
	catRuntime       = "Go runtime (GC, scheduler) and standard library"
)

var stackCats = []struct{ cat, marker string }{
	{catFakeLLM, "/internal/testkit/llmtest."},
	{catHarness, "main.renderChat"},
	{catHarness, "main.withTail"},
	{catS3Local, "gofakes3"},
	{catTokens, "/internal/tokens."},
	{catTokens, "tiktoken-go/tokenizer"},
	{catDeterministic, "/internal/plan.Deterministic"},
	{catConversation, "/internal/conversation."},
	{catText, "/internal/drift."},
	{catText, "/internal/textcut."},
}

var leafCats = []struct{ cat, prefix string }{
	{catServer, "go.temporal.io/server/"},
	{catSDK, "go.temporal.io/sdk/"},
	{catProduct, "github.com/ctxcompact/orchestrator/"},
	{catAWS, "github.com/aws/"},
	{catPgx, "github.com/jackc/"},
	{catGRPC, "google.golang.org/"},
	{catGRPC, "go.temporal.io/api/"},
}

// classify names the category of one stack (leaf first).
func classify(stack []string) string {
	for _, c := range stackCats {
		for _, f := range stack {
			if strings.Contains(f, c.marker) {
				return c.cat
			}
		}
	}
	for _, f := range stack {
		for _, c := range leafCats {
			if strings.HasPrefix(f, c.prefix) {
				return c.cat
			}
		}
	}
	return catRuntime
}

// shares sums a profile's value by category, as fractions of the total.
func shares(p *profile, valueType string) (map[string]float64, error) {
	vi := p.valueIndex(valueType)
	if vi < 0 {
		return nil, fmt.Errorf("profile has no %q values (has %v)", valueType, p.sampleTypes)
	}
	out := map[string]float64{}
	var total float64
	for _, s := range p.samples {
		if vi >= len(s.values) {
			continue
		}
		v := float64(s.values[vi])
		out[classify(s.stack)] += v
		total += v
	}
	if total > 0 {
		for k := range out {
			out[k] /= total
		}
	}
	return out, nil
}

// ownerCaches owns what the worker's bounded caches hold: the blob cache
// (BLOB_CACHE_MB), the token-count cache, the drift check's identifier
// lists and the parsed working conversations (detached copies, all
// allocated by the cache's add). They fill up to their bound whatever the
// number of runs, so they are reported apart from the heap that must not
// grow.
const ownerCaches = "caches"

// ownerAPI owns what the gateway allocates for a submission (parsing,
// hashing and storing the conversation, starting the run): in a
// deployment that is the API process's memory (starter serve), not the
// worker's.
const ownerAPI = "api"

// heapOwner says whose an allocation is: the Temporal server's when any
// of its frames made it, the bench's own (the fake LLM, the input
// conversations, the profiles, the Postgres proxy), the worker's bounded
// caches, the gateway's, or else the worker's.
func heapOwner(stack []string) string {
	for _, f := range stack {
		switch {
		case strings.HasPrefix(f, "go.temporal.io/server/"),
			// The only gRPC server and tchannel user in the process is the
			// Temporal server: the worker and the gateway are clients.
			strings.HasPrefix(f, "google.golang.org/grpc.(*Server)."), strings.Contains(f, "google.golang.org/grpc/internal/transport.(*http2Server)."),
			strings.HasPrefix(f, "github.com/temporalio/tchannel-go"):
			return catServer
		case strings.Contains(f, "/internal/blob.(*cache)."), strings.Contains(f, "/internal/tokens.cachedCounter."),
			strings.Contains(f, "/activities.(*convCache).add"),
			strings.Contains(f, "/activities.keepIDs"), strings.Contains(f, "/activities.prefetchIdentifiers"),
			strings.Contains(f, "/activities.(*Activities).identifiers"), strings.HasPrefix(f, "github.com/hashicorp/golang-lru/"):
			return ownerCaches
		case strings.Contains(f, "/internal/testkit/llmtest."), strings.HasPrefix(f, "main.renderChat"),
			strings.HasPrefix(f, "main.withTail"), strings.HasPrefix(f, "main.liveHeap"),
			strings.HasPrefix(f, "main.countFrontend"), strings.HasPrefix(f, "main.(*pgProxy)"),
			strings.HasPrefix(f, "main.(*callLog)"), strings.HasPrefix(f, "main.(*tally)"),
			strings.HasPrefix(f, "main.(*peakTracker)"), strings.HasPrefix(f, "main.splitHeap"), strings.HasPrefix(f, "main.apiRequest"):
			return catHarness
		case strings.Contains(f, "/internal/gateway."), strings.Contains(f, "/internal/httpapi."):
			return ownerAPI
		}
	}
	return "worker"
}

// heapSplit is the live heap after a collection, by who allocated it.
type heapSplit struct {
	inuse  uint64 // HeapInuse of the whole process
	worker float64
	server float64
	bench  float64 // the fake LLM and the rest of the bench's own data
	caches float64 // the worker's bounded caches
	// api is what the gateway and the HTTP API hold for the submissions
	// under way: the API process's memory in a deployment.
	api float64
	// sites are the worker's and the API's live bytes by allocation site,
	// apiSites the API's alone.
	sites, apiSites map[string]float64
}

// product is the live heap of the product's own code: the worker's and
// the API's.
func (h heapSplit) product() float64 { return h.worker + h.api }

// topSites lists the n largest allocation sites of the worker's heap.
func (h heapSplit) topSites(n int) string { return topOf(h.sites, n) }

// topOf lists the n largest of sites.
func topOf(sites map[string]float64, n int) string {
	keys := sortedCats(sites)
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%.1f MB at %s", sites[k]/(1<<20), k))
	}
	return strings.Join(parts, "; ")
}

// grownSites lists the n allocation sites whose live bytes grew most
// from before to after.
func grownSites(before, after heapSplit, n int) string {
	diff := map[string]float64{}
	for k, v := range after.sites {
		if d := v - before.sites[k]; d > 0 {
			diff[k] = d
		}
	}
	keys := sortedCats(diff)
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("+%.2f MB at %s", diff[k]/(1<<20), k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// allocSite names an allocation by its first frames outside the
// standard library (whose packages have no dot in their first element).
func allocSite(stack []string) string {
	var out []string
	for _, f := range stack {
		first, _, _ := strings.Cut(f, "/")
		if !strings.Contains(first, ".") || (strings.Count(f, "/") == 0 && !strings.HasPrefix(f, "main.")) {
			continue
		}
		out = append(out, f)
		if len(out) == 3 {
			break
		}
	}
	if len(out) == 0 && len(stack) > 0 {
		return stack[0]
	}
	return strings.Join(out, " ← ")
}

// liveHeap collects garbage and splits the live heap by allocation site:
// the Temporal server and the fake LLM share the bench's process, the
// rest is the worker and the gateway.
func liveHeap() (heapSplit, error) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return splitHeap(ms.HeapInuse)
}

// splitHeap splits the heap profile, which is the live heap as of a
// recent collection (see peakTracker), by owner; inuse is recorded with
// it.
func splitHeap(inuse uint64) (heapSplit, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		return heapSplit{}, fmt.Errorf("heap profile: %w", err)
	}
	p, err := parseProfile(buf.Bytes())
	if err != nil {
		return heapSplit{}, err
	}
	vi := p.valueIndex("inuse_space")
	if vi < 0 {
		return heapSplit{}, fmt.Errorf("heap profile has no inuse_space (has %v)", p.sampleTypes)
	}
	h := heapSplit{inuse: inuse, sites: map[string]float64{}, apiSites: map[string]float64{}}
	for _, s := range p.samples {
		v := float64(s.values[vi])
		switch heapOwner(s.stack) {
		case catServer:
			h.server += v
		case catHarness:
			h.bench += v
		case ownerCaches:
			h.caches += v
		case ownerAPI:
			h.api += v
			h.apiSites[allocSite(s.stack)] += v
			h.sites[allocSite(s.stack)] += v
		default:
			h.worker += v
			h.sites[allocSite(s.stack)] += v
		}
	}
	return h, nil
}

// gcHeadroom is how far a Go process's heap grows over the live heap its
// last collection found before it collects again: 1 + GOGC/100, with
// GOGC's default of 100, which the deployment keeps.
const gcHeadroom = 2.0

// loadResult is one conversation size under load.
type loadResult struct {
	size  int
	runs  loopResult
	peak  uint64    // process HeapInuse peak above the quiet heap before
	heap  heapPeak  // the size's peaks: HeapInuse, live heap, by owner
	quiet heapSplit // live heap before the size's runs
	after heapSplit // live heap once the size's runs have all finished
}

// benchLoad keeps loadSessions sessions compacting at once for a fixed
// window, per conversation size, with an instant summarizer. One worker
// and the same sessions serve every size, so that the live heap can be
// compared between quiet points: after a warm-up run per session, and
// after each size's last run.
func benchLoad(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("load")
	if err != nil {
		return err
	}
	defer sc.close()
	convs := make([][]byte, len(o.loadSizes))
	limits := make([]int, len(o.loadSizes))
	for i, size := range o.loadSizes {
		if convs[i], err = sizedChat(o.dataDir, size); err != nil {
			return err
		}
		if limits[i], err = contextLimit(pipelinePreset, convs[i], 1.0); err != nil {
			return err
		}
	}
	// Every batch names its events apart: a reused event id would return
	// the earlier run without running again.
	runFn := func(k int, batch string) func(ctx context.Context, w, i int) error {
		return func(ctx context.Context, w, i int) error {
			in, err := withTail(convs[k], fmt.Sprintf("Please continue (%s, size %d, run %d).", batch, k, i))
			if err != nil {
				return err
			}
			return sc.compact(ctx, gateway.Event{
				Session: fmt.Sprintf("load-%d", w), EventID: fmt.Sprintf("%s-%d-%d", batch, k, i), Kind: gateway.KindThreshold,
				Model: agentModel, ContextLimit: limits[k], Preset: pipelinePreset, Conversation: in,
			}).err
		}
	}
	// One run per session on the smallest size starts the session
	// workflows and fills the pools before the baseline is taken.
	if err := eachOnce(ctx, o.loadSessions, runFn(0, "warm")); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	baseline, err := liveHeap()
	if err != nil {
		return err
	}
	var results []loadResult
	var again loopResult
	var repeat heapSplit
	quiet := baseline
	for k, size := range o.loadSizes {
		r := loadResult{size: size, quiet: quiet}
		tracker := startPeakTracker(50 * time.Millisecond)
		var cpu *cpuRecorder
		if size == profiledSize {
			if cpu, err = startCPU(ctx, st); err != nil {
				return err
			}
		}
		r.runs = closedLoop(ctx, o.loadSessions, o.warmup, o.loadWindow, runFn(k, "first"))
		if cpu != nil {
			shares, err := cpu.stop(ctx, st)
			if err != nil {
				return err
			}
			shares.runs = r.runs.total
			rep.cpu = shares
		}
		r.heap = tracker.peak()
		if r.runs.failed > 0 {
			return fmt.Errorf("%s: %d runs failed: %w", humanBytes(size), r.runs.failed, r.runs.firstErr)
		}
		if r.heap.inuse > quiet.inuse {
			r.peak = r.heap.inuse - quiet.inuse
		}
		if verbose {
			w, g := r.heap.worker, r.heap.api
			fmt.Fprintf(os.Stderr, "bench:   %s: peak HeapInuse +%.0f MB, peak live %.0f MB (quiet %.0f MB), %d collections split; "+
				"worker at its peak %.1f MB (quiet %.1f MB; caches %.1f MB, server %.1f MB, bench %.1f MB, api %.1f MB); largest: %s\n",
				humanBytes(size), float64(r.peak)/(1<<20), float64(r.heap.live)/(1<<20), float64(quiet.inuse)/(1<<20), r.heap.profiled,
				w.worker/(1<<20), quiet.worker/(1<<20), w.caches/(1<<20), w.server/(1<<20), w.bench/(1<<20), w.api/(1<<20), w.topSites(12))
			fmt.Fprintf(os.Stderr, "bench:   %s: api at its peak %.1f MB (quiet %.1f MB); largest: %s\n",
				humanBytes(size), g.api/(1<<20), quiet.api/(1<<20), topOf(g.apiSites, 8))
		}
		if r.after, err = liveHeap(); err != nil {
			return err
		}
		if verbose {
			fmt.Fprintf(os.Stderr, "bench:   worker heap after %s: %.1f MB; largest: %s\n", humanBytes(size), r.after.worker/(1<<20), r.after.topSites(6))
		}
		quiet = r.after
		results = append(results, r)
		if k == 0 {
			// Memory must not grow with finished runs: a second batch of
			// the same size, right away, must leave the worker's quiet
			// heap where the first one left it.
			again = closedLoop(ctx, o.loadSessions, 0, o.repeatWindow, runFn(0, "second"))
			if again.failed > 0 {
				return fmt.Errorf("second %s batch: %d runs failed: %w", humanBytes(size), again.failed, again.firstErr)
			}
			if repeat, err = liveHeap(); err != nil {
				return err
			}
			quiet = repeat
		}
	}

	// The API's side of the largest size, with the worker's caches and
	// pools as the runs left them.
	last := results[len(results)-1]
	api, err := benchAPI(ctx, st, sc, o, convs[len(convs)-1], limits[len(limits)-1])
	if err != nil {
		return fmt.Errorf("API, %s: %w", humanBytes(last.size), err)
	}

	base := results[0]
	for _, r := range results {
		lat50 := percentile(r.runs.latencies, 50)
		rw := row{id: "4", name: fmt.Sprintf("Sustained load, %s conversations, %d sessions", humanBytes(r.size), o.loadSessions),
			value: fmt.Sprintf("%.2f runs/s; p50 %s, p99 %s; peak heap +%.0f MB", r.runs.rate(), ms(lat50),
				ms(percentile(r.runs.latencies, 99)), float64(r.peak)/(1<<20))}
		if r.size != base.size {
			rw.compared = fmt.Sprintf("%s (%.0f× smaller)", humanBytes(base.size), float64(r.size)/float64(base.size))
			rw.ratio = fmt.Sprintf("runs/s ×%.3f, p50 ×%.1f, peak heap ×%.1f (size ×%.0f)", r.runs.rate()/base.runs.rate(),
				lat50.Seconds()/percentile(base.runs.latencies, 50).Seconds(), float64(r.peak)/float64(max(base.peak, 1)),
				float64(r.size)/float64(base.size))
		}
		rep.add(rw)
	}

	// Peak heap per concurrent run (and request) of the largest size.
	// Their live heap at the collection where it was largest, above its
	// level before, is what each owner held at once; a process of its own
	// lets its heap grow to gcHeadroom times the live heap before it
	// collects, so that is its peak heap.
	perRun := max(last.heap.worker.worker-last.quiet.worker, 0) / float64(o.loadSessions)
	runX := gcHeadroom * perRun / float64(last.size)
	rep.add(row{id: "4", name: fmt.Sprintf("Worker peak heap per concurrent run, %s conversations, %d sessions", humanBytes(last.size), o.loadSessions),
		value: fmt.Sprintf("%.0f MB per run: live heap %.1f MB above its quiet level at its largest collection, over %d runs (its bounded caches %.0f MB besides)",
			gcHeadroom*perRun/(1<<20), max(last.heap.worker.worker-last.quiet.worker, 0)/(1<<20), o.loadSessions, last.heap.worker.caches/(1<<20)),
		compared: fmt.Sprintf("the run's input, %s", humanBytes(last.size)),
		ratio:    fmt.Sprintf("%.1f× the input (live %.1f×, ×%.0f for the collector's headroom)", runX, perRun/float64(last.size), gcHeadroom),
		target:   "≤ 10× the input per concurrent run", met: metIf(last.heap.profiled > 0 && runX <= 10)})
	perReq := api.perRequest(o.loadSessions)
	reqX := gcHeadroom * perReq / float64(api.size)
	rep.add(row{id: "4", name: fmt.Sprintf("API peak heap per concurrent request, %s conversations, %d callers", humanBytes(api.size), o.loadSessions),
		value: fmt.Sprintf("%.0f MB per request: live heap %.1f MB above its quiet level at its largest collection, over %d requests (%d submitted in %s)",
			gcHeadroom*perReq/(1<<20), perReq*float64(o.loadSessions)/(1<<20), o.loadSessions, api.requests.total, o.apiWindow),
		compared: fmt.Sprintf("the request's conversation, %s", humanBytes(api.size)),
		ratio:    fmt.Sprintf("%.1f× the input (live %.1f×, ×%.0f for the collector's headroom)", reqX, perReq/float64(api.size), gcHeadroom),
		target:   "≤ 10× the input per concurrent request", met: metIf(api.heap.profiled > 0 && reqX <= 10)})

	first := results[0]
	processed := float64(again.total) * float64(first.size)
	growth := repeat.product() - first.after.product()
	// The heap profile's sampling leaves about 1 MB of noise.
	allowed := max(0.02*processed, 1<<20)
	rep.add(row{id: "4", name: fmt.Sprintf("Worker live heap after GC, quiet after two %s batches", humanBytes(first.size)),
		value: fmt.Sprintf("%.1f MB after the first (%d runs), %.1f MB after the second; bounded caches %.1f MB → %.1f MB (blob cache at most %d MB, parsed conversations at most 32 MB of their JSON)",
			first.after.product()/(1<<20), first.runs.total, repeat.product()/(1<<20), first.after.caches/(1<<20), repeat.caches/(1<<20), st.cfg.BlobCacheMB),
		compared: fmt.Sprintf("%d runs in the second batch (%.0f MB of conversations)", again.total, processed/(1<<20)),
		ratio: fmt.Sprintf("%+.2f MB: %+.2f%% of what it processed (%+.1f KB/run)", growth/(1<<20), 100*growth/processed,
			growth/float64(max(again.total, 1))/1024),
		target: "not growing with finished runs (< 2% of what was processed, at least 1 MB)", met: metIf(growth < allowed)})

	seq := []string{fmt.Sprintf("%.1f MB after %s (%d runs)", first.after.product()/(1<<20), humanBytes(first.size), first.runs.total),
		fmt.Sprintf("%.1f MB after %s again (%d runs)", repeat.product()/(1<<20), humanBytes(first.size), again.total)}
	for _, r := range results[1:] {
		seq = append(seq, fmt.Sprintf("%.1f MB after %s (%d runs)", r.after.product()/(1<<20), humanBytes(r.size), r.runs.total))
	}
	rep.note("4. Load: %d sessions each submit their next run as soon as the previous one returns; per size a %s warm-up, then a %s "+
		"window (a run counts by the share of its time inside the window, so runs longer than the window still give a steady rate; "+
		"latencies are those of the runs overlapping the window); preset %s, the context limit at the conversation's own size, an "+
		"instant summarizer. Conversations are real SWE-bench runs laid end to end (tool call ids renamed on repeats) and cut after a "+
		"whole turn; each run appends its own user message. The worker shares the bench's process with the Temporal server and the "+
		"fake LLM: peak heap is the process's HeapInuse (sampled every 50 ms) above the quiet level before the size, everyone's "+
		"and the garbage not yet collected; the live heap "+
		"after the runs is split by allocation site with a heap profile (after two GCs) and counts the worker, the gateway and the "+
		"clients, not the Temporal server (%.0f MB at the end) nor the fake LLM (the heap profile samples every 128 KB, which leaves "+
		"about 1 MB of noise), and not the worker's bounded caches, which fill up to their bound (BLOB_CACHE_MB of content-addressed "+
		"objects, 64Ki token counts, 64 drift-check identifier lists, parsed working conversations of up to 32 MB of JSON) and are given apart. Worker live heap: baseline %.1f MB after one warm-up run per session, then %s. Sites that grew "+
		"between the two %s batches: %s. Sites that grew from the second %s batch to the end of the %s runs: %s. "+
		"Peak heap per concurrent run: while the %s runs, every collection whose live heap is within 10%% of the largest so far is split "+
		"by owner with the heap profile (which the runtime publishes one collection late, so the split is taken after the next one; %d "+
		"collections split); the worker's live heap at the collection where it was largest, above its quiet level before the size and "+
		"divided by the sessions, is what one run held at once, and a worker process of its own (GOGC=100, the default the deployment "+
		"keeps) lets its heap grow to twice its live heap before it collects, so twice that is its peak heap per run; the worker's caches, "+
		"full before the size, are apart. The API's: then the sessions post the %s conversation as events through the HTTP API's "+
		"handler (internal/httpapi, as `starter serve` runs it, MAX_REQUEST_BYTES %d MB) for %s, each its next as soon as the last one "+
		"is answered, to a task queue no worker polls, so that only the submissions are measured (reading and decoding the body, "+
		"validating and parsing the conversation, hashing its canonical form, storing it, recording and starting the run); its "+
		"live heap (what internal/httpapi and internal/gateway allocated; the client's copy of each body is the bench's) is split and "+
		"counted the same way (%d collections split).",
		o.loadSessions, o.warmup, o.loadWindow, pipelinePreset, last.after.server/(1<<20), baseline.product()/(1<<20), strings.Join(seq, " → "),
		humanBytes(first.size), grownSites(first.after, repeat, 3), humanBytes(first.size), humanBytes(last.size), grownSites(repeat, last.after, 3),
		humanBytes(last.size), last.heap.profiled, humanBytes(api.size), st.cfg.MaxRequestBytes>>20, o.apiWindow, api.heap.profiled)
	return nil
}

// cpuShares is where the CPU of the profiled load went.
type cpuShares struct {
	window     time.Duration
	runs       int
	processCPU time.Duration // the bench process: worker, gateway, Temporal server, fake LLM
	s3CPU      time.Duration // versitygw, when it runs as its own process
	pgCPU      time.Duration // the Postgres backends of the store's connections
	pgKnown    bool
	byCat      map[string]float64 // fractions of the process's profile
}

// runCPU is the CPU the runs cost: the process without the fake LLM, the
// bench harness and the in-process S3 server (which stands in for a
// remote one), plus the S3 server and Postgres processes.
func (c *cpuShares) runCPU() time.Duration {
	own := float64(c.processCPU) * (1 - c.byCat[catFakeLLM] - c.byCat[catHarness] - c.byCat[catS3Local])
	return time.Duration(own) + c.s3CPU + c.pgCPU
}

// share is a category's part of the runs' CPU.
func (c *cpuShares) share(cat string) float64 {
	return float64(c.processCPU) * c.byCat[cat] / float64(c.runCPU())
}

type cpuRecorder struct {
	buf     bytes.Buffer
	started time.Time
	self0   time.Duration
	s3CPU0  time.Duration
	pg0     map[int]time.Duration
	pgOK    bool
}

func startCPU(ctx context.Context, st *stack) (*cpuRecorder, error) {
	c := &cpuRecorder{started: time.Now(), self0: selfCPU()}
	if st.s3PID != 0 {
		c.s3CPU0, _ = procCPU(st.s3PID)
	}
	c.pg0, c.pgOK = pgBackendCPU(ctx, st)
	if err := pprof.StartCPUProfile(&c.buf); err != nil {
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return c, nil
}

func (c *cpuRecorder) stop(ctx context.Context, st *stack) (*cpuShares, error) {
	pprof.StopCPUProfile()
	s := &cpuShares{window: time.Since(c.started), processCPU: selfCPU() - c.self0}
	if st.s3PID != 0 {
		if v, err := procCPU(st.s3PID); err == nil {
			s.s3CPU = v - c.s3CPU0
		}
	}
	if pg1, ok := pgBackendCPU(ctx, st); ok && c.pgOK {
		s.pgKnown = true
		for pid, v := range pg1 {
			s.pgCPU += v - c.pg0[pid] // a backend opened meanwhile started at 0
		}
	}
	p, err := parseProfile(c.buf.Bytes())
	if err != nil {
		return nil, err
	}
	if s.byCat, err = shares(p, "cpu"); err != nil {
		return nil, err
	}
	return s, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// procCPU is the user+system CPU time of a process from /proc.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it may not.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(ut+stt) * time.Second / clockTicks, nil
}

// pgBackendCPU reads the CPU time of the Postgres backends serving the
// store (found by their application_name); false when Postgres is not
// local or its processes cannot be read.
func pgBackendCPU(ctx context.Context, st *stack) (map[int]time.Duration, bool) {
	conn, err := pgx.Connect(ctx, st.pgAdmin)
	if err != nil {
		return nil, false
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select pid from pg_stat_activity where application_name = $1", st.appName)
	if err != nil {
		return nil, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		return nil, false
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		v, err := procCPU(int(pid))
		if err != nil {
			return nil, false
		}
		out[int(pid)] = v
	}
	return out, true
}

// sortedCats lists categories by share, largest first.
func sortedCats(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j] // ties by name, so that the report is stable
	})
	return keys
}
