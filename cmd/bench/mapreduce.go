package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// mapReduceChars is the size of the huge tool result of measurement 3.
const mapReduceChars = 300000

// mapReduceBase is the conversation the huge result is inserted into.
const mapReduceBase = "swe-agent-deepseek/django__django-11742.json"

// mrRun is one map-reduce run.
type mrRun struct {
	e2e    time.Duration
	stage  time.Duration // first chunk step start to merge end
	chunks int
}

// benchMapReduce compacts a ReAct trajectory holding a 300,000-character
// tool result with react-two-layer, once with the chunks summarized in
// parallel (the preset's parallelism, 8) and once one after another (the
// ReAct two-layer design's loop), the summarizer taking 500 ms per call.
func benchMapReduce(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("mapreduce", llmtest.WithLatency(o.llmLatency))
	if err != nil {
		return err
	}
	defer sc.close()
	huge, err := hugeText(o.dataDir)
	if err != nil {
		return err
	}
	base, err := chatFile(o.dataDir, mapReduceBase)
	if err != nil {
		return err
	}
	chat, err := withHugeResult(base, 30, huge[:mapReduceChars])
	if err != nil {
		return err
	}
	variants := []struct {
		name      string
		overrides json.RawMessage
	}{
		{"parallel", nil},
		{"sequential", json.RawMessage(`{"large_result":{"parallelism":1}}`)},
	}
	results := map[string][]mrRun{}
	for rep := 0; rep < o.mapReduceReps; rep++ {
		for _, v := range variants {
			in, err := reactFromChat(chat, fmt.Sprintf("fix the bug (%s %d)", v.name, rep))
			if err != nil {
				return err
			}
			out := sc.compact(ctx, gateway.Event{
				Session: fmt.Sprintf("mapreduce-%s-%d", v.name, rep), EventID: "1", Kind: gateway.KindThreshold,
				Preset: policy.ReactTwoLayer, Overrides: v.overrides, Conversation: in,
			})
			if out.err != nil {
				return fmt.Errorf("%s: %w", v.name, out.err)
			}
			steps, err := st.store.ListSteps(ctx, out.runID)
			if err != nil {
				return fmt.Errorf("steps of %s: %w", out.runID, err)
			}
			r := mrRun{e2e: out.latency}
			r.stage, r.chunks = mapReduceStage(steps)
			if r.chunks == 0 {
				return fmt.Errorf("%s run %s: no chunk was summarized", v.name, out.runID)
			}
			results[v.name] = append(results[v.name], r)
		}
	}
	par, seq := medianRun(results["parallel"]), medianRun(results["sequential"])
	ratio := seq.stage.Seconds() / par.stage.Seconds()
	rep.add(row{id: "3", name: fmt.Sprintf("Map-reduce of a %d-character tool result (%d chunks, %s per call)", mapReduceChars, par.chunks, ms(o.llmLatency)),
		value:    fmt.Sprintf("parallel: map-reduce %s, whole run %s", ms(par.stage), ms(par.e2e)),
		compared: fmt.Sprintf("one after another (the ReAct two-layer design): map-reduce %s, whole run %s", ms(seq.stage), ms(seq.e2e)),
		ratio:    fmt.Sprintf("%.1f× faster (whole run %.1f×)", ratio, seq.e2e.Seconds()/par.e2e.Seconds()),
		target:   "≥ 4×", met: metIf(ratio >= 4)})
	rep.note("3. Map-reduce: the first %d characters of the 868K final output of psf__requests-1142 as one tool result inside %s, "+
		"turned into a ReAct trajectory (the ReAct two-layer design's format), compacted with react-two-layer (parallelism 8) and with the override "+
		"`{\"large_result\":{\"parallelism\":1}}`; median of %d run(s) each. \"Map-reduce\" is the wall time from the start of the chunk "+
		"step to the end of the merge step as recorded in Postgres; the whole run also holds layer 2 and the drift check.",
		mapReduceChars, shortName(mapReduceBase), o.mapReduceReps)
	return nil
}

// mapReduceStage is the wall time of the first large result's map-reduce
// (its chunk step to its merge step) and its number of chunk summaries.
func mapReduceStage(steps []store.Step) (time.Duration, int) {
	var first, last time.Time
	chunks := 0
	for _, s := range steps {
		if !strings.HasPrefix(s.Name, "large/0/") || strings.Contains(s.Name, "/drift") || strings.Contains(s.Name, "/repair") ||
			strings.Contains(s.Name, "/patch") || strings.Contains(s.Name, "/second-pass") {
			continue
		}
		start := s.At.Add(-s.Duration)
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if s.At.After(last) {
			last = s.At
		}
		if strings.HasPrefix(s.Name, "large/0/summarize/") && s.Error == "" {
			chunks++
		}
	}
	return last.Sub(first), chunks
}

// medianRun picks the run with the median map-reduce time.
func medianRun(rs []mrRun) mrRun {
	if len(rs) == 0 {
		return mrRun{}
	}
	s := append([]mrRun(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].stage < s[j].stage })
	return s[(len(s)-1)/2]
}
