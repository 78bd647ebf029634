package activities

import (
	"context"
	"fmt"
	"slices"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/pricing"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The figures a commit records beside the output: its cache, its
// session log's, its cost, and a ReAct trajectory's stats.

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
