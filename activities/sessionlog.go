package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// The session log of the history steps: the blocks a reflection adds,
// and the digests of those the session's runs recorded.

// reflect replaces the log's blocks of *conv by the reflection at
// in.ReflectionKey (plan.Reflection), framed as a block, and returns its
// record and how many messages fewer the conversation has.
func (a *Activities) reflect(ctx context.Context, in ApplyHistoryInput, style strategy.SummaryStyle, b plan.Budget, conv *conversation.Conversation, view plan.LogView) (store.LogBlock, int, error) {
	body, err := a.text(ctx, in.Run.Tenant, in.ReflectionKey)
	if err != nil {
		return store.LogBlock{}, 0, err
	}
	label := plan.ReflectionLabel(*conv, view)
	if style == strategy.StyleSessionSummary {
		body = sessionSummary(in.Run, body, "")
	}
	msg, err := strategy.SummaryMessage(blockText(style, label, body), style)
	if err != nil {
		return store.LogBlock{}, 0, badInput(fmt.Errorf("reflect: %w", err))
	}
	out, removed, err := plan.Reflect(*conv, view, msg)
	if err != nil {
		return store.LogBlock{}, 0, badInput(err)
	}
	*conv = out
	t := msg.Blocks[0].Text
	return store.LogBlock{SHA256: plan.BlockDigest(t), Label: label, Tokens: b.Counter.Count(t), Reflection: true,
		Condensed: append([]string(nil), view.Digests...)}, removed, nil
}

// blockText frames summary as log block label in the preset's style: a
// session summary keeps its heading first (the three-tier design's
// "## Session Summary [session]"), the block's delimiters after it.
func blockText(style strategy.SummaryStyle, label, summary string) string {
	if style == strategy.StyleSessionSummary && strings.HasPrefix(summary, strategy.SessionSummaryHeading) {
		head, rest, _ := strings.Cut(summary, "\n")
		return head + "\n\n" + strategy.LogBlockText(label, rest)
	}
	return strategy.LogBlockText(label, summary)
}

// digestSet is a set of log block digests.
type digestSet map[string]bool

func (d digestSet) has(text string) bool { return d[plan.BlockDigest(text)] }

// newDigestSet is the set of digests.
func newDigestSet(digests []string) digestSet {
	set := make(digestSet, len(digests))
	for _, d := range digests {
		set[d] = true
	}
	return set
}

// LogDigests lists the digests of log blocks, in order: what a later
// history step of the same run takes as HistoryInput.Pending, and what
// commit looks the output's blocks up with.
func LogDigests(blocks []LogBlock) []string {
	out := make([]string, len(blocks))
	for i, l := range blocks {
		out[i] = l.SHA256
	}
	return out
}

// recordedBlocks are the digests of the blocks the session's runs
// recorded. With those a run appended before (pending), they are the
// session's log blocks: only these are read as blocks; any other text
// stays what it is.
func (a *Activities) recordedBlocks(ctx context.Context, run contract.Run) ([]string, error) {
	blocks, err := a.Store.SessionLog(ctx, run.Tenant, run.Session)
	if err != nil {
		return nil, storeErr(fmt.Errorf("read session log: %w", err))
	}
	return LogDigests(blocks), nil
}
