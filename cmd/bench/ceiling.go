package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// agentModel is the agent model of every bench conversation (o200k tokens).
const agentModel = "gpt-4o"

// pipelinePreset is the preset of the pipeline measurements (1, 2, 4, 5):
// The auto-summarize design's summarize-at-50%, which always takes the whole path: plan,
// archive, deterministic passes, history summary, drift check, apply and
// commit.
const pipelinePreset = policy.AutoSummarize

// contextLimit is the context limit at which conv measures usage (0..1)
// of it under preset: the bench sets limits relative to each
// conversation, so that every size does the same work per byte.
// historySample is how many pipeline runs' histories the cost row reads.
const historySample = 5

// median3 is the median of three numbers.
func median3(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func contextLimit(preset string, conv []byte, usage float64) (int, error) {
	p, err := policy.Resolve(preset, nil)
	if err != nil {
		return 0, err
	}
	c, err := conversation.ParseAny(conv)
	if err != nil {
		return 0, fmt.Errorf("parse conversation: %w", err)
	}
	b, err := plan.NewBudget(p, agentModel, 0, tokens.DefaultLimits())
	if err != nil {
		return 0, err
	}
	return int(float64(b.Measure(c)) / usage), nil
}

// benchCeiling compares the runs per second of the full pipeline (instant
// summarizer, a small real conversation) with those of a workflow that
// does nothing, on the same server and worker, at the same concurrency.
func benchCeiling(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("ceiling")
	if err != nil {
		return err
	}
	defer sc.close()
	conv, err := tauChat(o.dataDir)
	if err != nil {
		return err
	}
	limit, err := contextLimit(pipelinePreset, conv, 1.0)
	if err != nil {
		return err
	}

	bare := func(ctx context.Context, w, i int) error {
		run, err := st.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("%s-bare-%d-%d", sc.queue, w, i), TaskQueue: sc.queue,
		}, bareWorkflowName)
		if err != nil {
			return fmt.Errorf("start bare workflow: %w", err)
		}
		return run.Get(ctx, nil)
	}
	// A few pipeline runs are kept by id, to read their histories' cost.
	var sampleMu sync.Mutex
	var sample []string
	full := func(ctx context.Context, w, i int) error {
		in, err := withTail(conv, fmt.Sprintf("Please continue (%d/%d).", w, i))
		if err != nil {
			return err
		}
		out := sc.compact(ctx, gateway.Event{
			Session: fmt.Sprintf("ceiling-%d", w), EventID: fmt.Sprintf("%d", i),
			Kind: gateway.KindThreshold, Model: agentModel, ContextLimit: limit, Preset: pipelinePreset, Conversation: in,
		})
		if out.err == nil {
			sampleMu.Lock()
			if len(sample) < historySample {
				sample = append(sample, out.runID)
			}
			sampleMu.Unlock()
		}
		return out.err
	}

	// The warm-up fills the worker's caches, the connection pools and the
	// tokenizer before the window opens. Each caller has a session of its
	// own, so that callers never queue behind each other in a session.
	//
	// The kinds run in the order bare, skeleton, pipeline, pipeline,
	// skeleton, skeleton, pipeline, bare: the server slows down over the
	// bench (its in-memory SQLite grows with every workflow), and in this
	// order a steady drift weighs on each kind alike instead of on
	// whichever runs last. The ratio pipeline/skeleton is the median of
	// the three adjacent pairs; the rates of the first two windows of
	// each kind count together for the other rows.
	var skelSample []string
	skeleton := func(ctx context.Context, w, i int) error {
		id, err := skeletonCall(ctx, st.client, sc, w, i)
		if err == nil {
			sampleMu.Lock()
			if len(skelSample) < historySample {
				skelSample = append(skelSample, id)
			}
			sampleMu.Unlock()
		}
		return err
	}
	round := 0
	loop := func(fn func(ctx context.Context, w, i int) error) loopResult {
		// Each window numbers its runs apart, so that the second window
		// of a kind reuses no event or workflow id of the first.
		round++
		base := round * 1_000_000
		return closedLoop(ctx, o.ceilingWorkers, o.warmup, o.ceilingWindow, func(ctx context.Context, w, i int) error {
			return fn(ctx, w, base+i)
		})
	}
	bare1 := loop(bare)
	var skel1, skel2, full1, full2 loopResult
	skelCPU1, err := profiled(ctx, st, "skeleton-1", func() loopResult { skel1 = loop(skeleton); return skel1 })
	if err != nil {
		return err
	}
	before, types0, kinds0 := st.counts(), st.activities.snapshot(), st.s3Kinds.snapshot()
	st.pg.queries() // the breakdown below counts the pipeline's windows only
	fullCPU1, err := profiled(ctx, st, "pipeline-1", func() loopResult { full1 = loop(full); return full1 })
	if err != nil {
		return err
	}
	fullCPU2, err := profiled(ctx, st, "pipeline-2", func() loopResult { full2 = loop(full); return full2 })
	if err != nil {
		return err
	}
	delta, types1, kinds1 := st.counts().sub(before), st.activities.snapshot(), st.s3Kinds.snapshot()
	byQuery := st.pg.queries()
	skelCPU2, err := profiled(ctx, st, "skeleton-2", func() loopResult { skel2 = loop(skeleton); return skel2 })
	if err != nil {
		return err
	}
	skel3 := loop(skeleton)
	full3 := loop(full)
	bare2 := loop(bare)
	bareRes, skeletonRes, fullRes := mergeLoops(bare1, bare2), mergeLoops(skel1, skel2), mergeLoops(full1, full2)
	pairs := []float64{full1.rate() / skel1.rate(), full2.rate() / skel2.rate(), full3.rate() / skel3.rate()}
	medianPair := median3(pairs)
	skeletonCPU, fullCPU := mergeCPU(skelCPU1, skelCPU2), mergeCPU(fullCPU1, fullCPU2)
	for _, r := range []struct {
		name string
		res  loopResult
	}{{"bare workflow", bareRes}, {"skeleton", skeletonRes}, {"pipeline", fullRes}} {
		if r.res.failed > 0 {
			return fmt.Errorf("%s: %d runs failed: %w", r.name, r.res.failed, r.res.firstErr)
		}
	}

	ratio := fullRes.rate() / bareRes.rate()
	rep.add(row{id: "1", name: "Orchestration ceiling: full pipeline, instant summarizer",
		value:    fmt.Sprintf("%.1f runs/s (p50 %s, p99 %s)", fullRes.rate(), ms(percentile(fullRes.latencies, 50)), ms(percentile(fullRes.latencies, 99))),
		compared: fmt.Sprintf("bare workflow %.1f runs/s (p50 %s)", bareRes.rate(), ms(percentile(bareRes.latencies, 50))),
		ratio:    fmt.Sprintf("%.2f", ratio), target: "≥ 0.45", met: metIf(ratio >= 0.45)})
	rep.add(row{id: "1", name: "Orchestration ceiling: the pipeline's shape on Temporal with no work (skeleton)",
		value:    fmt.Sprintf("%.1f runs/s (p50 %s, p99 %s)", skeletonRes.rate(), ms(percentile(skeletonRes.latencies, 50)), ms(percentile(skeletonRes.latencies, 99))),
		compared: fmt.Sprintf("bare workflow %.1f runs/s; full pipeline %.1f runs/s", bareRes.rate(), fullRes.rate()),
		ratio: fmt.Sprintf("skeleton/bare %.2f; pipeline/skeleton %.2f, median of three adjacent windows (%.2f, %.2f, %.2f)",
			skeletonRes.rate()/bareRes.rate(), medianPair, pairs[0], pairs[1], pairs[2]),
		target: "pipeline/skeleton ≥ 0.85 (median of three)", met: metIf(medianPair >= 0.85)})
	if skeletonCPU != nil && fullCPU != nil {
		sk, pl := skeletonCPU.perRunTotal(), fullCPU.perRunTotal()
		rep.add(row{id: "1", name: "CPU per run, all processes (the bench process with the Temporal server, worker and fake LLM; the S3 server; the Postgres backends)",
			value:    fmt.Sprintf("pipeline %s, skeleton %s", ms(pl), ms(sk)),
			compared: "pipeline − skeleton: " + cpuDiff(skeletonCPU, fullCPU),
			ratio:    fmt.Sprintf("pipeline/skeleton %.2f", pl.Seconds()/sk.Seconds()), target: "—", met: "—"})
	}
	// What Temporal records and would bill per run: the compaction
	// workflow's history, and the session's share (its signal and child
	// start).
	// The skeleton's child workflows are read the same way: that both
	// have the same history is what makes the skeleton the pipeline's
	// shape.
	pipeEvents, pipeActions, pipeBytes, err := meanCost(ctx, st.client, sample)
	if err != nil {
		return err
	}
	skelEvents, skelActions, _, err := meanCost(ctx, st.client, skelSample)
	if err != nil {
		return err
	}
	if len(sample) > 0 {
		rep.add(row{id: "1", name: "Temporal cost of one pipeline run (compaction workflow history, Temporal Cloud's action mapping)",
			value: fmt.Sprintf("%.1f history events, %.1f billable actions per run (%d runs read), plus 2 actions in its session (the signal, the child start)",
				pipeEvents, pipeActions, len(sample)),
			compared: fmt.Sprintf("skeleton: %.1f history events, %.1f billable actions per run (%d runs read); bare workflow: 1 action (its start), 5 events",
				skelEvents, skelActions, len(skelSample)),
			target: "—", met: "—"})
	}

	n := float64(fullRes.total)
	trips := float64(delta.pgTrips) / n
	if verbose {
		// Where a run's round trips go, by statement (submit, steps,
		// admission, the session's bookkeeping).
		qs := make([]string, 0, len(byQuery))
		for q := range byQuery {
			qs = append(qs, q)
		}
		sort.Slice(qs, func(i, j int) bool { return byQuery[qs[i]] > byQuery[qs[j]] })
		for _, q := range qs {
			fmt.Fprintf(os.Stderr, "bench: 1. %5.2f Postgres round trips per run: %s\n", float64(byQuery[q])/n, q)
		}
	}
	rep.add(row{id: "1", name: "Cost of one pipeline run",
		value: fmt.Sprintf("%.1f activities, %.1f Postgres round trips, %.1f S3 requests per run",
			float64(delta.activities)/n, trips, float64(delta.s3Requests)/n),
		compared: "bare workflow: 0 activities, 0 Postgres, 0 S3", target: "Postgres ≤ 15", met: metIf(trips <= 15)})

	// A run without LLM passes: the watermark preset (no checkpoint in the
	// conversation, so nothing to prune) at 50% usage, so that neither a
	// summary nor the budget ladder runs.
	const plainRuns = 10
	plainLimit, err := contextLimit("watermark", conv, 0.5)
	if err != nil {
		return err
	}
	beforePlain, plainKinds0 := st.counts(), st.s3Kinds.snapshot()
	for i := 0; i < plainRuns; i++ {
		in, err := withTail(conv, fmt.Sprintf("Plain run %d.", i))
		if err != nil {
			return err
		}
		out := sc.compact(ctx, gateway.Event{
			Session: "plain", EventID: fmt.Sprintf("plain-%d", i), Kind: gateway.KindThreshold,
			Model: agentModel, ContextLimit: plainLimit, Preset: "watermark", Conversation: in,
		})
		if out.err != nil {
			return fmt.Errorf("run without LLM passes: %w", out.err)
		}
	}
	plain, plainKinds1 := st.counts().sub(beforePlain), st.s3Kinds.snapshot()
	plainS3 := float64(plain.s3Requests) / plainRuns
	rep.add(row{id: "1", name: "Cost of one run without LLM passes (preset watermark, under its limit)",
		value: fmt.Sprintf("%.1f activities, %.1f Postgres round trips, %.1f S3 requests per run (%d runs one after another)",
			float64(plain.activities)/plainRuns, float64(plain.pgTrips)/plainRuns, plainS3, plainRuns),
		target: "S3 ≤ 5", met: metIf(plainS3 <= 5)})

	if err := objectsPerRun(ctx, st, rep); err != nil {
		return err
	}
	// What a million such runs cost at list prices.
	figures := runFigures{actions: pipeActions + 2, historyBytes: pipeBytes, model: st.cfg.SummarizerModel}
	figures.s3Writes, figures.s3Reads = s3Classes(kinds0, kinds1, n)
	if err := keptFigures(ctx, st, &figures); err != nil {
		return err
	}
	priceRow(rep, figures, pricing.Defaults(), len(conv))

	rep.note("1. Ceiling: %d concurrent callers in a closed loop, a %s warm-up then a %s window per kind of run, in the order "+
		"bare, skeleton, pipeline, pipeline, skeleton, skeleton, pipeline, bare (the server slows down as its in-memory SQLite fills, and in this order a steady "+
		"drift weighs on each kind alike; the first two windows of each kind count together for the rates, and pipeline/skeleton is the median of the "+
		"three adjacent pairs), preset %s on a %s tau-bench conversation "+
		"with its context limit set to its own size (usage 100%%), the summarizer answering at once over HTTP. A pipeline run is "+
		"`gateway.Submit` + `gateway.Wait` (S3 put, Postgres claim, signal-with-start of the session workflow, the child compaction "+
		"workflow); a bare run is `ExecuteWorkflow` + `Get` of a workflow with no code; a skeleton run has the pipeline's shape with no "+
		"work: signal-with-start of a session workflow that runs each event as a child workflow of 13 no-op local activities and 2 "+
		"no-op activities on the LLM task queue in the pipeline's order (its summary, then the budget ladder's three stages, the commit, "+
		"then the release of the intermediates behind the pipeline's version marker), waited for as `gateway.Wait` does (its history "+
		"and the pipeline's are compared in the Temporal cost row). Activities per run by type: %s. S3 requests per pipeline run by method and kind of object: %s; "+
		"per run without LLM passes: %s. "+
		"Postgres round trips are counted by a proxy that reads the wire protocol (one per Sync or simple Query message); "+
		"S3 requests by the S3 client's HTTP transport; activities by a worker interceptor (every attempt).",
		o.ceilingWorkers, o.warmup, o.ceilingWindow, pipelinePreset, humanBytes(len(conv)), perRun(types0, types1, n),
		perRun(kinds0, kinds1, n), perRun(plainKinds0, plainKinds1, plainRuns))
	return nil
}

// profiled runs a closed loop under the CPU recorder and returns where its
// CPU went per run; nil (and the loop run anyway) when the profiler is
// taken, by -cpuprofile.
func profiled(ctx context.Context, st *stack, name string, loop func() loopResult) (*cpuShares, error) {
	rec, err := startCPU(ctx, st)
	if err != nil {
		loop()
		return nil, nil
	}
	res := loop()
	shares, err := rec.stop(ctx, st)
	if err != nil {
		return nil, err
	}
	if windowProfiles != "" {
		path := filepath.Join(windowProfiles, name+".pprof")
		if err := os.WriteFile(path, rec.buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("write window profile: %w", err)
		}
	}
	shares.runs = res.total
	return shares, nil
}

// Categories of a run's CPU outside the bench process.
const (
	catS3Process = "S3 server (its own process)"
	catPostgres  = "Postgres backends"
)

// perRun is the CPU of one run by category: the process's profile shares
// of its CPU, the S3 server's process and the Postgres backends.
func (c *cpuShares) perRun() map[string]time.Duration {
	out := map[string]time.Duration{}
	if c.runs == 0 {
		return out
	}
	for cat, f := range c.byCat {
		out[cat] = time.Duration(float64(c.processCPU) * f / float64(c.runs))
	}
	out[catS3Process] = c.s3CPU / time.Duration(c.runs)
	out[catPostgres] = c.pgCPU / time.Duration(c.runs)
	return out
}

// perRunTotal is the CPU of one run, all categories.
func (c *cpuShares) perRunTotal() time.Duration {
	var total time.Duration
	for _, d := range c.perRun() {
		total += d
	}
	return total
}

// cpuDiff lists what the pipeline spends per run beyond the skeleton, by
// category, the largest first, each to the tenth of a millisecond.
func cpuDiff(skeleton, pipeline *cpuShares) string {
	sk, pl := skeleton.perRun(), pipeline.perRun()
	diff := map[string]float64{}
	for cat, d := range pl {
		diff[cat] = float64(d-sk[cat]) / float64(time.Millisecond)
	}
	for cat, d := range sk {
		if _, ok := pl[cat]; !ok {
			diff[cat] = -float64(d) / float64(time.Millisecond)
		}
	}
	var parts []string
	var total float64
	for _, cat := range sortedCats(diff) {
		total += diff[cat]
		if math.Abs(diff[cat]) >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %+.1f ms", cat, diff[cat]))
		}
	}
	return fmt.Sprintf("%+.1f ms: %s", total, strings.Join(parts, ", "))
}

// mergeLoops counts two windows of the same kind of run as one.
func mergeLoops(a, b loopResult) loopResult {
	first := a.firstErr
	if first == nil {
		first = b.firstErr
	}
	return loopResult{window: a.window + b.window, done: a.done + b.done, overlap: a.overlap + b.overlap,
		total: a.total + b.total, failed: a.failed + b.failed, firstErr: first,
		latencies: append(append([]time.Duration(nil), a.latencies...), b.latencies...), elapsed: a.elapsed + b.elapsed}
}

// mergeCPU counts two profiled windows as one: nil if either was not
// profiled.
func mergeCPU(a, b *cpuShares) *cpuShares {
	if a == nil || b == nil {
		return nil
	}
	m := &cpuShares{window: a.window + b.window, runs: a.runs + b.runs, processCPU: a.processCPU + b.processCPU,
		s3CPU: a.s3CPU + b.s3CPU, pgCPU: a.pgCPU + b.pgCPU, pgKnown: a.pgKnown && b.pgKnown, byCat: map[string]float64{}}
	if m.processCPU <= 0 {
		return m
	}
	for _, c := range []*cpuShares{a, b} {
		weight := float64(c.processCPU) / float64(m.processCPU)
		for cat, f := range c.byCat {
			m.byCat[cat] += f * weight
		}
	}
	return m
}

// objectsPerRun reports what S3 holds per run once every run of the
// bench so far is final: the steady state is the archive, the output, a
// handoff and live offloads; no intermediate (a run's prefix) is left.
func objectsPerRun(ctx context.Context, st *stack, rep *report) error {
	keys, err := st.blob.List(ctx, "tenants/")
	if err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	var runs int
	if err := st.store.Pool().QueryRow(ctx, `select count(*) from runs where status in ('succeeded', 'over_limit', 'failed')`).Scan(&runs); err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	intermediates := 0
	for _, k := range keys {
		if strings.Contains(k, "/runs/") {
			intermediates++
		}
	}
	perRun := float64(len(keys)) / float64(max(runs, 1))
	rep.add(row{id: "1", name: "S3 objects per run after commit (every run of measurement 1 final)",
		value:    fmt.Sprintf("%.2f objects per run (%d objects, %d runs); %d intermediates left", perRun, len(keys), runs, intermediates),
		compared: "steady state: archive + output (+ handoff, live offloads), content-addressed", target: "no intermediate left",
		met: metIf(intermediates == 0)})
	return nil
}
