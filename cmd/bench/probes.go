package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// probeFiles are the conversations of measurement 8: SWE-agent runs that
// no test uses.
var probeFiles = []string{
	"swe-agent-deepseek/django__django-11797.json",
	"swe-agent-deepseek/django__django-13265.json",
	"swe-agent-deepseek/django__django-15213.json",
	"swe-agent-gemini/django__django-15957.json",
}

// probeFormats are the wire formats each conversation is sent in.
var probeFormats = []conversation.Format{conversation.FormatOpenAI, conversation.FormatAnthropic, conversation.FormatReAct}

// probeLimit is the agent's context limit in measurement 8 (tokens; four
// times as many characters for react-two-layer, which counts those): the
// conversations are 1.5–2.5 times larger.
const probeLimit = 40_000

// probeModels are the agent models per format: an Anthropic conversation
// comes from a Claude agent.
var probeModels = map[conversation.Format]string{
	conversation.FormatOpenAI: agentModel, conversation.FormatAnthropic: "claude-sonnet-4-5", conversation.FormatReAct: agentModel,
}

// probeRun is one preset on one conversation in one format.
type probeRun struct {
	preset, file string
	format       conversation.Format
	score        probe.Score
	hasTask      bool
	ratio        float64 // tokens after / before
	usage        float64 // tokens after / limit
	region       float64 // compacted region before / after
	prefix       float64 // share of the output a prompt cache still hits
	again        float64 // the same across two compactions in a row (OpenAI only)
	status       string
	err          error
}

// benchProbes compacts each conversation with each preset in each format
// and measures what the agent gets back (internal/testkit/probe).
func benchProbes(ctx context.Context, st *stack, o options, rep *report) error {
	sc, err := st.newOfflineScenario("probes")
	if err != nil {
		return err
	}
	defer sc.close()
	judge, err := newProbeJudge(st.cfg)
	if err != nil {
		return err
	}
	files := probeFiles[:min(o.probeConvs, len(probeFiles))]
	type job struct {
		preset, file string
		format       conversation.Format
	}
	var jobs []job
	for _, p := range policy.Names() {
		for _, f := range files {
			for _, format := range probeFormats {
				jobs = append(jobs, job{p, f, format})
			}
		}
	}
	results := make([]probeRun, len(jobs))
	forEach(len(jobs), 4, func(i int) {
		j := jobs[i]
		results[i] = probeOne(ctx, st, sc, o, judge, j.preset, j.file, j.format, i)
	})
	if verbose {
		for _, r := range results {
			fmt.Fprintf(os.Stderr, "probes: %s %s %s: %s err=%v ratio %.2f usage %.2f region %.1f; lost %d: %s\n",
				r.preset, shortName(r.file), r.format, r.status, r.err, r.ratio, r.usage, r.region, r.score.LostCount(), strings.Join(r.score.Lost, " | "))
		}
	}

	for _, p := range policy.Names() {
		var runs []probeRun
		var failed []string
		for _, r := range results {
			if r.preset != p {
				continue
			}
			if r.err != nil {
				failed = append(failed, fmt.Sprintf("%s %s: %v", shortName(r.file), r.format, r.err))
				continue
			}
			runs = append(runs, r)
		}
		if len(failed) > 0 {
			rep.add(row{id: "8", name: "Agent probes: " + p, value: "failed: " + strings.Join(failed, "; "), met: "no"})
			continue
		}
		r := probeRow(p, runs)
		if judge != nil {
			r.value += "; " + judge.summary(p)
		}
		rep.add(r)
	}
	judged := "The LLM-judge mode (the versioned prompts probe-answer and probe-grade: an agent that sees only the output answers " +
		"the probe questions of Factory's four categories, recall, artifact trail, continuation and decision; a grader scores each " +
		"answer 0–5 against the reference from the original) needs an OpenAI-compatible endpoint (OPENAI_BASE_URL): skipped here."
	if judge != nil {
		judged = fmt.Sprintf("The LLM judge (%s at OPENAI_BASE_URL, prompts probe-answer and probe-grade) graded the OpenAI-format runs: "+
			"an agent that sees only the output answers the probe questions of Factory's four categories, a grader scores each 0–5 "+
			"against the reference from the original", judge.model)
		if o.judgeOut != "" {
			if err := judge.write(o.judgeOut); err != nil {
				return fmt.Errorf("write judge results: %w", err)
			}
			judged += "; every graded run is in " + o.judgeOut
		}
		judged += "."
	}
	var names []string
	for _, f := range files {
		names = append(names, shortName(f))
	}
	rep.note("8. Agent probes: each preset on %s, each sent as OpenAI chat, Anthropic Messages (a Claude agent: o200k with "+
		"the model family's margin) and a ReAct trajectory (the ReAct two-layer design's format), with a context limit of %d tokens (%d characters for "+
		"react-two-layer). Probes come from the original (internal/testkit/probe): the task statement (the first user message; a "+
		"ReAct trajectory keeps it in its metadata, outside the turns), the artifact trail (every path in the agent's tool "+
		"calls), the last %d error lines of its tool results, its last %d commands, its last stated plan and the current turn. "+
		"kept = in the output (white space aside); recovered = in what recover_context answers for an id the output names "+
		"(resolved through the store's records of the session, as the API does); lost = neither. Compression of the compacted "+
		"region = the size of the input messages not kept verbatim over the size of the output messages that are new. Prefix "+
		"= the share of the output's tokens in leading messages identical to the input's (what a provider's prompt cache still "+
		"hits); again = the same between two compactions in a row (the first 85%% of the messages, then its output with the "+
		"rest appended). The summarizer is the product's offline one (offline.Summarizer, what runs without OPENAI_BASE_URL). %s",
		strings.Join(names, ", "), probeLimit, 4*probeLimit, probe.Recent, probe.Recent, judged)
	return nil
}

// probeRow is one preset's row: its figures over every conversation and
// format, against the targets.
func probeRow(preset string, runs []probeRun) row {
	var tasks, taskRuns, lost int
	var art, errs, cmds probe.Tally
	var ratios, usages, regions, prefixes, agains []float64
	statuses := map[string]int{}
	for _, r := range runs {
		if r.hasTask {
			taskRuns++
			if r.score.TaskVerbatim {
				tasks++
			}
		}
		add := func(t *probe.Tally, x probe.Tally) {
			t.Total += x.Total
			t.Kept += x.Kept
			t.Recovered += x.Recovered
		}
		add(&art, r.score.Artifacts)
		add(&errs, r.score.Errors)
		add(&cmds, r.score.Commands)
		lost += r.score.LostCount()
		ratios = append(ratios, r.ratio)
		usages = append(usages, r.usage)
		if r.region > 0 {
			regions = append(regions, r.region)
		}
		prefixes = append(prefixes, r.prefix)
		if r.again >= 0 {
			agains = append(agains, r.again)
		}
		statuses[r.status]++
	}
	share := func(t probe.Tally) string {
		return fmt.Sprintf("%.2f kept + %.2f recovered", t.KeptShare(), recoveredShare(t))
	}
	var st []string
	for _, k := range []string{"succeeded", "over_limit", "failed"} {
		if statuses[k] > 0 {
			st = append(st, fmt.Sprintf("%s %d", k, statuses[k]))
		}
	}
	value := fmt.Sprintf("%d runs (%s); task verbatim %d/%d; artifacts %s; last %d errors %s; last %d commands %s; lost without a pointer %d; "+
		"after/before %.2f; usage %.2f of the limit (min %.2f); compacted region %.1f×; prefix %.2f, again %.2f",
		len(runs), strings.Join(st, ", "), tasks, taskRuns, share(art), probe.Recent, share(errs), probe.Recent, share(cmds), lost,
		mean(ratios), mean(usages), minOf(usages), mean(regions), mean(prefixes), mean(agains))
	var missed []string
	if tasks < taskRuns {
		missed = append(missed, "task")
	}
	if art.KeptShare() < 0.95 {
		missed = append(missed, fmt.Sprintf("artifacts %.2f", art.KeptShare()))
	}
	if errs.KeptShare() < 0.9 {
		missed = append(missed, fmt.Sprintf("errors %.2f", errs.KeptShare()))
	}
	if cmds.KeptShare() < 0.9 {
		missed = append(missed, fmt.Sprintf("commands %.2f", cmds.KeptShare()))
	}
	if lost > 0 {
		missed = append(missed, fmt.Sprintf("lost %d", lost))
	}
	if len(regions) > 0 && mean(regions) < 5 {
		missed = append(missed, fmt.Sprintf("region %.1f×", mean(regions)))
	}
	met := "yes"
	if len(missed) > 0 {
		met = "no: " + strings.Join(missed, ", ")
	}
	pr, _ := policy.Resolve(preset, nil)
	return row{id: "8", name: fmt.Sprintf("Agent probes: %s (seed %s)", preset, pr.Seed), value: value,
		compared: "the original conversation's probes", target: "task 100%, artifacts ≥ 0.95, errors ≥ 0.9, commands ≥ 0.9 kept; 0 lost; region ≥ 5×", met: met}
}

func recoveredShare(t probe.Tally) float64 {
	if t.Total == 0 {
		return 0
	}
	return float64(t.Recovered) / float64(t.Total)
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// probeInput is a shared conversation in a wire format.
func probeInput(dir, file string, format conversation.Format) ([]byte, error) {
	in, err := chatFile(dir, file)
	if err != nil {
		return nil, err
	}
	switch format {
	case conversation.FormatAnthropic:
		return convtest.Anthropic(in)
	case conversation.FormatReAct:
		return reactFromChat(in, "fix the issue")
	}
	return in, nil
}

// benchInput is file's conversation sent in format, parsed, and preset
// resolved as a run resolves it.
func benchInput(dir, file string, format conversation.Format, preset string) ([]byte, conversation.Conversation, policy.Preset, error) {
	in, err := probeInput(dir, file, format)
	if err != nil {
		return nil, conversation.Conversation{}, policy.Preset{}, err
	}
	src, err := conversation.Parse(in, format)
	if err != nil {
		return nil, conversation.Conversation{}, policy.Preset{}, err
	}
	pr, err := policy.Resolve(preset, nil)
	return in, src, pr, err
}

func probeOne(ctx context.Context, st *stack, sc *scenario, o options, judge *probeJudge, preset, file string, format conversation.Format, i int) probeRun {
	r := probeRun{preset: preset, file: file, format: format, again: -1}
	in, src, pr, err := benchInput(o.dataDir, file, format, preset)
	if err != nil {
		r.err = err
		return r
	}
	model := probeModels[format]
	b, err := plan.NewBudget(pr, model, 0, tokens.DefaultLimits())
	if err != nil {
		r.err = err
		return r
	}
	limit := probeLimit
	if pr.Encoding == tokens.Chars {
		limit = 4 * probeLimit
	}
	session := fmt.Sprintf("probes-%d", i)
	compact := func(event string, conv []byte) (conversation.Conversation, outcome, error) {
		out := sc.compact(ctx, gateway.Event{Session: session, EventID: event, Kind: gateway.KindThreshold,
			Model: model, ContextLimit: limit, Preset: preset, Conversation: conv})
		if out.err != nil {
			return conversation.Conversation{}, out, out.err
		}
		data, err := st.blob.GetVerified(ctx, out.res.OutputKey, out.res.OutputSHA256)
		if err != nil {
			return conversation.Conversation{}, out, fmt.Errorf("read output: %w", err)
		}
		c, err := conversation.ParseAny(data)
		if err != nil {
			return conversation.Conversation{}, out, fmt.Errorf("parse output: %w", err)
		}
		return c, out, nil
	}
	got, out, err := compact("1", in)
	if err != nil {
		r.err = err
		return r
	}
	r.status = "succeeded"
	if out.res.OverLimit {
		r.status = "over_limit"
	}
	size := func(m conversation.Message) int { return tokens.Message(b.Counter, m) }
	set := probe.Derive(src, pr.Protection.PinMarkers)
	if len(set.Task) == 0 && len(pr.Protection.PinMarkers) == 0 {
		set = probe.Derive(src, policy.DefaultPinMarkers())
	}
	r.hasTask = set.Task != ""
	r.score = probe.Measure(set, got, recoverer(ctx, st, session))
	if out.res.TokensBefore > 0 {
		r.ratio = float64(out.res.TokensAfter) / float64(out.res.TokensBefore)
	}
	r.usage = float64(b.Measure(got)) / float64(limit)
	if before, after := probe.Region(src, got, size); after > 0 {
		r.region = float64(before) / float64(after)
	}
	if total := b.Measure(got); total > 0 {
		_, hit := probe.SharedPrefix(src, got, size)
		r.prefix = float64(hit) / float64(total)
	}
	if judge != nil && format == conversation.FormatOpenAI {
		jr, err := judge.grade(ctx, set, got)
		jr.Preset, jr.File, jr.Format = preset, file, string(format)
		if err != nil {
			jr.Error = err.Error()
		}
		judge.record(jr)
	}
	if format == conversation.FormatOpenAI {
		again, err := twoInARow(src, func(conv []byte, event string) (conversation.Conversation, error) {
			c, _, err := compact(event, conv)
			return c, err
		}, size, b)
		if err != nil {
			r.err = fmt.Errorf("two in a row: %w", err)
			return r
		}
		r.again = again
	}
	return r
}

// twoInARow compacts the first 85% of the messages (cut before a new
// turn), then the output with the rest appended, in the same session, and
// returns the share of the second output a prompt cache still hits after
// the first.
func twoInARow(src conversation.Conversation, compact func([]byte, string) (conversation.Conversation, error),
	size func(conversation.Message) int, b plan.Budget) (float64, error) {
	at := len(src.Messages) * 85 / 100
	for at < len(src.Messages) && src.Messages[at].Role == conversation.RoleTool {
		at++
	}
	first := src.Clone()
	first.Messages = first.Messages[:at]
	data, err := conversation.Render(first)
	if err != nil {
		return 0, err
	}
	out1, err := compact(data, "again-1")
	if err != nil {
		return 0, err
	}
	next := out1.Clone()
	next.Messages = append(next.Messages, src.Clone().Messages[at:]...)
	data, err = conversation.Render(next)
	if err != nil {
		return 0, err
	}
	out2, err := compact(data, "again-2")
	if err != nil {
		return 0, err
	}
	_, hit := probe.SharedPrefix(out1, out2, size)
	return float64(hit) / float64(b.Measure(out2)), nil
}

// recoverer reads an offload back as the recover_context tool does: the
// id names a content key of the tenant's offloads, which must be a live
// offload of the session in the store's records.
func recoverer(ctx context.Context, st *stack, session string) func(string) (string, error) {
	svc := &audit.Service{Store: st.store, Blob: st.blob}
	return func(id string) (string, error) {
		// As recover_context answers: offload ids and archive ids, each
		// resolved through the store's records of this tenant and session.
		rec, err := svc.RecoverContext(ctx, tenant, session, id, "")
		if err != nil {
			return "", err
		}
		return string(rec.Data), nil
	}
}
