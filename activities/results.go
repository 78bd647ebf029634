package activities

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/textcut"
)

// target stores one tool result's text and context for an LLM pass.
func (a *Activities) target(ctx context.Context, run contract.Run, conv conversation.Conversation, r strategy.ResultLoc) (Target, error) {
	textKey, err := a.putText(ctx, run, "text", conv.Messages[r.Msg].Blocks[r.Block].Text)
	if err != nil {
		return Target{}, err
	}
	t := Target{Msg: r.Msg, Block: r.Block, Chars: r.Chars, TextKey: textKey}
	if r.Context != "" {
		if t.ContextKey, err = a.putText(ctx, run, "text", r.Context); err != nil {
			return Target{}, err
		}
	}
	return t, nil
}

// Chunk splits a large result into bounded chunks (the ReAct two-layer design: 50K chars),
// each stored on its own.
func (a *Activities) Chunk(ctx context.Context, in ChunkInput) (res ChunkResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "chunk")
	defer rec.end(&err, &res.Recorded)

	p, err := a.preset(in.Run)
	if err != nil {
		return res, err
	}
	text, err := a.text(ctx, in.Run.Tenant, in.TextKey)
	if err != nil {
		return res, err
	}
	chunks, err := textcut.Chunk(text, chunkChars(utf8.RuneCountInString(text), p.LargeResult.ChunkChars))
	if err != nil {
		return res, config(fmt.Errorf("chunk: %w", err))
	}
	if p.Drift.Enabled {
		// The merged summary is drift-checked against the whole result.
		a.prefetchIdentifiers(in.TextKey, text)
	}
	for _, c := range chunks {
		key, err := a.putText(ctx, in.Run, blob.KindChunk, c)
		if err != nil {
			return res, err
		}
		res.Keys = append(res.Keys, key)
		res.Chars = append(res.Chars, utf8.RuneCountInString(c))
	}
	logger(ctx).Info("Breaking result into chunks for summarization", "run", in.Run.ID, "chars", utf8.RuneCountInString(text), "chunks", len(chunks))
	rec.inputSize, rec.outputSize = int64(len(text)), int64(len(chunks))
	return res, nil
}

// MaxChunks bounds the chunks of one result, whatever the preset says: a
// huge result gets larger chunks rather than thousands of summarizer
// activities, past Temporal's history and payload limits.
const MaxChunks = 200

// chunkChars is the chunk size for a result of n characters: the preset's,
// raised so that the result makes at most MaxChunks chunks.
func chunkChars(n, preset int) int {
	return max(preset, (n+MaxChunks-1)/MaxChunks)
}

// Merge joins chunk summaries in order.
func (a *Activities) Merge(ctx context.Context, in MergeInput) (res MergeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "merge")
	defer rec.end(&err, &res.Recorded)

	parts := make([]string, 0, len(in.Keys))
	for _, k := range in.Keys {
		t, err := a.text(ctx, in.Run.Tenant, k)
		if err != nil {
			return res, err
		}
		parts = append(parts, strings.TrimSpace(t))
	}
	merged := strings.Join(parts, "\n\n")
	key, err := a.putText(ctx, in.Run, "summary", merged)
	if err != nil {
		return res, err
	}
	rec.outputSize = int64(len(merged))
	return MergeResult{Key: key, Chars: utf8.RuneCountInString(merged)}, nil
}

// ApplyResults puts rewritten tool results into the working conversation.
func (a *Activities) ApplyResults(ctx context.Context, in ApplyResultsInput) (res WorkResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "apply")
	defer rec.end(&err, &res.Recorded)

	conv, inSize, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	_, b, err := a.budget(in.Run)
	if err != nil {
		return res, err
	}
	// Each rewritten result ends with the id of the original result:
	// positions are those of the conversation as loaded, which the
	// replacements keep.
	m, named, err := a.recoverMap(ctx, in.Run, "", conv)
	if err != nil {
		return res, err
	}
	for _, r := range in.Replacements {
		text, err := a.text(ctx, in.Run.Tenant, r.TextKey)
		if err != nil {
			return res, err
		}
		if r.Msg < 0 || r.Msg >= len(conv.Messages) || r.Block < 0 || r.Block >= len(conv.Messages[r.Msg].Blocks) {
			return res, badInput(fmt.Errorf("replacement for message %d block %d: out of range", r.Msg, r.Block))
		}
		if named {
			if id, ok := m.Block(r.Msg, r.Block); ok {
				text = strings.TrimRight(text, "\n") + "\n\n" + recoverid.ResultLine(id.String())
			}
		}
		before := utf8.RuneCountInString(conv.Messages[r.Msg].Blocks[r.Block].Text)
		if conv, err = strategy.ReplaceToolResult(conv, r.Msg, r.Block, text); err != nil {
			return res, badInput(fmt.Errorf("replace result: %w", err))
		}
		after := utf8.RuneCountInString(text)
		logger(ctx).Info(fmt.Sprintf("Compressed %d → %d chars (%.1f%%)", before, after, 100*float64(after)/float64(max(before, 1))), "run", in.Run.ID, "msg", r.Msg)
	}
	key, err := a.save(ctx, in.Run, conv)
	if err != nil {
		return res, err
	}
	size := b.Measure(conv)
	rec.inputSize, rec.outputSize = inSize, int64(size)
	return WorkResult{WorkKey: key, Tokens: size, Usage: b.Usage(size)}, nil
}

// PlanGlobal lists the ReAct two-layer design's layer 2 targets once usage passes its
// trigger.
func (a *Activities) PlanGlobal(ctx context.Context, in GlobalInput) (res GlobalResult, err error) {
	rec := a.begin(ctx, in.Run, "plan-global", "plan-global")
	defer rec.end(&err, &res.Recorded)

	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, b, err := a.budget(in.Run)
	if err != nil {
		return res, err
	}
	exclude := make(map[[2]int]bool, len(in.Exclude))
	for _, e := range in.Exclude {
		exclude[[2]int{e.Msg, e.Block}] = true
	}
	targets, usage := plan.GlobalTargets(conv, p, b, exclude)
	res.Usage = usage
	for _, r := range targets {
		t, err := a.target(ctx, in.Run, conv, r)
		if err != nil {
			return res, err
		}
		res.Targets = append(res.Targets, t)
	}
	if len(targets) > 0 {
		logger(ctx).Warn("context exceeds threshold, triggering global compression", "run", in.Run.ID, "usage", usage, "results", len(targets))
	}
	rec.outputSize = int64(len(targets))
	return res, nil
}
