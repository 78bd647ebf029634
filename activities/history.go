package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
)

// PrepareHistory decides history compaction and writes the transcript of
// the messages to summarize, with offloaded results restored (offload-compact;
// unreadable ones read "[Content unavailable: KEY]").
func (a *Activities) PrepareHistory(ctx context.Context, in HistoryInput) (res HistoryPlan, err error) {
	step := in.Step
	if step == "" {
		step = "history/prepare"
	}
	rec := a.begin(ctx, in.Run, step, "prepare-history")
	defer rec.end(&err, &res.Recorded)

	conv, p, b, err := a.historyWork(ctx, in.Run, in.WorkKey, in.Ladder)
	if err != nil {
		return res, err
	}
	d := plan.History(conv, p, b, in.TokensFreed, in.Ladder || in.Run.Trigger == "manual")
	if !d.Run {
		return HistoryPlan{Skip: true, Reason: d.Reason}, nil
	}
	summarized := conv
	if p.History.RestoreOffloads {
		if summarized, res.Restored, res.Unavailable, err = a.restoreOffloads(ctx, in.Run, conv, d); err != nil {
			return res, err
		}
	}
	transcript := plan.Transcript(summarized, d.Split, d.Protected)
	key, err := a.putText(ctx, in.Run, "transcript", transcript)
	if err != nil {
		return res, err
	}
	if p.Drift.Enabled {
		a.prefetchIdentifiers(key, transcript)
	}
	res.Split, res.Summarized, res.TranscriptKey, res.Tokens = d.Split, d.Summarized, key, b.Measure(conv)
	res.Kept, res.Note = len(conv.Messages)-d.Split, d.Note
	rec.outputSize = int64(len(transcript))
	return res, nil
}

// restoreOffloads is the summarized range of conv with its offloaded
// results restored (offload-compact), the offloads no kept message refers to
// any longer (for commit to release) and how many were unavailable.
func (a *Activities) restoreOffloads(ctx context.Context, run contract.Run, conv conversation.Conversation, d plan.HistoryDecision) (conversation.Conversation, []string, int, error) {
	// Only the summarized range is restored: kept messages keep their
	// references (offload-compact).
	keep := make([]bool, len(conv.Messages))
	for i := range keep {
		keep[i] = d.Protected[i] || i >= d.Split
	}
	// A reference is a pointer only when the store recorded it as a
	// live offload of this tenant and session; any other text that
	// looks like one (another tenant's key, an archive) stays text.
	named := compress.References(conv, func(i int) bool { return !keep[i] })
	live, err := a.Store.LiveOffloads(ctx, run.Tenant, run.Session, named)
	if err != nil {
		return conv, nil, 0, storeErr(fmt.Errorf("look up offloads: %w", err))
	}
	restored, st, err := compress.Restore(conv, func(key string) (string, error) {
		if !live[key] {
			return "", compress.ErrNotReference
		}
		return a.text(ctx, run.Tenant, key)
	}, keep)
	if err != nil {
		return conv, nil, 0, badInput(fmt.Errorf("restore offloads: %w", err))
	}
	// An object a kept message still refers to is not released.
	stillUsed := map[string]bool{}
	for _, k := range compress.References(conv, func(i int) bool { return keep[i] }) {
		stillUsed[k] = true
	}
	var release []string
	for _, k := range st.Restored {
		if !stillUsed[k] {
			release = append(release, k)
		}
	}
	return restored, release, len(st.Unavailable), nil
}

// ApplyHistory replaces the summarized messages with the summary message
// in the preset's style, keeping protected messages verbatim.
func (a *Activities) ApplyHistory(ctx context.Context, in ApplyHistoryInput) (res WorkResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "apply-history")
	defer rec.end(&err, &res.Recorded)

	conv, p, b, err := a.historyWork(ctx, in.Run, in.WorkKey, in.Ladder)
	if err != nil {
		return res, err
	}
	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	style := compress.SummaryStyle(p.History.Style)
	if style == compress.StyleSessionSummary {
		summary = sessionSummary(in.Run, summary, in.ArchiveKey)
	}
	before := b.Measure(conv)
	protected := compress.Protected(conv, plan.HistoryProtection(p))
	if strings.TrimSpace(summary) != "" {
		// The summary ends naming the messages of the original it
		// replaces and the id that gives them back.
		m, ok, err := a.recoverMap(ctx, in.Run, in.ArchiveKey, conv)
		if err != nil {
			return res, err
		}
		if ok {
			if id, ok := m.Range(compress.SummarizedMessages(conv, in.Split, protected)); ok {
				summary = strings.TrimRight(summary, "\n") + "\n\n" + recoverid.SummaryLine(id)
			}
		}
	}
	out, st, err := compress.Compact(conv, in.Split, summary, style, protected)
	if err != nil {
		return res, badInput(fmt.Errorf("compact history: %w", err))
	}
	key, err := a.save(ctx, in.Run, out)
	if err != nil {
		return res, err
	}
	after := b.Measure(out)
	logger(ctx).Info(fmt.Sprintf("Summarized %d messages → 1 summary (saved ~%d tokens)", st.Summarized, before-after), "run", in.Run.ID)
	rec.inputSize, rec.outputSize = int64(before), int64(after)
	return WorkResult{WorkKey: key, Tokens: after, Usage: b.Usage(after)}, nil
}

// sessionSummary frames a summary as the three-tier design's session summary and makes
// sure its recovery references name the archive and the offloads, whatever
// the summarizer wrote: they are how an operator gets the original back.
func sessionSummary(run contract.Run, summary, archiveKey string) string {
	if !strings.HasPrefix(summary, compress.SessionSummaryHeading) {
		summary = fmt.Sprintf("%s [%s]\n\n%s", compress.SessionSummaryHeading, run.Session, summary)
	}
	if archiveKey != "" && !strings.Contains(summary, archiveKey) {
		prefix, _ := blob.TenantPrefix(run.Tenant)
		summary = strings.TrimRight(summary, "\n") + fmt.Sprintf(
			"\n\n### Recovery References\n- Full conversation: %s\n- Offloaded content: %s%s/\n", archiveKey, prefix, blob.KindOffload)
	}
	return summary
}

// historyWork is the history steps' prologue: the working conversation at
// key, and the preset and budget the summary runs with (the ladder's when
// ladder is set).
func (a *Activities) historyWork(ctx context.Context, run contract.Run, key string, ladder bool) (conversation.Conversation, policy.Preset, plan.Budget, error) {
	conv, _, err := a.load(ctx, run.Tenant, key)
	if err != nil {
		return conversation.Conversation{}, policy.Preset{}, plan.Budget{}, err
	}
	p, b, err := a.historyBudget(run, ladder)
	if err != nil {
		return conversation.Conversation{}, policy.Preset{}, plan.Budget{}, err
	}
	return conv, p, b, nil
}
