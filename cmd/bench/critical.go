package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// criticalFile is the conversation of measurements 2 and 5: one real
// SWE-bench run (152 KB, 147 messages).
const criticalFile = "swe-agent-deepseek/django__django-12308.json"

// latencySummary is what measurement 5 compares itself with.
type latencySummary struct {
	p50, p99, mean time.Duration
}

func meanDuration(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(max(len(ds), 1))
}

// seqRun is one run of a sequential series.
type seqRun struct {
	out      outcome
	llmBusy  time.Duration // time with a summarizer call in flight
	llmCalls int
	workflow time.Duration // the compaction workflow, start to close
	wfStart  time.Time
	wfClose  time.Time
	steps    []store.Step
}

// runSeries runs n compactions of conv one after another in one session,
// each with its own input, and collects what each took.
func runSeries(ctx context.Context, st *stack, sc *scenario, conv []byte, limit, n int, session string) ([]seqRun, error) {
	var runs []seqRun
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		in, err := withTail(conv, fmt.Sprintf("Please continue (%s %d).", session, i))
		if err != nil {
			return nil, err
		}
		out := sc.compact(ctx, gateway.Event{
			Session: session, EventID: fmt.Sprintf("%d", i), Kind: gateway.KindThreshold,
			Model: agentModel, ContextLimit: limit, Preset: pipelinePreset, Conversation: in,
		})
		r := seqRun{out: out}
		if out.runID != "" {
			r.llmBusy, r.llmCalls = sc.calls.busy(out.runID)
			// Wait answers once the run is recorded, before its workflow
			// closes (contract.OutcomeUpdate): its times are read at close.
			_ = st.client.GetWorkflow(ctx, out.runID, "").Get(ctx, nil)
			if d, err := st.client.DescribeWorkflowExecution(ctx, out.runID, ""); err == nil {
				info := d.GetWorkflowExecutionInfo()
				if info.GetCloseTime() != nil {
					r.wfStart, r.wfClose = info.GetStartTime().AsTime(), info.GetCloseTime().AsTime()
					r.workflow = r.wfClose.Sub(r.wfStart)
				}
			}
			if steps, err := st.store.ListSteps(ctx, out.runID); err == nil {
				r.steps = steps
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// benchCritical measures one compaction end to end (submit to result,
// through the gateway) against the summarizer calls on its critical path,
// with a summarizer that takes 500 ms per call.
func benchCritical(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("critical", llmtest.WithLatency(o.llmLatency))
	if err != nil {
		return err
	}
	defer sc.close()
	conv, err := chatFile(o.dataDir, criticalFile)
	if err != nil {
		return err
	}
	limit, err := contextLimit(pipelinePreset, conv, 1.0)
	if err != nil {
		return err
	}
	if _, err := runSeries(ctx, st, sc, conv, limit, 2, "critical-warm"); err != nil {
		return err
	}
	runs, err := runSeries(ctx, st, sc, conv, limit, o.criticalRuns, "critical")
	if err != nil {
		return err
	}
	var e2e, busy, wf []time.Duration
	var ratios, wfRatios []float64
	calls := 0
	for _, r := range runs {
		if r.out.err != nil {
			return r.out.err
		}
		if r.llmBusy <= 0 {
			return fmt.Errorf("run %s made no summarizer call: preset %s did not reach the LLM", r.out.runID, pipelinePreset)
		}
		e2e = append(e2e, r.out.latency)
		busy = append(busy, r.llmBusy)
		wf = append(wf, r.workflow)
		ratios = append(ratios, r.out.latency.Seconds()/r.llmBusy.Seconds())
		wfRatios = append(wfRatios, r.workflow.Seconds()/r.llmBusy.Seconds())
		calls += r.llmCalls
	}
	rep.critical = &latencySummary{p50: percentile(e2e, 50), p99: percentile(e2e, 99), mean: meanDuration(e2e)}
	p50 := percentileF(ratios, 50)
	rep.add(row{id: "2", name: fmt.Sprintf("Critical path: one compaction, summarizer %s per call", ms(o.llmLatency)),
		value: fmt.Sprintf("end to end p50 %s, p99 %s (%d runs)", ms(percentile(e2e, 50)), ms(percentile(e2e, 99)), len(runs)),
		compared: fmt.Sprintf("summarizer calls on the critical path p50 %s, p99 %s (%.1f calls/run)",
			ms(percentile(busy, 50)), ms(percentile(busy, 99)), float64(calls)/float64(len(runs))),
		ratio:  fmt.Sprintf("p50 %.2f×, p99 %.2f×", p50, percentileF(ratios, 99)),
		target: "≤ 1.10×", met: metIf(p50 <= 1.10)})

	rep.note("2. Critical path: %d runs one after another in one session (after 2 warm-up runs), preset %s on %s (%s) with its limit at its "+
		"own size. The summarizer time is measured around each call of the OpenAI client inside the activity and filed by run; calls "+
		"that overlap count once, so it is the summarizer's share of the critical path. End to end is `gateway.Submit` to the "+
		"return of `gateway.Wait`. The compaction workflow alone (start to close in Temporal) took p50 %s: p50 %.2f× the summarizer time. "+
		"Mean time per step kind (activity duration as recorded in Postgres): %s.",
		len(runs), pipelinePreset, shortName(criticalFile), humanBytes(len(conv)), ms(percentile(wf, 50)), percentileF(wfRatios, 50),
		stepBreakdown(runs))
	rep.note("2. Slowest run of the series: %s", describeRun(slowest(runs)))
	if verbose {
		fmt.Fprintf(os.Stderr, "bench: 2. history of a middle run of the series:\n")
		printTimeline(ctx, st, runs[len(runs)/2].out.runID)
		fmt.Fprintf(os.Stderr, "bench: 2. history of the slowest run:\n")
		printTimeline(ctx, st, slowest(runs).out.runID)
	}
	return nil
}

// printTimeline prints the Temporal history of run id to stderr, each
// event at its offset from the run's start: where the critical path's
// time goes between the steps (workflow tasks, dispatch of the summarizer
// calls), which the step rows do not show.
func printTimeline(ctx context.Context, st *stack, id string) {
	h, err := readHistory(ctx, st.client, id)
	if err != nil {
		fmt.Fprintf(os.Stderr, "  %v\n", err)
		return
	}
	var first time.Time
	for _, e := range h.Events {
		at := e.GetEventTime().AsTime()
		if first.IsZero() {
			first = at
		}
		what := ""
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			what = a.GetActivityType().GetName()
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil {
			what = m.GetMarkerName()
		}
		fmt.Fprintf(os.Stderr, "  %8.1f ms  %s %s\n", float64(at.Sub(first).Microseconds())/1000, e.GetEventType(), what)
	}
}

// slowest is the run with the longest end-to-end time.
func slowest(runs []seqRun) seqRun {
	var s seqRun
	for _, r := range runs {
		if r.out.latency > s.out.latency {
			s = r
		}
	}
	return s
}

// describeRun says where one run's time went: before its workflow
// started, in it (steps and the gaps between them), after it closed.
func describeRun(r seqRun) string {
	if r.wfStart.IsZero() {
		return fmt.Sprintf("%s end to end (no workflow times)", ms(r.out.latency))
	}
	var stepTime time.Duration
	var long []string
	steps := append([]store.Step(nil), r.steps...)
	sort.Slice(steps, func(i, j int) bool { return steps[i].At.Before(steps[j].At) })
	for _, s := range steps {
		stepTime += s.Duration
		if s.Duration > 200*time.Millisecond || s.Attempt > 1 || s.Error != "" {
			d := fmt.Sprintf("%s#%d %s", s.Name, s.Attempt, ms(s.Duration))
			if s.Error != "" {
				d += " (failed)"
			}
			long = append(long, d)
		}
	}
	answered := fmt.Sprintf("%s from its close to the return of Wait", ms(r.out.end.Sub(r.wfClose)))
	if r.out.end.Before(r.wfClose) {
		answered = fmt.Sprintf("Wait returned %s before its close (the release and the delivery's start come after the answer)", ms(r.wfClose.Sub(r.out.end)))
	}
	return fmt.Sprintf("%s end to end: %s from submit to the start of the compaction workflow, %s in it (%s in %d recorded steps, "+
		"the rest between them), %s; long or retried steps: %s",
		ms(r.out.latency), ms(r.wfStart.Sub(r.out.start)), ms(r.workflow), ms(stepTime), len(steps),
		answered, strings.Join(long, ", "))
}

// stepBreakdown is the mean recorded duration per step kind per run.
func stepBreakdown(runs []seqRun) string {
	total := map[string]time.Duration{}
	for _, r := range runs {
		for _, s := range r.steps {
			total[s.Kind] += s.Duration
		}
	}
	kinds := make([]string, 0, len(total))
	for k := range total {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return total[kinds[i]] > total[kinds[j]] })
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %s", k, ms(total[k]/time.Duration(max(len(runs), 1)))))
	}
	return strings.Join(parts, ", ")
}

// benchFaults runs the series of measurement 2 with 30% of the summarizer
// calls failing (an even mix of 429 with Retry-After: 1 and 500).
func benchFaults(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("faults", llmtest.WithLatency(o.llmLatency), llmtest.WithFailureRate(o.faultRate, 7))
	if err != nil {
		return err
	}
	defer sc.close()
	conv, err := chatFile(o.dataDir, criticalFile)
	if err != nil {
		return err
	}
	limit, err := contextLimit(pipelinePreset, conv, 1.0)
	if err != nil {
		return err
	}
	runs, err := runSeries(ctx, st, sc, conv, limit, o.faultRuns, "faults")
	if err != nil {
		return err
	}
	var lat []time.Duration
	// A fallback step is one of two things: the summarizer failed its
	// attempts and the extractive fallback wrote the summary
	// (…/fallback), or a summary failed its drift checks after repair
	// and the deterministic summary replaced it (…/deterministic). Only
	// the first is what the injected faults cause.
	ok, fallbacks, replaced := 0, 0, 0
	var firstErr error
	for _, r := range runs {
		if r.out.err != nil {
			if firstErr == nil {
				firstErr = r.out.err
			}
			continue
		}
		run, err := st.store.GetRun(ctx, r.out.runID)
		if err != nil || run.Status != store.RunSucceeded {
			continue
		}
		ok++
		lat = append(lat, r.out.latency)
		var fellBack, wasReplaced bool
		for _, s := range r.steps {
			if s.Kind != "fallback" {
				continue
			}
			if strings.HasSuffix(s.Name, "/deterministic") {
				wasReplaced = true
			} else {
				fellBack = true
			}
		}
		if fellBack {
			fallbacks++
		}
		if wasReplaced {
			replaced++
		}
	}
	status := map[int]int{}
	for _, c := range sc.llm.Calls() {
		status[c.Status]++
	}
	total := len(sc.llm.Calls())
	failedCalls := status[http.StatusTooManyRequests] + status[http.StatusInternalServerError]
	rate := float64(ok) / float64(len(runs))
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	rw := row{id: "5", name: fmt.Sprintf("Under faults: %.0f%% of summarizer calls fail (429 Retry-After 1 s, 500)", o.faultRate*100),
		value: fmt.Sprintf("%d/%d runs complete (%.0f%%); mean %s, p50 %s, p99 %s", ok, len(runs), rate*100,
			ms(meanDuration(lat)), ms(p50), ms(p99)),
		target: "all runs complete", met: metIf(ok == len(runs))}
	if b := rep.critical; b != nil {
		m := meanDuration(lat)
		rw.compared = fmt.Sprintf("no faults (2.): mean %s, p50 %s, p99 %s", ms(b.mean), ms(b.p50), ms(b.p99))
		rw.ratio = fmt.Sprintf("added: mean %s (%.2f×), p50 %s, p99 %s", signedMS(m-b.mean), m.Seconds()/b.mean.Seconds(),
			signedMS(p50-b.p50), signedMS(p99-b.p99))
	}
	rep.add(rw)
	note := fmt.Sprintf("5. Faults: the series of 2. (%d runs, %s per call) with `llmtest.WithFailureRate(%.2f)`: %d of %d calls failed "+
		"(%d × 429, %d × 500); %d of the completed runs used the extractive fallback after 3 failed attempts of a summarizer call, "+
		"and %d had a summary that failed its drift checks after repair replaced by the deterministic one (not a fault: counted apart).",
		len(runs), ms(o.llmLatency), o.faultRate, failedCalls, total, status[http.StatusTooManyRequests], status[http.StatusInternalServerError], fallbacks, replaced)
	if firstErr != nil {
		note += " First failure: " + firstErr.Error()
	}
	rep.note("%s", note)
	return nil
}
