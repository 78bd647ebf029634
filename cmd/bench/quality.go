package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// qualityFiles are the sample conversations of measurement 7.
var qualityFiles = []string{
	"swe-agent-deepseek/django__django-12308.json",
	"swe-agent-deepseek/django__django-11564.json",
	"swe-agent-gemini/django__django-15629.json",
}

// qualityRun is one preset on one conversation.
type qualityRun struct {
	preset, file string
	ratio        float64
	first, final []float64 // drift scores of each checked summary
	verdict      string
	err          error
}

// benchQuality compacts each sample conversation with each preset, the
// context limit at the conversation's own size (usage 100%), and reads
// the ratio reached and the drift verdicts.
func benchQuality(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newScenario("quality")
	if err != nil {
		return err
	}
	defer sc.close()
	files := qualityFiles[:min(o.qualityConvs, len(qualityFiles))]
	type job struct{ preset, file string }
	var jobs []job
	for _, p := range policy.Names() {
		for _, f := range files {
			jobs = append(jobs, job{p, f})
		}
	}
	results := make([]qualityRun, len(jobs))
	forEach(len(jobs), 4, func(i int) {
		j := jobs[i]
		results[i] = qualityOne(ctx, st, sc, o, j.preset, j.file, i)
	})

	for _, p := range policy.Names() {
		pr, err := policy.Resolve(p, nil)
		if err != nil {
			return err
		}
		var ratios, first, final []float64
		verdicts := map[string]int{}
		var failed []string
		for _, r := range results {
			if r.preset != p {
				continue
			}
			if r.err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", shortName(r.file), r.err))
				continue
			}
			ratios = append(ratios, r.ratio)
			first = append(first, r.first...)
			final = append(final, r.final...)
			if r.verdict != "" {
				verdicts[r.verdict]++
			}
		}
		if len(failed) > 0 {
			rep.add(row{id: "7", name: "Quality: " + p, value: "failed: " + strings.Join(failed, "; "), met: "no"})
			continue
		}
		var each []string
		for _, x := range ratios {
			each = append(each, fmt.Sprintf("%.2f", x))
		}
		value := fmt.Sprintf("after/before %.2f (%s)", mean(ratios), strings.Join(each, ", "))
		if len(first) > 0 {
			value += fmt.Sprintf("; identifier retention %.2f first check → %.2f final check", mean(first), mean(final))
			var vs []string
			for _, k := range []string{"passed", "repaired", "patched"} {
				if verdicts[k] > 0 {
					vs = append(vs, fmt.Sprintf("%s %d", k, verdicts[k]))
				}
			}
			if len(vs) > 0 {
				value += " (" + strings.Join(vs, ", ") + ")"
			}
		} else {
			value += "; no summary drift-checked"
		}
		m := mean(ratios)
		rep.add(row{id: "7", name: fmt.Sprintf("Quality: %s (seed %s), %d conversation(s)", p, pr.Seed, len(ratios)),
			value: value, compared: fmt.Sprintf("target usage %.0f%% of the limit", 100*pr.TargetUsage),
			ratio: fmt.Sprintf("%.2f of target", m/pr.TargetUsage), target: fmt.Sprintf("≤ %.2f", pr.TargetUsage), met: metIf(m <= pr.TargetUsage)})
	}
	var names []string
	for _, f := range files {
		names = append(names, shortName(f))
	}
	rep.note("7. Quality: each preset on %s with the context limit at the conversation's own size, so the ratio after/before is "+
		"also the usage reached; the target is the preset's target usage (%s; only adaptive stops once it reaches it, the "+
		"other presets run their design's passes whatever it is). react-two-layer gets each conversation as a ReAct trajectory "+
		"(the ReAct two-layer design's format); watermark gets a checkpoint tool call (`mcp__nisaba__compress_to_checkpoint`) inserted after three quarters "+
		"of the messages, since the sample runs have none. The summarizer is llmtest's deterministic extractive answer, so retention "+
		"measures the pipeline (prompts, repair, patch) rather than a model. Retention is the drift check's share of the source's "+
		"last identifiers (paths, ids, numbers, commands) kept by each summary, at its first check and at its last check (after repair); "+
		"a \"patched\" summary then gets the still-missing identifiers appended.",
		strings.Join(names, ", "), "policy.Preset.TargetUsage")
	return nil
}

func qualityOne(ctx context.Context, st *stack, sc *scenario, o options, preset, file string, i int) qualityRun {
	r := qualityRun{preset: preset, file: file}
	in, err := chatFile(o.dataDir, file)
	if err != nil {
		r.err = err
		return r
	}
	switch preset {
	case policy.ReactTwoLayer:
		in, err = reactFromChat(in, "fix the issue")
	case policy.Watermark:
		in, err = withCheckpoint(in)
	}
	if err != nil {
		r.err = err
		return r
	}
	limit, err := contextLimit(preset, in, 1.0)
	if err != nil {
		r.err = err
		return r
	}
	out := sc.compact(ctx, gateway.Event{
		Session: fmt.Sprintf("quality-%d", i), EventID: "1", Kind: gateway.KindThreshold,
		Model: agentModel, ContextLimit: limit, Preset: preset, Conversation: in,
	})
	if out.err != nil {
		r.err = out.err
		return r
	}
	if out.res.TokensBefore > 0 {
		r.ratio = float64(out.res.TokensAfter) / float64(out.res.TokensBefore)
	}
	r.verdict = out.res.Drift
	drift, err := st.store.ListDrift(ctx, out.runID)
	if err != nil {
		r.err = fmt.Errorf("drift of %s: %w", out.runID, err)
		return r
	}
	r.first, r.final = driftScores(drift)
	return r
}

// driftScores returns, per checked summary, its first and its last score.
func driftScores(ds []store.Drift) (first, final []float64) {
	type fl struct {
		firstPass, lastPass int
		first, last         float64
	}
	by := map[string]*fl{}
	var order []string
	for _, d := range ds {
		key, _, _ := strings.Cut(d.Step, "/drift/")
		e, ok := by[key]
		if !ok {
			e = &fl{firstPass: d.Pass, lastPass: d.Pass, first: d.Score, last: d.Score}
			by[key] = e
			order = append(order, key)
		}
		if d.Pass < e.firstPass {
			e.firstPass, e.first = d.Pass, d.Score
		}
		if d.Pass >= e.lastPass {
			e.lastPass, e.last = d.Pass, d.Score
		}
	}
	for _, k := range order {
		first = append(first, by[k].first)
		final = append(final, by[k].last)
	}
	return first, final
}

// withCheckpoint inserts the watermark design's checkpoint tool call and its result
// after three quarters of the messages (before a non-tool message).
func withCheckpoint(conv []byte) ([]byte, error) {
	var doc chatDoc
	if err := json.Unmarshal(conv, &doc); err != nil {
		return nil, fmt.Errorf("parse conversation: %w", err)
	}
	at := len(doc.Messages) * 3 / 4
	for at < len(doc.Messages) && !startsTurn(doc.Messages[at]) {
		at++
	}
	call, err := json.Marshal(map[string]any{"role": "assistant", "content": "Checkpoint before the next step.", "tool_calls": []any{
		map[string]any{"id": "call_checkpoint", "type": "function", "function": map[string]any{"name": "mcp__nisaba__compress_to_checkpoint", "arguments": `{}`}},
	}})
	if err != nil {
		return nil, err
	}
	result, err := json.Marshal(map[string]any{"role": "tool", "tool_call_id": "call_checkpoint", "content": "checkpoint saved"})
	if err != nil {
		return nil, err
	}
	msgs := append([]json.RawMessage{}, doc.Messages[:at]...)
	msgs = append(msgs, call, result)
	doc.Messages = append(msgs, doc.Messages[at:]...)
	return renderChat(doc)
}
