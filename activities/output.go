package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// How the commit makes and measures the final output: the working
// conversation as it stands, or the input when the passes did not pay.

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
