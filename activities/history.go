package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
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
	recorded, err := a.recordedBlocks(ctx, in.Run)
	if err != nil {
		return res, err
	}
	res.LogRecorded, res.LogRead = recorded, true
	conv, view := plan.SeparateLog(conv, newDigestSet(append(slices.Clone(recorded), in.Pending...)).has, b.Counter)
	force := plan.NotForced
	switch {
	case in.Ladder:
		force = plan.ForcedByLadder
	case in.Run.Trigger == "manual":
		force = plan.ForcedManual
	}
	d := plan.History(conv, p, b, in.TokensFreed, force, view)
	if !d.Run {
		return HistoryPlan{Skip: true, Reason: d.Reason, LogRecorded: recorded, LogRead: true}, nil
	}
	res.Log, res.TargetTokens, res.LogTokens = view.Digests, d.TargetTokens, view.Tokens
	if d.Reflect {
		if res.ReflectKey, err = a.putText(ctx, in.Run, "reflection", plan.FitReflection(conv, view, plan.ReflectionTarget(p, b), b.Counter)); err != nil {
			return res, err
		}
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
	// looks like one (another tenant's id, an archive's) stays text.
	keyOf := offloadKeyOf(run.Tenant)
	var named []string
	for _, id := range strategy.References(conv, func(i int) bool { return !keep[i] }) {
		if k := keyOf(id); k != "" {
			named = append(named, k)
		}
	}
	live, err := a.Store.LiveOffloads(ctx, run.Tenant, run.Session, named)
	if err != nil {
		return conv, nil, 0, storeErr(fmt.Errorf("look up offloads: %w", err))
	}
	restored, st, err := strategy.Restore(conv, func(id string) (string, error) {
		key := keyOf(id)
		if key == "" || !live[key] {
			return "", strategy.ErrNotReference
		}
		return a.text(ctx, run.Tenant, key)
	}, keep)
	if err != nil {
		return conv, nil, 0, badInput(fmt.Errorf("restore offloads: %w", err))
	}
	// An object a kept message still refers to is not released.
	stillUsed := map[string]bool{}
	for _, id := range strategy.References(conv, func(i int) bool { return keep[i] }) {
		stillUsed[id] = true
	}
	var release []string
	for _, id := range st.Restored {
		if !stillUsed[id] {
			release = append(release, keyOf(id))
		}
	}
	return restored, release, len(st.Unavailable), nil
}

// offloadKeyOf maps the id a reference names to the tenant's offload key
// ("" for text that is no offload id); the store still decides whether it
// is an offload of the session.
func offloadKeyOf(tenant string) func(id string) string {
	return func(id string) string {
		if blob.ValidateSHA256(id) != nil {
			return ""
		}
		return blob.ContentKey(tenant, blob.KindOffload, id)
	}
}

// ApplyHistory replaces the summarized messages with the summary message
// in the preset's style, keeping protected messages verbatim. With a
// session log the summary is appended as the log's next block after the
// earlier ones, which stay byte-identical; a reflection, when given,
// first replaces those blocks by one.
func (a *Activities) ApplyHistory(ctx context.Context, in ApplyHistoryInput) (res WorkResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "apply-history")
	defer rec.end(&err, &res.Recorded)

	conv, p, b, err := a.historyWork(ctx, in.Run, in.WorkKey, in.Ladder)
	if err != nil {
		return res, err
	}
	known := newDigestSet(in.Log)
	before := b.Measure(conv)
	conv, view := plan.SeparateLog(conv, known.has, b.Counter)
	style := strategy.SummaryStyle(p.History.Style)
	split := in.Split
	if in.ReflectionKey != "" && len(view.Messages) > 0 {
		block, removed, err := a.reflect(ctx, in, style, b, &conv, view)
		if err != nil {
			return res, err
		}
		split -= removed
		res.Log = append(res.Log, block)
		known[block.SHA256] = true
		conv, view = plan.SeparateLog(conv, known.has, b.Counter)
	}
	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	if style == strategy.StyleSessionSummary {
		summary = sessionSummary(in.Run, summary, in.ArchiveKey)
	}
	protected := strategy.Protected(conv, plan.Frozen(p, view))
	if strings.TrimSpace(summary) != "" {
		// The summary ends naming the messages of the original it
		// replaces and the id that gives them back.
		m, ok, err := a.recoverMap(ctx, in.Run, in.ArchiveKey, conv)
		if err != nil {
			return res, err
		}
		if ok {
			if id, ok := m.Range(strategy.SummarizedMessages(conv, split, protected)); ok {
				summary = strings.TrimRight(summary, "\n") + "\n\n" + recoverid.SummaryLine(id)
			}
		}
	}
	label := plan.NextBlockLabel(conv, view)
	if p.History.Log.Enabled && strings.TrimSpace(summary) != "" {
		summary = blockText(style, label, summary)
	}
	out, st, err := strategy.Compact(conv, split, summary, style, protected)
	if err != nil {
		return res, badInput(fmt.Errorf("compact history: %w", err))
	}
	if st.Summarized > 0 {
		// Every summary is recorded as a block, with or without a log:
		// a later run then reads it as a summary, never as the words of
		// the user whose message it was rendered into.
		msg, _ := strategy.SummaryMessage(summary, style)
		text := msg.Blocks[0].Text
		res.Log = append(res.Log, store.LogBlock{SHA256: plan.BlockDigest(text), Label: label, Tokens: b.Counter.Count(text)})
	}
	key, err := a.save(ctx, in.Run, out)
	if err != nil {
		return res, err
	}
	after := b.Measure(out)
	logger(ctx).Info(fmt.Sprintf("Summarized %d messages → 1 summary (saved ~%d tokens)", st.Summarized, before-after), "run", in.Run.ID)
	rec.inputSize, rec.outputSize = int64(before), int64(after)
	res.WorkKey, res.Tokens, res.Usage = key, after, b.Usage(after)
	return res, nil
}

// sessionSummary frames a summary as the three-tier design's session summary and makes
// sure its recovery references name the archive and the offloads, whatever
// the summarizer wrote: they are how an operator gets the original back.
func sessionSummary(run contract.Run, summary, archiveKey string) string {
	if !strings.HasPrefix(summary, strategy.SessionSummaryHeading) {
		summary = fmt.Sprintf("%s [%s]\n\n%s", strategy.SessionSummaryHeading, run.Session, summary)
	}
	if archiveKey == "" {
		return summary
	}
	// The three-tier tier-3 references: the whole conversation and the
	// offloads, by the ids the agent recovers them with.
	ref := archiveRef(archiveID(archiveKey))
	var add []string
	if !strings.Contains(summary, ref) {
		add = append(add, "- Full conversation: "+ref)
	}
	if !strings.Contains(summary, offloadsRef) {
		add = append(add, "- Offloaded content: "+offloadsRef)
	}
	if !strings.Contains(summary, checkpointsRef) {
		add = append(add, "- Checkpoints: "+checkpointsRef)
	}
	if len(add) == 0 {
		return summary
	}
	summary = strings.TrimRight(summary, "\n")
	if !strings.Contains(summary, "### Recovery References") {
		summary += "\n\n### Recovery References"
	}
	return summary + "\n" + strings.Join(add, "\n") + "\n"
}

// offloadsRef tells the agent how to read its offloaded results back.
const offloadsRef = "each offload reference names its id; read it with the " + strategy.RecoverTool +
	" tool (search_context finds text in them)"

// checkpointsRef is the three-tier design's third recovery reference
// ("Checkpoints: cache/checkpoints/"): here every compaction is a
// checkpoint, its original archived, and each summary-log block ends
// with the id that reads back the messages it summarized.
const checkpointsRef = "every earlier compaction's original is archived; each summary block ends with the " +
	strategy.RecoverTool + " id of the messages it summarized"

// archiveID is the id of an archived original: its SHA-256, which the
// RecoverTool reads the whole conversation back with ("" for a key that
// is no archive).
func archiveID(key string) string {
	_, kind, sha, err := blob.ParseContentKey(key)
	if err != nil || kind != blob.KindArchive {
		return ""
	}
	return sha
}

// archiveRef is how a summary names the archived original for the agent:
// the tool and the id, never the storage key.
func archiveRef(id string) string {
	if id == "" {
		return ""
	}
	return strategy.RecoverTool + " id " + id
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
