package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Commit writes the compacted conversation in the caller's format, marks
// the run succeeded (at most once), persists the watermark, and only then
// deletes the offloads the summary restored.
func (a *Activities) Commit(ctx context.Context, in CommitInput) (res CommitResult, err error) {
	rec := a.begin(ctx, in.Run, "commit", "commit")
	defer rec.end(&err, nil)

	run := in.Run
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	tokensBefore := int64(in.TokensBefore)
	out, err := a.finalOutput(ctx, in, p, b, tokensBefore)
	if err != nil {
		return res, err
	}
	in, conv, data, o := out.in, out.conv, out.data, out.o
	ref, err := a.Blob.PutContent(ctx, run.Tenant, blob.KindOutput, data)
	if err != nil {
		return res, blobErr(fmt.Errorf("write output: %w", err))
	}
	if err := a.commitHandoff(ctx, in, conv, p, b, &o); err != nil {
		return res, err
	}
	c, err := a.commitRun(ctx, rec, in, p, b, conv, o, ref, data)
	if err != nil {
		return res, err
	}
	if err := a.commitSession(ctx, run, in); err != nil {
		return res, err
	}
	rec.outputSize = int64(len(data))
	// The commit read the tenant's endpoints in its own round trip.
	res.Committed, res.Notify = c.Committed, c.Webhooks && a.Hooks != nil
	if !res.Committed {
		// A retry of a commit that landed: the run's answer is its row's.
		res.Outcome, err = a.recordedOutcome(ctx, run.ID)
		return res, err
	}
	status := store.RunSucceeded
	if o.over {
		status = store.RunOverLimit
	}
	res.Outcome = store.OutcomeOf(store.Run{ID: run.ID, Status: status, Error: o.reason,
		TokensBefore: tokensBefore, TokensAfter: int64(o.after), Ratio: o.ratio, Level: string(o.level),
		ArchiveKey: in.ArchiveKey, OutputKey: ref.Key, OutputSHA256: ref.SHA256}, o.stats)
	return res, nil
}

// final is what a commit writes: the commit input as the output applies
// it, the output, its bytes and its outcome.
type final struct {
	in   CommitInput
	conv conversation.Conversation
	data []byte
	o    outcome
}

// finalOutput is the run's output: the working conversation at
// in.WorkKey, measured and priced, or, under cost.skip_unprofitable,
// the input unchanged when the session did not need the compaction yet
// and it would cost the agent more than it saves. A skipped run moves
// nothing of its session (no watermark, no released offload, no log
// block) and says so in a "skip" pass.
//
// A Goal Drift Warning (behaviour) is appended at the tail of the
// output, when it fits: a warning that would push the output over its
// limit is left out, the signs still recorded and said in the outcome.
func (a *Activities) finalOutput(ctx context.Context, in CommitInput, p policy.Preset, b plan.Budget, tokensBefore int64) (final, error) {
	signals, warning, err := a.behaviour(ctx, in, p)
	if err != nil {
		return final{}, err
	}
	f, err := a.measured(ctx, in, p, b, tokensBefore, in.WorkKey, warning)
	if err == nil && f.o.over && warning != "" {
		f, err = a.measured(ctx, in, p, b, tokensBefore, in.WorkKey, "")
	}
	if err != nil {
		return f, err
	}
	names := make([]string, 0, len(signals))
	for _, s := range signals {
		names = append(names, s.Name)
	}
	if len(names) > 0 {
		f.o.stats.BehaviourDrift = names
	}
	if !skipUnprofitable(in.Run.Trigger, p, b, tokensBefore, f.o) {
		return f, nil
	}
	cost := *f.o.stats.Cost
	skip := in
	skip.Watermark, skip.DeleteOffloads, skip.Log = "", nil, nil
	skip.Passes = append(append([]PassStat(nil), in.Passes...), PassStat{Name: "skip",
		Note: fmt.Sprintf("the input was under its limit and the compaction would cost the agent $%.6f more than it saves over its next %d calls (cache re-write of %d tokens): kept as it came",
			-(cost.NetSavingUSD + cost.SummarizerUSD), cost.Turns, cost.CacheRewriteTokens)})
	if f, err = a.measured(ctx, skip, p, b, tokensBefore, in.ArchiveKey, ""); err != nil {
		return f, err
	}
	// What the skipped compaction spent stays spent.
	f.o.stats.Cost.NetSavingUSD = -cost.SummarizerUSD
	if len(names) > 0 {
		f.o.stats.BehaviourDrift = names // recorded; the input comes back as it was
	}
	return f, nil
}

// skipUnprofitable reports whether a run's output o is one that
// cost.skip_unprofitable keeps out: the input was under the limit (the
// session did not need it yet), the output fits, and the compaction
// costs the agent more over its next calls than it saves, the
// summarizer's cost aside (spent by now either way). Only a threshold
// event is the service's own call to make: a checkpoint or manual event
// is the caller's intent (seed 002 makes manual compaction
// unconditional; a checkpoint must prune and move its watermark), so
// cost never overrides it.
func skipUnprofitable(trigger string, p policy.Preset, b plan.Budget, tokensBefore int64, o outcome) bool {
	c := o.stats.Cost
	return contract.Automatic(trigger) && p.Cost.SkipUnprofitable && !o.over && tokensBefore <= int64(b.Limit) && c != nil && c.Priced &&
		c.NetSavingUSD+c.SummarizerUSD < 0
}

// measured reads the conversation at key as the run's output, with
// warning (when not "") appended at its tail, and works out its outcome:
// size, level, cache, log and cost figures.
func (a *Activities) measured(ctx context.Context, in CommitInput, p policy.Preset, b plan.Budget, tokensBefore int64, key, warning string) (final, error) {
	f := final{in: in}
	conv, _, err := a.load(ctx, in.Run.Tenant, key)
	if err != nil {
		return f, err
	}
	warned := false
	if warning != "" {
		conv = conv.Clone() // the loaded conversation is the cache's
		warned = appendWarning(&conv, warning)
	}
	size := a.outputSize(ctx, in.Run, conv, b)
	after := size.Size
	// changed: by commit itself, since the work was saved.
	reactStats, changed, err := setReActStats(&conv, p, b, after)
	if err != nil {
		return f, err
	}
	if f.data, err = a.outputBytes(ctx, in.Run.Tenant, key, conv, changed || warned); err != nil {
		return f, err
	}
	f.conv, f.o = conv, commitOutcome(ctx, in, conv, p, b, after, tokensBefore, reactStats)
	if size.Counting == tokens.CountingProvider && f.o.over {
		f.o.reason = providerReason(f.o.reason, conv, b, after)
		f.o.stats.OverLimitReason = f.o.reason
	}
	f.o.stats.Watermark, f.o.stats.TokenCounting = in.Watermark, size.Counting
	f.o.stats.GoalDriftWarning = warned
	if f.o.stats.Cache, err = a.cacheFigures(ctx, in, conv, b, after); err != nil {
		return f, err
	}
	if f.o.stats.SessionLog, f.o.log, err = a.logFigures(ctx, in, conv, p, b); err != nil {
		return f, err
	}
	f.o.stats.SummaryLog = f.o.stats.SessionLog
	f.o.stats.Cost = a.costFigures(in, p, b, int(tokensBefore), after, f.o.stats.Cache)
	return f, nil
}

// outputSize is the size of a run's output that the limit is checked
// against: the provider's count when a.ProviderTokens handles the run's
// model (counted over the network, here in the activity, within the
// counter's timeout and cached by content), else the budget's. A provider
// that fails never fails the commit: the budget's estimate stands, and
// the outcome's token_counting says "estimate".
func (a *Activities) outputSize(ctx context.Context, run contract.Run, conv conversation.Conversation, b plan.Budget) tokens.Measured {
	m, err := tokens.MeasureConversation(ctx, a.ProviderTokens, run.Model, b.Encoding, b.Overhead, conv,
		func() int { return b.Measure(conv) })
	if err != nil {
		logger(ctx).Warn("provider token count failed; the output's size is the estimate", "run", run.ID, "error", err)
	}
	return m
}

// providerReason is the over-limit reason of an output the provider
// counted: its size is the provider's, and the estimate the steps worked
// with is named beside it.
func providerReason(reason string, conv conversation.Conversation, b plan.Budget, after int) string {
	est := b.Measure(conv)
	prefix := fmt.Sprintf("%d of limit %d (%s)", est, b.Limit, b.CounterName())
	if rest, ok := strings.CutPrefix(reason, prefix); ok {
		return fmt.Sprintf("%d of limit %d (the provider's count; %s estimates %d)", after, b.Limit, b.CounterName(), est) + rest
	}
	return fmt.Sprintf("%s (the provider's count: %d)", reason, after)
}

// commitSession moves the session's state on once the run is recorded:
// the watermark the run reached, and the offloads it released. Both are
// idempotent, so a retried commit repeats them harmlessly. A replay is a
// what-if and moves nothing: the session's agent may still read those
// offloads, and its watermark moves only if the replay is promoted
// (store.Promote, from the watermark its stats record).
func (a *Activities) commitSession(ctx context.Context, run contract.Run, in CommitInput) error {
	if run.ReplayOf != "" {
		return nil
	}
	if in.Watermark != "" {
		if err := a.Store.SetWatermark(ctx, run.Tenant, run.Session, in.Watermark, run.ID); err != nil {
			return storeErr(fmt.Errorf("persist watermark: %w", err))
		}
	}
	deleted, err := a.releaseOffloads(ctx, run, in.DeleteOffloads)
	if err != nil {
		return err
	}
	if deleted != len(in.DeleteOffloads) {
		logger(ctx).Info("offloads already released", "run", run.ID, "asked", len(in.DeleteOffloads), "deleted", deleted)
	}
	return nil
}

// recordedOutcome is the outcome the run's row holds.
func (a *Activities) recordedOutcome(ctx context.Context, runID string) (contract.Outcome, error) {
	row, err := a.Store.GetRun(ctx, runID)
	if err != nil {
		return contract.Outcome{}, storeErr(fmt.Errorf("read run: %w", err))
	}
	o, err := row.Outcome()
	if err != nil {
		return contract.Outcome{}, storeErr(err)
	}
	return o, nil
}

// setReActStats gives a ReAct trajectory its compression stats. A bare
// list of turns has no place for them: they go to the run's stats (and
// the response) only, and the output stays a list; changed reports
// whether conv itself got them. A conversation of another format has none.
func setReActStats(conv *conversation.Conversation, p policy.Preset, b plan.Budget, after int) (*conversation.ReActStats, bool, error) {
	if conv.Format != conversation.FormatReAct {
		return nil, false, nil
	}
	usage := b.Usage(after)
	threshold := int(float64(b.Limit) * p.GlobalResults.TriggerUsage)
	stats := &conversation.ReActStats{
		TotalSize: after, ModelLimit: b.Limit, UsagePercent: roundTo(usage*100, 1),
		TurnsCount: len(conv.Messages) / 2, CompressionThreshold: threshold, NeedsCompression: after > threshold,
	}
	if !conversation.HasStatsPlace(*conv) {
		return stats, false, nil
	}
	if err := conversation.SetReActStats(conv, *stats); err != nil {
		return nil, false, fmt.Errorf("write compression stats: %w", err)
	}
	return stats, true, nil
}

// outcome is what a commit decided about its run: the figures of its
// result and the stats recorded on it.
type outcome struct {
	after        int
	usage        float64
	level        strategy.Level
	ratio        float64
	over         bool
	reason       string
	tokensBefore int64
	stats        store.RunStats
	// log are the blocks the run appended that its output holds.
	log []store.LogBlock
}

// commitOutcome works out the run's outcome from its compacted size.
func commitOutcome(ctx context.Context, in CommitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget,
	after int, tokensBefore int64, reactStats *conversation.ReActStats) outcome {
	usage := b.Usage(after)
	o := outcome{after: after, usage: usage, level: strategy.LevelFor(usage), over: b.Over(after), tokensBefore: tokensBefore}
	if tokensBefore > 0 {
		o.ratio = float64(after) / float64(tokensBefore)
	}
	if o.over {
		o.reason = plan.OverLimitReason(conv, p, b, in.Ladder, in.HistoryFailed)
		logger(ctx).Warn("run ends over its limit", "run", in.Run.ID, "size", after, "limit", b.Limit)
	}
	o.stats = store.RunStats{
		Stats: contract.Stats{
			Passes: in.Passes, ContextLimit: b.Limit, Unit: unitOf(b), HistoryFailed: in.HistoryFailed,
			Recommendation: strategy.Recommendation(o.level), ArchiveKey: in.ArchiveKey,
			OverLimit: o.over, OverLimitReason: o.reason, PreservedCount: in.Preserved, DeletedOffloads: len(in.DeleteOffloads),
			LevelBefore: in.LevelBefore, Drift: in.Drift, Format: string(conv.Format), LevelReason: plan.LevelReason(conv, p, b),
			DegradedReasons: in.Degraded,
		},
		UsageAfter: usage, AgentModel: in.Run.Model, Encoding: b.Counter.Name(),
	}
	if reactStats != nil {
		o.stats.ContextCompression = mustJSON(map[string]any{"enabled": true, "stats": reactStats})
	}
	return o
}

// commitHandoff makes the fresh session of a run that needs one and
// names it on the outcome's stats. A session that reached
// CRITICAL gets its fresh start even when this run brought it lower: it
// will be back there soon.
func (a *Activities) commitHandoff(ctx context.Context, in CommitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget, o *outcome) error {
	startedCritical := in.LevelBefore == string(strategy.LevelCritical)
	if o.level != strategy.LevelCritical && !startedCritical && !o.over && in.Run.Trigger != "checkpoint" {
		return nil
	}
	// The three-tier design's "Checkpoint + fresh session", made: the fresh
	// session's conversation, stored and named on the run.
	ref, err := a.handoff(ctx, in.Run, conv, p, b, plan.HandoffRefs{Level: string(o.level), Usage: o.usage, ArchiveID: archiveID(in.ArchiveKey)}, in.HandoffSummaryKey)
	var app *temporal.ApplicationError
	switch {
	case err != nil && errors.As(err, &app) && !app.NonRetryable():
		return err // S3 or Postgres is down: the commit retries
	case err != nil:
		// The handoff is an extra: a conversation it cannot be made
		// from does not fail the run.
		logger(ctx).Warn("no handoff", "run", in.Run.ID, "error", err)
	case ref.Key != "":
		o.stats.HandoffKey, o.stats.HandoffSHA256 = ref.Key, ref.SHA256
	}
	return nil
}

// commitRun marks the run final with its outcome and the records of its
// steps, this one's included (rec.end then writes only a failure), and
// reports whether this call did (a retried commit finds the run already
// final, and nothing changes) and whether the tenant has webhooks.
func (a *Activities) commitRun(ctx context.Context, rec *attempt, in CommitInput, p policy.Preset, b plan.Budget,
	conv conversation.Conversation, o outcome, ref blob.Ref, data []byte) (store.Commit, error) {
	run := in.Run
	model := in.Model
	if model == "" {
		model = a.modelFor(p.SummarizerModel)
	}
	rec.outputSize = int64(len(data))
	steps := append(in.Steps, rec.row(nil))
	after := o.after
	c, err := a.Store.CommitRun(ctx, run.ID, store.RunResult{
		TokensAfter: int64(after), CharsAfter: int64(runeCount(data)), Ratio: o.ratio,
		OutputKey: ref.Key, OutputSHA256: ref.SHA256, Model: model, PromptVersion: in.PromptVersion,
		Level: string(o.level), Stats: mustJSON(o.stats), OverLimit: o.over, OverLimitReason: o.reason, Steps: steps,
		Log: o.log,
	})
	if err != nil {
		return c, storeErr(fmt.Errorf("commit run: %w", err))
	}
	rec.written = true
	if c.Committed {
		status := string(store.RunSucceeded)
		if o.over {
			status = string(store.RunOverLimit)
		}
		a.Metrics.Run(status, p.Name, string(conv.Format), unitOf(b), int(o.tokensBefore), after)
		a.Metrics.RunEffects(p.Name, o.stats.Cache, o.stats.Cost, o.stats.SessionLog)
		return c, nil
	}
	current, err := a.Store.GetRun(ctx, run.ID)
	if err != nil {
		return c, storeErr(fmt.Errorf("read run: %w", err))
	}
	if current.Status != store.RunSucceeded && current.Status != store.RunOverLimit {
		return c, badInput(fmt.Errorf("run %s is already %s", run.ID, current.Status))
	}
	return c, nil
}

// outputBytes is the run's output: when commit changed nothing, the bytes
// at workKey, so that the output is not rendered a second time: the saved
// working copy (a "work" object is the rendering of the conversation
// commit loaded), or the input, the caller's own bytes, which the gateway
// stored as the archive, when no pass changed it; else the conversation
// rendered.
func (a *Activities) outputBytes(ctx context.Context, tenant, workKey string, conv conversation.Conversation, changed bool) ([]byte, error) {
	if _, kind, sha, err := blob.ParseContentKey(workKey); err == nil && (kind == blob.KindWork || kind == blob.KindArchive) && !changed {
		return a.getVerified(ctx, tenant, workKey, sha)
	}
	data, err := conversation.Render(conv)
	if err != nil {
		return nil, fmt.Errorf("render output: %w", err)
	}
	return data, nil
}

// cacheFigures measures how much of the output is an unchanged prefix of
// the run's request (its archived original), which the agent's prompt
// cache keeps, and how much its next call writes again.
func (a *Activities) cacheFigures(ctx context.Context, in CommitInput, conv conversation.Conversation, b plan.Budget, after int) (*contract.CacheFigures, error) {
	orig, _, ok, err := a.original(ctx, in.Run, in.ArchiveKey)
	if err != nil || !ok {
		return nil, err
	}
	prefix := min(plan.StablePrefix(orig, conv, b), after)
	f := &contract.CacheFigures{PrefixTokens: prefix, RewriteTokens: after - prefix}
	if after > 0 {
		f.PrefixShare = roundTo(float64(prefix)/float64(after), 3)
	}
	return f, nil
}

// logFigures describes the session log of the output, and picks the
// blocks the run appended that the output still holds (a later step may
// have replaced a whole conversation by a handoff) for the commit to
// record. A preset without history summaries has no log.
func (a *Activities) logFigures(ctx context.Context, in CommitInput, conv conversation.Conversation, p policy.Preset, b plan.Budget) (*contract.LogFigures, []store.LogBlock, error) {
	if !p.History.Enabled && len(in.Log) == 0 {
		return nil, nil, nil
	}
	if len(in.Log) == 0 && !holdsLogBlock(conv) {
		// No block could be recorded: the session's log need not be read.
		return &contract.LogFigures{}, nil, nil
	}
	recorded := in.LogRecorded
	if !in.LogRead {
		// No history pass read the log in this run: the commit does.
		var err error
		if recorded, err = a.recordedBlocks(ctx, in.Run); err != nil {
			return nil, nil, err
		}
	}
	known := newDigestSet(append(slices.Clone(recorded), LogDigests(in.Log)...))
	_, view := plan.SeparateLog(conv, known.has, b.Counter)
	present := map[string]bool{}
	for _, d := range view.Digests {
		present[d] = true
	}
	f := &contract.LogFigures{Blocks: len(view.Messages), Tokens: view.Tokens}
	var keep []store.LogBlock
	for _, l := range in.Log {
		if !present[l.SHA256] {
			continue
		}
		keep = append(keep, l)
		f.Appended++
		f.Reflected = f.Reflected || l.Reflection
	}
	return f, keep, nil
}

// holdsLogBlock reports whether a text block of conv is framed as a
// session log block (only the store's records say whether it is one).
func holdsLogBlock(conv conversation.Conversation) bool {
	for _, m := range conv.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindText && strategy.IsLogBlock(b.Text) {
				return true
			}
		}
	}
	return false
}

// costFigures prices the run: the summarizer's usage summed over its
// steps, and the net saving over the agent's next calls after the cache
// re-write (pricing.Saving). Sizes in characters (react-two-layer) are
// not priced.
func (a *Activities) costFigures(in CommitInput, p policy.Preset, b plan.Budget, before, after int, cache *contract.CacheFigures) *contract.CostFigures {
	// The horizon is the session's own pace when an incremental event
	// showed it (the agent's calls since its previous compaction), else
	// COST_TURNS.
	turns, source := a.CostTurns, contract.TurnsDefault
	if in.Run.ObservedTurns > 0 {
		turns, source = in.Run.ObservedTurns, contract.TurnsObserved
	}
	f := &contract.CostFigures{TokensShed: max(before-after, 0), Turns: turns, TurnsSource: source}
	for _, st := range in.Steps {
		f.SummarizerInputTokens += st.PromptTokens
		f.SummarizerOutputTokens += st.CompletionTokens
	}
	run := pricing.Run{Before: before, After: after, SummarizerIn: f.SummarizerInputTokens, SummarizerOut: f.SummarizerOutputTokens}
	if cache != nil {
		run.Prefix, run.Rewrite = cache.PrefixTokens, cache.RewriteTokens
		f.CacheRewriteTokens = cache.RewriteTokens
	}
	agent, ok := a.Prices.For(in.Run.Model)
	if !ok || unitOf(b) == "chars" {
		return f
	}
	model := in.Model
	if model == "" {
		model = a.modelFor(p.SummarizerModel)
	}
	summarizer, _ := a.Prices.For(model)
	saving, spent := pricing.Saving(run, agent, summarizer, turns)
	f.NetSavingUSD, f.SummarizerUSD, f.Priced = roundTo(saving, 6), roundTo(spent, 6), true
	return f
}
