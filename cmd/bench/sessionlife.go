package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/probe"
	"github.com/ctxcompact/orchestrator/internal/testkit/sessionlife"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// lifeLimit is measurement 10's context limit (tokens; four times as many
// characters for react-two-layer), and lifeTrigger the share of it at
// which the platform sends an event.
const (
	lifeLimit   = 20_000
	lifeTrigger = 0.65
)

// lifeFiles are measurement 10's sessions, one per wire format.
var lifeFiles = map[conversation.Format]string{
	conversation.FormatOpenAI:    "swe-agent-deepseek/django__django-13265.json",
	conversation.FormatAnthropic: "swe-agent-gemini/psf__requests-1142.json",
	conversation.FormatReAct:     "swe-agent-deepseek/django__django-11910.json",
}

// lifeRun is one preset's session in one format.
type lifeRun struct {
	session string
	preset  string
	format  conversation.Format
	res     sessionlife.Result
	llmIn   []int // summarizer input characters per compaction
	upload  int   // bytes of the incremental events' messages
	newData int   // bytes the agent appended between events
	err     error
}

// benchSessionLife replays real trajectories turn by turn, as a platform
// does: each time the conversation reaches the trigger it sends an
// incremental event (the session's latest output and the turns since),
// and continues from the output. It measures a session's life rather
// than one compaction.
func benchSessionLife(ctx context.Context, st *stack, o options, rep *report) error {
	compactions := 12
	presets := policy.Names()
	if o.quick {
		compactions, presets = 6, []string{policy.Adaptive, policy.AutoSummarize}
	}
	type job struct {
		preset string
		format conversation.Format
	}
	var jobs []job
	for _, p := range presets {
		formats := []conversation.Format{conversation.FormatOpenAI, conversation.FormatAnthropic}
		if p == policy.ReactTwoLayer {
			// The ReAct two-layer design never drops a turn: its
			// session is a trajectory.
			formats = append(formats, conversation.FormatReAct)
		}
		for _, f := range formats {
			jobs = append(jobs, job{p, f})
		}
	}
	runs := make([]lifeRun, len(jobs))
	forEach(len(jobs), 2, func(i int) {
		runs[i] = lifeOne(ctx, st, o, jobs[i].preset, jobs[i].format, i, compactions)
	})
	for _, p := range presets {
		var mine []lifeRun
		for _, r := range runs {
			if r.preset == p {
				mine = append(mine, r)
			}
		}
		rep.add(lifeRow(ctx, st, p, mine))
	}
	rep.note("10. Session life: real SWE-agent trajectories (%s as OpenAI chat, %s as Anthropic Messages from a Claude agent, %s as a "+
		"ReAct trajectory for react-two-layer) replayed turn by turn (internal/testkit/sessionlife) at a %d-token limit (%d characters for "+
		"react-two-layer): an event each time the conversation reaches %.0f%% by the platform's estimate (o200k), sent as an incremental "+
		"event (base: the latest output's run and SHA-256; messages: the turns since), and the next turns continue from the output; "+
		"turns are replayed again with fresh call ids when a trajectory runs out, and a turn larger than the whole limit is left out. "+
		"%d events per session. Probes of the final conversation against every turn the agent saw (internal/testkit/probe; kept + recovered "+
		"through the ids it names); prefix = the run's cache figures (the output's tokens that are an unchanged prefix of the request) "+
		"over compactions that did not reflect; log blocks verbatim = the share of compactions without a reflection whose output holds "+
		"every earlier block byte for byte and in order; upload ÷ new = the incremental events' message bytes over the bytes appended; "+
		"summarizer input = characters sent to the OpenAI-compatible test endpoint (it answers extractively) per compaction, the "+
		"second half of the session against the first; summarizer tokens and net saving are the runs' cost figures (the endpoint's usage; "+
		"the built-in price table, the agent's model and the deployment's summarizer model).",
		shortName(lifeFiles[conversation.FormatOpenAI]), shortName(lifeFiles[conversation.FormatAnthropic]),
		shortName(lifeFiles[conversation.FormatReAct]), lifeLimit, 4*lifeLimit, lifeTrigger*100, compactions)
	return nil
}

// lifeOne replays one session.
func lifeOne(ctx context.Context, st *stack, o options, preset string, format conversation.Format, i, compactions int) lifeRun {
	r := lifeRun{preset: preset, format: format}
	sc, err := st.newScenario(fmt.Sprintf("life-%d", i))
	if err != nil {
		r.err = err
		return r
	}
	defer sc.close()
	_, src, pr, err := benchInput(o.dataDir, lifeFiles[format], format, preset)
	if err != nil {
		r.err = err
		return r
	}
	model := probeModels[format]
	limit, counter := lifeLimit, tokens.Counter(nil)
	if pr.Encoding == tokens.Chars {
		limit, counter = 4*lifeLimit, mustCounter(tokens.Chars)
	} else {
		counter = mustCounter("o200k_base")
	}
	session := fmt.Sprintf("life-%d-%s-%s", i, preset, format)
	r.session = session
	calls := 0
	r.res, r.err = sessionlife.Replay(ctx, src, sessionlife.Options{Limit: limit, Trigger: lifeTrigger, Counter: counter,
		Compactions: compactions, Cycle: true}, func(ctx context.Context, le sessionlife.Event) (contract.Outcome, []byte, error) {
		ev := gateway.Event{Session: session, EventID: fmt.Sprint(le.N), Kind: gateway.KindThreshold,
			Model: model, ContextLimit: limit, Preset: preset, Conversation: le.Data}
		if le.Base != nil && le.Base.OutputKey != "" && format != conversation.FormatReAct {
			msgs, err := sessionlife.MessagesJSON(format, le.Appended)
			if err != nil {
				return contract.Outcome{}, nil, err
			}
			ev.Conversation, ev.Base, ev.Messages = nil, &gateway.Base{RunID: le.Base.RunID, SHA256: le.Base.OutputSHA256}, msgs
			r.upload += len(msgs)
			r.newData += le.New
		}
		out := sc.compact(ctx, ev)
		all := sc.llm.Calls()
		chars := 0
		for _, c := range all[calls:] {
			chars += c.PromptChars
		}
		calls = len(all)
		r.llmIn = append(r.llmIn, chars)
		if out.err != nil {
			return out.res, nil, out.err
		}
		if out.res.OutputKey == "" {
			return out.res, nil, nil
		}
		data, err := st.blob.GetVerified(ctx, out.res.OutputKey, out.res.OutputSHA256)
		return out.res, data, err
	})
	return r
}

func mustCounter(name string) tokens.Counter {
	c, err := tokens.New(name)
	if err != nil {
		panic(err)
	}
	return c
}

// costTurns is the horizon the runs' net savings were counted over: the
// mean of their turns (the session's own pace between compactions, as
// its incremental events showed it, or COST_TURNS), written "7.3".
func costTurns(runs []lifeRun) string {
	sum, n := 0, 0
	for _, r := range runs {
		for _, c := range r.res.Compactions {
			if c.Outcome.Cost != nil {
				sum += c.Outcome.Cost.Turns
				n++
			}
		}
	}
	if n == 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(sum)/float64(n), 'f', 1, 64)
}

// lifeRow is one preset's row against the targets.
func lifeRow(ctx context.Context, st *stack, preset string, runs []lifeRun) row {
	statuses := map[string]int{}
	var art, errs, cmds probe.Tally
	var prefixes, rewrites []float64
	kept, pairs, reflections := 0, 0, 0
	upload, newData := 0, 0
	early, late := 0, 0
	var summarizerTokens, savings []float64
	var failed []string
	for _, r := range runs {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.format, r.err))
			continue
		}
		var prev []string
		for _, c := range r.res.Compactions {
			o := c.Outcome
			statuses[o.Status]++
			blocks := sessionlife.Blocks(c.Output)
			reflected := o.SessionLog != nil && o.SessionLog.Reflected
			if o.Cost != nil {
				summarizerTokens = append(summarizerTokens, float64(o.Cost.SummarizerInputTokens+o.Cost.SummarizerOutputTokens))
				if o.Cost.Priced {
					savings = append(savings, o.Cost.NetSavingUSD)
				}
			}
			if reflected {
				reflections++
			} else if o.Cache != nil {
				prefixes = append(prefixes, o.Cache.PrefixShare)
				rewrites = append(rewrites, float64(o.Cache.RewriteTokens))
			}
			if !reflected && len(prev) > 0 {
				pairs++
				if len(blocks) >= len(prev) && slices.Equal(prev, blocks[:len(prev)]) {
					kept++
				}
			}
			prev = blocks
		}
		set := probe.Derive(r.res.Original, policy.DefaultPinMarkers())
		sc := probe.Measure(set, r.res.Final, recoverer(ctx, st, r.session))
		if verbose {
			// Where the last errors went: -v prints the ones the final
			// conversation's text does not hold (recovered by id, or lost).
			text := strings.Join(strings.Fields(probe.Text(r.res.Final)), " ")
			for _, e := range set.Errors {
				if !strings.Contains(text, strings.Join(strings.Fields(e), " ")) {
					at := -1
					for i, m := range r.res.Original.Messages {
						for _, b := range m.Blocks {
							if strings.Contains(b.Text, e) {
								at = i
							}
						}
					}
					head := e[:min(len(e), 25)]
					fmt.Fprintf(os.Stderr, "bench: 10. %s %s: last error not in the text (message %d of %d; its head in the text: %v): %.160s\n",
						preset, r.format, at, len(r.res.Original.Messages), strings.Contains(text, head), e)
				}
			}
		}
		add := func(t *probe.Tally, x probe.Tally) {
			t.Total += x.Total
			t.Kept += x.Kept
			t.Recovered += x.Recovered
		}
		add(&art, sc.Artifacts)
		add(&errs, sc.Errors)
		add(&cmds, sc.Commands)
		upload += r.upload
		newData += r.newData
		half := len(r.llmIn) / 2
		for k, n := range r.llmIn {
			if k < half {
				early += n
			} else {
				late += n
			}
		}
	}
	if len(failed) > 0 {
		return row{id: "10", name: "Session life: " + preset, value: "failed: " + strings.Join(failed, "; "), met: "no"}
	}
	share := func(t probe.Tally) float64 {
		if t.Total == 0 {
			return 1
		}
		return float64(t.Kept+t.Recovered) / float64(t.Total)
	}
	verbatim := 1.0
	if pairs > 0 {
		verbatim = float64(kept) / float64(pairs)
	}
	uploadRatio := 0.0
	if newData > 0 {
		uploadRatio = float64(upload) / float64(newData)
	}
	flat := 0.0
	if early > 0 {
		flat = float64(late) / float64(early)
	}
	var counts []string
	total := 0
	for _, k := range []string{"succeeded", "over_limit", "failed"} {
		if statuses[k] > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", k, statuses[k]))
		}
		total += statuses[k]
	}
	// Kept is in the conversation's text; the share beside it adds what
	// the ids the conversation names give back.
	value := fmt.Sprintf("%d compactions over %d sessions (%s), %d reflections; files %.2f (kept %.2f), last %d errors %.2f (kept %.2f), last %d commands %.2f (kept %.2f); "+
		"prefix share %.2f and %.0f tokens re-written per compaction (between reflections); log blocks verbatim %.2f; upload ÷ new %.2f; "+
		"summarizer input second half ÷ first %.2f; summarizer %.0f tokens and net saving $%.4f over the agent's next %s calls per compaction, its own pace (%d of %d priced)",
		total, len(runs), strings.Join(counts, ", "), reflections, share(art), art.KeptShare(), probe.Recent, share(errs), errs.KeptShare(),
		probe.Recent, share(cmds), cmds.KeptShare(),
		mean(prefixes), mean(rewrites), verbatim, uploadRatio, flat, mean(summarizerTokens), mean(savings), costTurns(runs), len(savings), total)
	var missed []string
	check := func(ok bool, what string) {
		if !ok {
			missed = append(missed, what)
		}
	}
	check(statuses["succeeded"] == total, "every compaction succeeded")
	check(share(art) >= 0.9, "files ≥ 0.9")
	check(errs.KeptShare() >= 0.8, "errors kept in the text ≥ 0.8")
	check(share(cmds) >= 0.9, "commands ≥ 0.9")
	check(mean(prefixes) >= 0.8, "prefix share ≥ 0.8")
	check(verbatim == 1, "log blocks verbatim 100%")
	check(newData == 0 || uploadRatio <= 1.2, "upload ≤ 1.2× new")
	check(early == 0 || flat <= 1.5, "summarizer input flat")
	met := "yes"
	if len(missed) > 0 {
		met = "no: " + strings.Join(missed, ", ")
	}
	return row{id: "10", name: "Session life: " + preset, value: value,
		target: "all succeeded; after ≥ 10 compactions files ≥ 0.9, errors kept in the text ≥ 0.8, commands ≥ 0.9; prefix ≥ 0.8 and blocks verbatim 100% between reflections; upload ≤ 1.2× new; summarizer input flat",
		met:    met}
}
