package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/singleflight"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/digest"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Plan reads and validates the input, measures it and, when the input asks
// for it, archives it (one read of the input for both), then marks the run
// running with its figures and archive in one statement. A conversation
// that does not parse fails the run at once, with the parser's error
// naming the message and field.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (res PlanResult, err error) {
	rec := a.begin(ctx, in.Run, "plan", "plan")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	data, err := a.getVerified(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256)
	if err != nil {
		return res, fmt.Errorf("read input: %w", err)
	}
	rec.inputSize = int64(len(data))
	conv, err := conversation.ParseAny(data)
	if err != nil {
		return res, badInput(fmt.Errorf("input conversation: %w", err))
	}
	a.convs.add(in.InputKey, conv, int64(len(data)))
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	size := b.Measure(conv)
	usage := b.Usage(size)
	res = PlanResult{
		Format: string(conv.Format), Messages: len(conv.Messages), Encoding: b.Counter.Name(),
		ContextLimit: b.Limit, TokensBefore: size, CharsBefore: runeCount(data),
		UsageBefore: usage, LevelBefore: string(compress.LevelFor(usage)), Preset: p,
	}
	switch {
	case p.Debug:
		res.Skip, res.Reason = true, "debug verbosity: compression disabled"
	case len(conv.Messages) == 0:
		res.Skip, res.Reason = true, "empty conversation"
	}
	start := store.RunStart{RunPlan: store.RunPlan{
		Preset: p.Name, Model: a.modelFor(p.SummarizerModel), Level: res.LevelBefore, InputKey: in.InputKey,
		TokensBefore: int64(size), CharsBefore: int64(res.CharsBefore),
	}}
	// The original is archived here, one read of the input for both.
	archive, err := a.archiveInput(ctx, run.Tenant, in.InputKey, in.InputSHA256, data)
	if err != nil {
		return res, err
	}
	res.Archive = &archive
	start.ArchiveKey, start.ArchiveSHA256 = archive.Key, archive.SHA256
	rec.outputSize = archive.Size
	if err := a.Store.StartRun(ctx, storeRun(run, in.InputKey), start); err != nil {
		return res, storeErr(fmt.Errorf("start run: %w", err))
	}
	return res, nil
}

// storeRun is the row of a run the gateway did not record (submitted
// before it did): the identity and trigger, so StartRun can create it.
func storeRun(run contract.Run, inputKey string) store.Run {
	return store.Run{ID: run.ID, Tenant: run.Tenant, Session: run.Session, EventID: run.EventID,
		Trigger: run.Trigger, Preset: run.Preset, InputKey: inputKey, ReplayOf: run.ReplayOf}
}

// archive copies the original to its content-addressed archive key and
// proves that S3 holds it intact, past the in-process cache: by the S3
// server's own SHA-256 check of the upload, or by reading it back (see
// blob.Store.PutContentVerified).
func (a *Activities) archive(ctx context.Context, tenant string, data []byte) (ArchiveResult, error) {
	ref, err := a.Blob.PutContentVerified(ctx, tenant, blob.KindArchive, data)
	if err != nil {
		return ArchiveResult{}, blobErr(fmt.Errorf("write and verify archive: %w", err))
	}
	return ArchiveResult{Key: ref.Key, SHA256: ref.SHA256, Size: ref.Size}, nil
}

// archiveInput is the run's archive. An input the gateway stored as an
// archive (gateway.Gateway.Submit does, since the input and its archive
// are the same bytes) is the archive itself: S3 checked its SHA-256 when
// it was written, and data, just read and checked against sha, is its
// content. Any other input (a run submitted before the gateway did so) is
// copied with archive.
func (a *Activities) archiveInput(ctx context.Context, tenant, key, sha string, data []byte) (ArchiveResult, error) {
	if _, kind, keySHA, err := blob.ParseContentKey(key); err == nil && kind == blob.KindArchive && keySHA == sha {
		return ArchiveResult{Key: key, SHA256: sha, Size: int64(len(data))}, nil
	}
	return a.archive(ctx, tenant, data)
}

// modelFor is the summarizer model a run will use, as recorded on it.
func (a *Activities) modelFor(presetModel string) string {
	if _, offline := a.Summarizer.(llm.Extractive); offline {
		return "extractive"
	}
	if presetModel != "" {
		return presetModel
	}
	return a.SummarizerModel
}

// Archive copies the original to its archive key and proves it stored
// intact (see archive), before any step replaces anything.
func (a *Activities) Archive(ctx context.Context, in ArchiveInput) (res ArchiveResult, err error) {
	rec := a.begin(ctx, in.Run, "archive", "archive")
	defer rec.end(&err, &res.Recorded)

	data, err := a.getVerified(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256)
	if err != nil {
		return res, fmt.Errorf("read input: %w", err)
	}
	res, err = a.archiveInput(ctx, in.Run.Tenant, in.InputKey, in.InputSHA256, data)
	if err != nil {
		return res, err
	}
	if err := a.Store.RecordArchive(ctx, in.Run.ID, res.Key, res.SHA256); err != nil {
		return res, storeErr(fmt.Errorf("record archive: %w", err))
	}
	rec.inputSize, rec.outputSize = res.Size, res.Size
	return res, nil
}

// Deterministic runs every pass that needs no LLM (plan.Deterministic),
// stores the offloaded results before the conversation that refers to
// them, and lists the results that need map-reduce.
func (a *Activities) Deterministic(ctx context.Context, in DeterministicInput) (res DeterministicResult, err error) {
	rec := a.begin(ctx, in.Run, "deterministic", "deterministic")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	conv, inSize, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	rec.inputSize = inSize
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	watermark, err := a.Store.GetWatermark(ctx, run.Tenant, run.Session)
	if err != nil {
		return res, storeErr(fmt.Errorf("read watermark: %w", err))
	}
	din := plan.Input{
		Conv: conv, Preset: p, Budget: b, Watermark: watermark, OffloadKey: offloadKey(run.Tenant),
		Checkpoint: run.Trigger == "checkpoint",
	}
	if !p.Debug && (p.PostProcess.Enabled || p.Truncate.Enabled) {
		// Reduced results and truncated inputs name the id of their
		// original. The work is the run's input: an input stored as an
		// archive is the archive itself.
		archiveKey := ""
		if _, kind, _, err := blob.ParseContentKey(in.WorkKey); err == nil && kind == blob.KindArchive {
			archiveKey = in.WorkKey
		}
		orig, sha, ok, err := a.original(ctx, run, archiveKey)
		if err != nil {
			return res, err
		}
		if ok {
			din.Original, din.Archive = &orig, sha
		}
	}
	out, err := plan.Deterministic(din)
	if err != nil {
		return res, badInput(err)
	}
	if err := a.storeOffloads(ctx, run, out.Offloads); err != nil {
		return res, err
	}
	// Passes that changed nothing hand on the key they read (the input's,
	// as a rule): one S3 write fewer. The passes never change their input,
	// so equal values mean the same conversation.
	key := in.WorkKey
	if !reflect.DeepEqual(conv, out.Conv) {
		if key, err = a.save(ctx, run.Tenant, out.Conv); err != nil {
			return res, err
		}
	}
	res = DeterministicResult{WorkKey: key, Tokens: out.SizeAfter, Usage: b.Usage(out.SizeAfter),
		Watermark: out.Watermark, Done: out.Done}
	for _, ps := range out.Passes {
		res.Passes = append(res.Passes, PassStat(ps))
		logger(ctx).Info("pass", "run", run.ID, "pass", ps.Name, "applied", ps.Applied, "count", ps.Count, "saved", ps.TokensSaved)
	}
	for _, r := range out.LargeResults {
		t, err := a.target(ctx, run.Tenant, out.Conv, r)
		if err != nil {
			return res, err
		}
		res.LargeResults = append(res.LargeResults, t)
	}
	rec.outputSize = int64(out.SizeAfter)
	return res, nil
}

// storeOffloads stores offloaded results in S3 and records them in
// Postgres, before the conversation that refers to them is saved.
func (a *Activities) storeOffloads(ctx context.Context, run contract.Run, offloads []plan.Offload) error {
	for _, o := range offloads {
		// The row first, then the object: a release of the same object by
		// another session either sees this row, or has deleted the object
		// before it is written again here (see store.ReleaseOffloads).
		sha := blob.SHA256HexString(o.Text)
		if err := a.Store.AddOffload(ctx, store.Offload{Tenant: run.Tenant, Session: run.Session, RunID: run.ID,
			Key: o.Key, ToolID: o.ToolID, ToolName: o.ToolName, Tokens: o.Tokens, SHA256: sha}); err != nil {
			return storeErr(fmt.Errorf("record offload %s: %w", o.ToolID, err))
		}
		ref, err := a.Blob.PutContentString(ctx, run.Tenant, blob.KindOffload, o.Text)
		if err != nil {
			return blobErr(fmt.Errorf("offload %s: %w", o.ToolID, err))
		}
		if ref.Key != o.Key {
			return fmt.Errorf("offload %s: stored under %s, planned %s", o.ToolID, ref.Key, o.Key)
		}
		a.Metrics.Offload(len(o.Text))
	}
	return nil
}

// offloadKey is the content-addressed key of an offloaded text.
func offloadKey(tenant string) func(text string) string {
	return func(text string) string {
		return blob.ContentKey(tenant, blob.KindOffload, blob.SHA256HexString(text))
	}
}

// FitBudget runs one deterministic step of the budget ladder that closes
// every run (see plan.LadderOffload and plan.LadderTruncate): it changes
// the working conversation only while it is over the ladder's goal.
func (a *Activities) FitBudget(ctx context.Context, in FitInput) (res FitResult, err error) {
	rec := a.begin(ctx, in.Run, "budget/"+in.Stage, "budget")
	defer rec.end(&err, &res.Recorded)

	run := in.Run
	conv, inSize, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	rec.inputSize = inSize
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	if floor := plan.Floor(conv, p, b); b.Over(floor) {
		// Nothing the ladder may cut would bring it under: leave the
		// conversation as it is rather than cut it for nothing.
		res = FitResult{WorkKey: in.WorkKey, Tokens: b.Measure(conv), AboveGoal: true, Hopeless: true,
			Pass: PassStat{Name: "budget/" + in.Stage, Note: fmt.Sprintf("skipped: what no step may cut is %d of limit %d", floor, b.Limit)}}
		rec.outputSize = int64(res.Tokens)
		return res, nil
	}
	var out conversation.Conversation
	var pass plan.Pass
	switch in.Stage {
	case FitOffload:
		var offloads []plan.Offload
		out, pass, offloads, err = plan.FitOffload(conv, p, b, offloadKey(run.Tenant))
		if err != nil {
			return res, err
		}
		if err := a.storeOffloads(ctx, run, offloads); err != nil {
			return res, err
		}
	case FitTruncate:
		// Each note names the id of the whole result in the original.
		var ids func(msg, block int) string
		m, ok, merr := a.recoverMap(ctx, run, in.ArchiveKey, conv)
		if merr != nil {
			return res, merr
		}
		if ok {
			ids = blockIDs(m)
		}
		out, pass, err = plan.FitTruncateWith(conv, p, b, in.ArchiveKey, ids)
		if err != nil {
			return res, err
		}
	case FitRelieve, FitOffloadSmall:
		fit := plan.FitRelieve
		if in.Stage == FitOffloadSmall {
			fit = plan.FitOffloadSmall
		}
		var offloads []plan.Offload
		out, pass, offloads, err = fit(conv, p, b, offloadKey(run.Tenant))
		if err != nil {
			return res, err
		}
		if err := a.storeOffloads(ctx, run, offloads); err != nil {
			return res, err
		}
	default:
		return res, config(fmt.Errorf("unknown budget stage %q", in.Stage))
	}
	res.WorkKey = in.WorkKey
	if pass.Applied {
		if res.WorkKey, err = a.save(ctx, run.Tenant, out); err != nil {
			return res, err
		}
	}
	size := b.Measure(out)
	res.Tokens, res.Pass = size, PassStat(pass)
	res.AboveGoal = size > plan.LadderGoal(p, b)
	// A ReAct trajectory never drops a turn, so the ladder's history step
	// does not apply to it.
	res.HistoryAllowed = out.Format != conversation.FormatReAct
	logger(ctx).Info("budget ladder", "run", run.ID, "stage", in.Stage, "applied", pass.Applied, "count", pass.Count, "size", size, "limit", b.Limit)
	rec.outputSize = int64(size)
	return res, nil
}

// target stores one tool result's text and context for an LLM pass.
func (a *Activities) target(ctx context.Context, tenant string, conv conversation.Conversation, r compress.ResultLoc) (Target, error) {
	textKey, err := a.putText(ctx, tenant, "text", conv.Messages[r.Msg].Blocks[r.Block].Text)
	if err != nil {
		return Target{}, err
	}
	t := Target{Msg: r.Msg, Block: r.Block, Chars: r.Chars, TextKey: textKey}
	if r.Context != "" {
		if t.ContextKey, err = a.putText(ctx, tenant, "text", r.Context); err != nil {
			return Target{}, err
		}
	}
	return t, nil
}

// Chunk splits a large result into bounded chunks (seed 000: 50K chars),
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
	chunks, err := digest.Chunk(text, chunkChars(utf8.RuneCountInString(text), p.LargeResult.ChunkChars))
	if err != nil {
		return res, config(fmt.Errorf("chunk: %w", err))
	}
	if p.Drift.Enabled {
		// The merged summary is drift-checked against the whole result.
		a.prefetchIdentifiers(in.TextKey, text)
	}
	for _, c := range chunks {
		key, err := a.putText(ctx, in.Run.Tenant, blob.KindChunk, c)
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

// Fallback makes a summary without an LLM: the extractive summarizer, or
// seed 000's first N characters.
func (a *Activities) Fallback(ctx context.Context, in FallbackInput) (res SummarizeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "fallback")
	defer rec.end(&err, &res.Recorded)
	rec.model = in.Mode

	text, err := a.text(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	var out string
	switch in.Mode {
	case "truncate":
		p, err := a.preset(in.Run)
		if err != nil {
			return res, err
		}
		out = digest.Truncate(text, p.LargeResult.TruncateChars)
	case "extractive":
		out, err = structuredFallback(ctx, in, text)
		if err != nil {
			return res, err
		}
	default:
		return res, config(fmt.Errorf("unknown fallback mode %q", in.Mode))
	}
	key, err := a.putText(ctx, in.Run.Tenant, "summary", out)
	if err != nil {
		return res, err
	}
	rec.inputSize, rec.outputSize = int64(len(text)), int64(len(out))
	return SummarizeResult{Key: key, Chars: utf8.RuneCountInString(out), Model: in.Mode, Fallback: in.Mode}, nil
}

// StructuredPrompt reports a prompt whose summary has fixed sections
// (history, session, brief): its fallback fills the same sections.
func StructuredPrompt(prompt string) bool {
	switch prompt {
	case llm.PromptHistory, llm.PromptSession, llm.PromptBrief:
		return true
	}
	return false
}

// structuredFallback is the extractive summary of text: in the sections
// of a structured prompt (history, session, brief) when the input names
// one, the selected lines of digest.Extractive otherwise (a tool result).
func structuredFallback(ctx context.Context, in FallbackInput, text string) (string, error) {
	if !StructuredPrompt(in.Prompt) {
		return digest.Extractive(text, max(in.TargetChars, 200)), nil
	}
	if strings.TrimSpace(text) == "" {
		return digest.Extractive(text, max(in.TargetChars, 200)), nil
	}
	resp, err := llm.Extractive{}.Summarize(ctx, llm.Request{Prompt: in.Prompt, Text: text,
		TargetChars: max(in.TargetChars, 200), ArchiveRef: in.ArchiveKey})
	if err != nil {
		return "", badInput(fmt.Errorf("extractive %s summary: %w", in.Prompt, err))
	}
	return resp.Text, nil
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
	key, err := a.putText(ctx, in.Run.Tenant, "summary", merged)
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
		if conv, err = compress.ReplaceToolResult(conv, r.Msg, r.Block, text); err != nil {
			return res, badInput(fmt.Errorf("replace result: %w", err))
		}
		after := utf8.RuneCountInString(text)
		logger(ctx).Info(fmt.Sprintf("Compressed %d → %d chars (%.1f%%)", before, after, 100*float64(after)/float64(max(before, 1))), "run", in.Run.ID, "msg", r.Msg)
	}
	key, err := a.save(ctx, in.Run.Tenant, conv)
	if err != nil {
		return res, err
	}
	size := b.Measure(conv)
	rec.inputSize, rec.outputSize = inSize, int64(size)
	return WorkResult{WorkKey: key, Tokens: size, Usage: b.Usage(size)}, nil
}

// PlanGlobal lists seed 000's layer 2 targets once usage passes its
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
		t, err := a.target(ctx, in.Run.Tenant, conv, r)
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

// PrepareHistory decides history compaction and writes the transcript of
// the messages to summarize, with offloaded results restored (seed 002;
// unreadable ones read "[Content unavailable: KEY]").
func (a *Activities) PrepareHistory(ctx context.Context, in HistoryInput) (res HistoryPlan, err error) {
	step := in.Step
	if step == "" {
		step = "history/prepare"
	}
	rec := a.begin(ctx, in.Run, step, "prepare-history")
	defer rec.end(&err, &res.Recorded)

	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, b, err := a.historyBudget(in.Run, in.Ladder)
	if err != nil {
		return res, err
	}
	d := plan.History(conv, p, b, in.TokensFreed, in.Ladder || in.Run.Trigger == "manual")
	if !d.Run {
		return HistoryPlan{Skip: true, Reason: d.Reason}, nil
	}
	summarized := conv
	if p.History.RestoreOffloads {
		// Only the summarized range is restored: kept messages keep their
		// references (seed 002).
		keep := make([]bool, len(conv.Messages))
		for i := range keep {
			keep[i] = d.Protected[i] || i >= d.Split
		}
		// A reference is a pointer only when the store recorded it as a
		// live offload of this tenant and session; any other text that
		// looks like one (another tenant's key, an archive) stays text.
		named := compress.References(conv, func(i int) bool { return !keep[i] })
		live, err := a.Store.LiveOffloads(ctx, in.Run.Tenant, in.Run.Session, named)
		if err != nil {
			return res, storeErr(fmt.Errorf("look up offloads: %w", err))
		}
		restored, st, err := compress.Restore(conv, func(key string) (string, error) {
			if !live[key] {
				return "", compress.ErrNotReference
			}
			return a.text(ctx, in.Run.Tenant, key)
		}, keep)
		if err != nil {
			return res, badInput(fmt.Errorf("restore offloads: %w", err))
		}
		// An object a kept message still refers to is not released.
		stillUsed := map[string]bool{}
		for _, k := range compress.References(conv, func(i int) bool { return keep[i] }) {
			stillUsed[k] = true
		}
		for _, k := range st.Restored {
			if !stillUsed[k] {
				res.Restored = append(res.Restored, k)
			}
		}
		summarized, res.Unavailable = restored, len(st.Unavailable)
	}
	transcript := plan.Transcript(summarized, d.Split, d.Protected)
	key, err := a.putText(ctx, in.Run.Tenant, "transcript", transcript)
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

// PrepareHandoff writes the transcript a CRITICAL handoff summarizes, so
// that the summarizer (with the drift check and its fallback) makes the
// handoff's summary as it makes a history summary.
func (a *Activities) PrepareHandoff(ctx context.Context, in HandoffInput) (res HandoffPrep, err error) {
	rec := a.begin(ctx, in.Run, "handoff/prepare", "prepare-handoff")
	defer rec.end(&err, &res.Recorded)

	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, err := a.preset(in.Run)
	if err != nil {
		return res, err
	}
	_, _, transcript, ok := plan.HandoffTranscript(conv, p)
	if !ok {
		return HandoffPrep{Skip: true}, nil
	}
	if res.TranscriptKey, err = a.putText(ctx, in.Run.Tenant, "transcript", transcript); err != nil {
		return res, err
	}
	if p.Drift.Enabled {
		a.prefetchIdentifiers(res.TranscriptKey, transcript)
	}
	rec.outputSize = int64(len(transcript))
	return res, nil
}

// CheckDrift measures a summary against its source: the share of the
// source's identifiers (paths, URLs, ids, numbers, commands, error codes)
// it keeps, over the most recent MaxIdentifiers of them. The missing items
// go to S3 and Postgres, never into workflow history.
func (a *Activities) CheckDrift(ctx context.Context, in DriftInput) (res DriftResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "drift")
	defer rec.end(&err, &res.Recorded)

	p, err := a.preset(in.Run)
	if err != nil {
		return res, err
	}
	ids, err := a.identifiers(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	score, missing := retention(ids, summary, p.Drift.MaxIdentifiers)
	idPassed := score >= p.Drift.MinRetention
	res = DriftResult{Score: score, Passed: idPassed}
	source, err := a.text(ctx, in.Run.Tenant, in.SourceKey)
	if err != nil {
		return res, err
	}
	var checks []digest.DriftCheck
	if isHistoryStep(in.Step) {
		// Seed 004's checks of a session summary: intent, trajectory,
		// premature completion, clarification. Each is stored; a failed
		// one fails the check, and what it misses goes to the repair
		// pass (DRIFT_DETECTED realignment) with the identifiers.
		checks = a.sessionChecks(ctx, in, source, summary)
		for _, c := range checks {
			res.Passed = res.Passed && c.Passed
			res.Score = min(res.Score, c.Score)
			missing = append(missing, c.Missing...)
		}
	}
	// Every summary, whoever judged the rest: nothing in it may be
	// invented. What it invented is stored in its verdict, not handed to
	// the repair pass or the patch as something to add.
	fab := digest.FabricationCheck(source, summary)
	checks = append(checks, fab)
	res.Passed = res.Passed && fab.Passed
	res.Score = min(res.Score, fab.Score)
	res.Fabricated = len(fab.Missing)
	res.MissingCount = len(missing)
	// Only a failed check hands its missing items on (to the repair pass
	// and the patch); a passed one keeps them in its verdict rows alone,
	// without an S3 write.
	if len(missing) > 0 && !res.Passed {
		data, _ := json.Marshal(missing)
		if res.MissingKey, err = a.putText(ctx, in.Run.Tenant, "drift", string(data)); err != nil {
			return res, err
		}
	}
	verdict := "passed"
	switch {
	case !idPassed:
		verdict = fmt.Sprintf("below %.2f: %d identifiers missing", p.Drift.MinRetention, len(missing))
	case fab.Passed && !res.Passed:
		verdict = fmt.Sprintf("identifiers kept (%.2f); a session check failed: %d items missing", score, len(missing))
	case !res.Passed:
		verdict = fmt.Sprintf("identifiers kept (%.2f); %d invented items (quotes, paths, ids not in the source)", score, len(fab.Missing))
	}
	verdicts := []store.Drift{{RunID: in.Run.ID, Step: in.Step, Pass: in.Pass, Score: score,
		Passed: res.Passed, Missing: missing, Verdict: verdict}}
	a.Metrics.Drift("identifiers", idPassed)
	for _, c := range checks {
		a.Metrics.Drift(c.Name, c.Passed)
		verdict := "passed: " + c.Note
		if !c.Passed {
			verdict = "DRIFT_DETECTED: " + c.Note
		}
		verdicts = append(verdicts, store.Drift{RunID: in.Run.ID, Step: in.Step + "/" + c.Name, Pass: in.Pass,
			Score: c.Score, Passed: c.Passed, Missing: c.Missing, Verdict: verdict})
	}
	// The identifier verdict and each session check in one round trip.
	if err := a.Store.RecordDrift(ctx, verdicts...); err != nil {
		return res, storeErr(fmt.Errorf("record drift: %w", err))
	}
	return res, nil
}

// sessionChecks are seed 004's checks of a history summary: the LLM
// judge's verdict when the workflow got one, else (or when it is not in
// the schema) the deterministic heuristics. The note says which decided.
func (a *Activities) sessionChecks(ctx context.Context, in DriftInput, source, summary string) []digest.DriftCheck {
	fallback := ""
	if in.JudgeKey != "" {
		text, err := a.text(ctx, in.Run.Tenant, in.JudgeKey)
		if err == nil {
			verdict, perr := llm.ParseJudgeVerdict(text)
			if perr == nil {
				checks := make([]digest.DriftCheck, 0, len(verdict))
				for _, v := range verdict {
					score := 0.0
					if v.Passed {
						score = 1
					}
					checks = append(checks, digest.DriftCheck{Name: v.Name, Passed: v.Passed, Score: score,
						Missing: v.Missing, Note: "LLM judge: " + llm.Scrub(v.Note)})
				}
				return checks
			}
			err = perr
		}
		fallback = "LLM judge unusable (" + llm.Scrub(err.Error()) + "); heuristics: "
	}
	checks := digest.SessionDriftChecks(source, summary)
	for i := range checks {
		checks[i].Note = fallback + checks[i].Note
	}
	return checks
}

// isHistoryStep reports whether a drift check is of a history summary
// (a session summary), not of one tool result.
func isHistoryStep(step string) bool {
	return strings.HasPrefix(step, "history/") || strings.HasPrefix(step, "budget/history/") || strings.HasPrefix(step, "handoff/")
}

// Retention scores a summary against the last maxIDs identifiers of its
// source and lists the missing ones, most recent last.
func Retention(source, summary string, maxIDs int) (float64, []string) {
	return retention(digest.Identifiers(source), summary, maxIDs)
}

func retention(ids []digest.Identifier, summary string, maxIDs int) (float64, []string) {
	if maxIDs > 0 && len(ids) > maxIDs {
		ids = ids[len(ids)-maxIDs:]
	}
	if len(ids) == 0 {
		return 1, nil
	}
	var missing []string
	for _, id := range digest.Missing(ids, summary) {
		missing = append(missing, id.Value)
	}
	return float64(len(ids)-len(missing)) / float64(len(ids)), missing
}

// idCache remembers the identifiers of recent drift-check sources by S3
// key. Keys are content-addressed, so an entry never goes stale, and the
// drift check of a repair pass (and of a replayed run) reads the same
// source as the check before it; extraction is the costly part of a check.
// Bounded by entries (golang-lru), not by runs: 64 sources are many more
// than the drift checks in flight in one worker, and each entry holds
// copies of the identifiers, never the source text (see keepIDs). Its zero
// value is ready to use.
type idCache struct {
	once   sync.Once
	recent *lru.Cache[string, []digest.Identifier]
	// flight lets a drift check wait for an extraction of the same source
	// already under way (a prefetch) instead of doing it twice.
	flight singleflight.Group
}

// idCacheSize bounds idCache by entries.
const idCacheSize = 64

func (c *idCache) cache() *lru.Cache[string, []digest.Identifier] {
	c.once.Do(func() {
		recent, err := lru.New[string, []digest.Identifier](idCacheSize)
		if err != nil {
			panic(err) // only for a size below 1
		}
		c.recent = recent
	})
	return c.recent
}

// get extracts the identifiers of the source at key once while the cache
// holds them; a caller that arrives during an extraction waits for its
// result.
func (c *idCache) get(key string, text func() (string, error)) ([]digest.Identifier, error) {
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if ids, ok := c.cache().Get(key); ok {
			return ids, nil
		}
		t, err := text()
		if err != nil {
			return nil, err
		}
		ids := keepIDs(digest.Identifiers(t))
		c.cache().Add(key, ids)
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]digest.Identifier), nil
}

// identifiers returns the identifiers of the text at key.
func (a *Activities) identifiers(ctx context.Context, tenant, key string) ([]digest.Identifier, error) {
	if key == "" {
		return nil, nil
	}
	return a.ids.get(key, func() (string, error) { return a.text(ctx, tenant, key) })
}

// keepIDs copies the identifiers' values out of their source: they are
// substrings of it, and a cached substring would keep the whole source
// (megabytes) alive.
func keepIDs(ids []digest.Identifier) []digest.Identifier {
	for i := range ids {
		ids[i].Value = strings.Clone(ids[i].Value)
	}
	return ids
}

// prefetchIdentifiers extracts the identifiers of a future drift-check
// source in the background, while the summarizer works on it, so that the
// check after the summary finds them ready. It holds no activity context:
// it only fills the bounded cache, and a check in another worker process
// extracts them itself.
func (a *Activities) prefetchIdentifiers(key, text string) {
	go func() {
		_, _ = a.ids.get(key, func() (string, error) { return text, nil })
	}()
}

// Patch appends the items still missing after repair to a summary, so that
// no identifier the drift check found is lost.
func (a *Activities) Patch(ctx context.Context, in PatchInput) (res SummarizeResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "patch")
	defer rec.end(&err, &res.Recorded)

	summary, err := a.text(ctx, in.Run.Tenant, in.SummaryKey)
	if err != nil {
		return res, err
	}
	raw, err := a.text(ctx, in.Run.Tenant, in.MissingKey)
	if err != nil {
		return res, err
	}
	var missing []string
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &missing); err != nil {
			return res, fmt.Errorf("read missing items: %w", err)
		}
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimRight(summary, "\n"))
	if len(missing) > 0 {
		sb.WriteString("\n\nIdentifiers kept by the drift check:\n")
		for _, m := range missing {
			sb.WriteString("- " + m + "\n")
		}
	}
	out := sb.String()
	key, err := a.putText(ctx, in.Run.Tenant, "summary", out)
	if err != nil {
		return res, err
	}
	rec.outputSize = int64(len(out))
	return SummarizeResult{Key: key, Chars: utf8.RuneCountInString(out), Fallback: "patch"}, nil
}

// ApplyHistory replaces the summarized messages with the summary message
// in the preset's style, keeping protected messages verbatim.
func (a *Activities) ApplyHistory(ctx context.Context, in ApplyHistoryInput) (res WorkResult, err error) {
	rec := a.begin(ctx, in.Run, in.Step, "apply-history")
	defer rec.end(&err, &res.Recorded)

	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, b, err := a.historyBudget(in.Run, in.Ladder)
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
	key, err := a.save(ctx, in.Run.Tenant, out)
	if err != nil {
		return res, err
	}
	after := b.Measure(out)
	logger(ctx).Info(fmt.Sprintf("Summarized %d messages → 1 summary (saved ~%d tokens)", st.Summarized, before-after), "run", in.Run.ID)
	rec.inputSize, rec.outputSize = int64(before), int64(after)
	return WorkResult{WorkKey: key, Tokens: after, Usage: b.Usage(after)}, nil
}

// sessionSummary frames a summary as seed 004's session summary and makes
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

// Commit writes the compacted conversation in the caller's format, marks
// the run succeeded (at most once), persists the watermark, and only then
// deletes the offloads the summary restored.
func (a *Activities) Commit(ctx context.Context, in CommitInput) (res CommitResult, err error) {
	rec := a.begin(ctx, in.Run, "commit", "commit")
	defer rec.end(&err, nil)

	run := in.Run
	conv, _, err := a.load(ctx, in.Run.Tenant, in.WorkKey)
	if err != nil {
		return res, err
	}
	p, b, err := a.budget(run)
	if err != nil {
		return res, err
	}
	tokensBefore := int64(in.TokensBefore)
	if tokensBefore == 0 {
		// A run started before the workflow passed the plan's figure.
		stored, err := a.Store.GetRun(ctx, run.ID)
		if err != nil {
			return res, storeErr(fmt.Errorf("read run: %w", err))
		}
		tokensBefore = stored.TokensBefore
	}
	after := b.Measure(conv)
	usage := b.Usage(after)
	var reactStats *conversation.ReActStats
	changed := false // by commit itself, since the work was saved
	if conv.Format == conversation.FormatReAct {
		threshold := int(float64(b.Limit) * p.GlobalResults.TriggerUsage)
		reactStats = &conversation.ReActStats{
			TotalSize: after, ModelLimit: b.Limit, UsagePercent: roundTo(usage*100, 1),
			TurnsCount: len(conv.Messages) / 2, CompressionThreshold: threshold, NeedsCompression: after > threshold,
		}
		// A bare list of turns has no place for them: they go to the run's
		// stats (and the response) only, and the output stays a list.
		if conversation.HasStatsPlace(conv) {
			if err := conversation.SetReActStats(&conv, *reactStats); err != nil {
				return res, fmt.Errorf("write compression stats: %w", err)
			}
			changed = true
		}
	}
	data, err := a.outputBytes(ctx, run.Tenant, in.WorkKey, conv, changed)
	if err != nil {
		return res, err
	}
	ref, err := a.Blob.PutContent(ctx, run.Tenant, blob.KindOutput, data)
	if err != nil {
		return res, blobErr(fmt.Errorf("write output: %w", err))
	}
	level := compress.LevelFor(usage)
	ratio := 0.0
	if tokensBefore > 0 {
		ratio = float64(after) / float64(tokensBefore)
	}
	over := b.Over(after)
	reason := ""
	if over {
		reason = plan.OverLimitReason(conv, p, b, in.Ladder, in.HistoryFailed)
		logger(ctx).Warn("run ends over its limit", "run", run.ID, "size", after, "limit", b.Limit)
	}
	stats := store.RunStats{
		Passes: in.Passes, UsageAfter: usage, AgentModel: run.Model, ContextLimit: b.Limit,
		Encoding: b.Counter.Name(), Unit: unitOf(b), HistoryFailed: in.HistoryFailed,
		Recommendation: compress.Recommendation(level), ArchiveKey: in.ArchiveKey,
		OverLimit: over, OverLimitReason: reason, PreservedCount: in.Preserved, DeletedOffloads: len(in.DeleteOffloads),
		LevelBefore: in.LevelBefore, Drift: in.Drift, Format: string(conv.Format), LevelReason: plan.LevelReason(conv, p, b),
	}
	if reactStats != nil {
		stats.ContextCompression = mustJSON(map[string]any{"enabled": true, "stats": reactStats})
	}
	// A session that reached CRITICAL gets its fresh start even when
	// this run brought it lower: it will be back there soon.
	startedCritical := in.LevelBefore == string(compress.LevelCritical)
	if level == compress.LevelCritical || startedCritical || over || run.Trigger == "checkpoint" {
		// Seed 004's "Checkpoint + fresh session", made: the fresh
		// session's conversation, stored and named on the run.
		ref, err := a.handoff(ctx, run, conv, p, b, plan.HandoffRefs{Level: string(level), Usage: usage, ArchiveKey: in.ArchiveKey}, in.HandoffSummaryKey)
		var app *temporal.ApplicationError
		switch {
		case err != nil && errors.As(err, &app) && !app.NonRetryable():
			return res, err // S3 or Postgres is down: the commit retries
		case err != nil:
			// The handoff is an extra: a conversation it cannot be made
			// from does not fail the run.
			logger(ctx).Warn("no handoff", "run", run.ID, "error", err)
		case ref.Key != "":
			stats.HandoffKey, stats.HandoffSHA256 = ref.Key, ref.SHA256
			res.HandoffKey, res.HandoffSHA256 = ref.Key, ref.SHA256
		}
	}
	model := in.Model
	if model == "" {
		model = a.modelFor(p.SummarizerModel)
	}
	// This step's own record goes with the commit too; rec.end then
	// writes only a failure.
	rec.outputSize = int64(len(data))
	steps := append(in.Steps, rec.row(nil))
	committed, err := a.Store.CommitRun(ctx, run.ID, store.RunResult{
		TokensAfter: int64(after), CharsAfter: int64(runeCount(data)), Ratio: ratio,
		OutputKey: ref.Key, OutputSHA256: ref.SHA256, Model: model, PromptVersion: in.PromptVersion,
		Level: string(level), Stats: mustJSON(stats), OverLimit: over, Reason: reason, Steps: steps,
	})
	if err != nil {
		return res, storeErr(fmt.Errorf("commit run: %w", err))
	}
	rec.written = true
	if committed {
		outcome := string(store.RunSucceeded)
		if over {
			outcome = string(store.RunOverLimit)
		}
		a.Metrics.Run(outcome, p.Name, string(conv.Format), unitOf(b), int(tokensBefore), after)
	}
	if !committed {
		// A retried commit finds the run already final: nothing changes.
		current, err := a.Store.GetRun(ctx, run.ID)
		if err != nil {
			return res, storeErr(fmt.Errorf("read run: %w", err))
		}
		if current.Status != store.RunSucceeded && current.Status != store.RunOverLimit {
			return res, badInput(fmt.Errorf("run %s is already %s", run.ID, current.Status))
		}
	}
	if in.Watermark != "" {
		if err := a.Store.SetWatermark(ctx, run.Tenant, run.Session, in.Watermark, run.ID); err != nil {
			return res, storeErr(fmt.Errorf("persist watermark: %w", err))
		}
	}
	deleted := 0
	if len(in.DeleteOffloads) > 0 {
		// Only this session's recorded offloads are released, and an
		// object is deleted only when no live offload of the tenant still
		// refers to it (store.ReleaseOffloads decides it with the rows).
		var keys []string
		for _, k := range in.DeleteOffloads {
			if blob.CheckOwned(run.Tenant, k) == nil {
				keys = append(keys, k)
			}
		}
		n, _, err := a.Store.ReleaseOffloads(ctx, run.Tenant, run.Session, keys, func(ctx context.Context, key string) error {
			if err := a.Blob.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return err
			}
			return nil
		})
		switch {
		case err == nil:
		case store.IsRetryable(err):
			return res, storeErr(fmt.Errorf("release offloads: %w", err))
		case blob.IsRetryable(err):
			return res, blobErr(fmt.Errorf("release offloads: %w", err))
		default:
			// Seed 002: a failed delete does not undo the compaction; the
			// offloads stay live and recorded.
			logger(ctx).Warn("release offloads", "run", run.ID, "count", len(keys), "error", err)
		}
		deleted = n
	}
	rec.outputSize = int64(len(data))
	return CommitResult{OutputKey: ref.Key, OutputSHA256: ref.SHA256, TokensBefore: int(tokensBefore),
		TokensAfter: after, Ratio: ratio, LevelAfter: string(level), Committed: committed, Deleted: deleted,
		OverLimit: over, Reason: reason, Limit: b.Limit, Recommendation: compress.Recommendation(level), LevelReason: stats.LevelReason,
		HandoffKey: res.HandoffKey, HandoffSHA256: res.HandoffSHA256}, nil
}

// outputBytes is the run's output: the saved working copy's own bytes
// when the last step saved it (a "work" object is the rendering of the
// conversation commit loaded) and commit changed nothing, so that the
// output is not rendered a second time; else the conversation rendered,
// which also gives the caller's input back in canonical form when no
// pass changed it.
func (a *Activities) outputBytes(ctx context.Context, tenant, workKey string, conv conversation.Conversation, changed bool) ([]byte, error) {
	if _, kind, sha, err := blob.ParseContentKey(workKey); err == nil && kind == blob.KindWork && !changed {
		return a.getVerified(ctx, tenant, workKey, sha)
	}
	data, err := conversation.Render(conv)
	if err != nil {
		return nil, fmt.Errorf("render output: %w", err)
	}
	return data, nil
}

// handoff builds and stores the fresh-session conversation of a run (see
// plan.Handoff); a zero Ref when there is nothing to hand off.
func (a *Activities) handoff(ctx context.Context, run contract.Run, conv conversation.Conversation, p policy.Preset, b plan.Budget, refs plan.HandoffRefs, summaryKey string) (blob.Ref, error) {
	offs, err := a.Store.ListOffloads(ctx, run.Tenant, run.Session, false)
	if err != nil {
		return blob.Ref{}, storeErr(fmt.Errorf("list offloads: %w", err))
	}
	for _, o := range offs {
		if _, _, sha, err := blob.ParseContentKey(o.Key); err == nil {
			refs.Offloads = append(refs.Offloads, [2]string{sha, o.ToolName})
		}
	}
	made := ""
	if summaryKey != "" {
		if made, err = a.text(ctx, run.Tenant, summaryKey); err != nil {
			return blob.Ref{}, err
		}
	}
	refs.Summarize = func(transcript string, target int) string {
		if made != "" {
			return made
		}
		resp, err := llm.Extractive{}.Summarize(ctx, llm.Request{Prompt: llm.PromptSession, Text: transcript,
			TargetChars: target, ArchiveRef: refs.ArchiveKey})
		if err != nil {
			return digest.Extractive(transcript, target)
		}
		return resp.Text
	}
	out, ok, err := plan.Handoff(conv, p, refs)
	if err != nil || !ok {
		return blob.Ref{}, err
	}
	// The handoff fits its own budget: what it cannot carry is offloaded
	// with a pointer; one that still cannot fit is not made.
	out, offloads, fits, err := plan.FitHandoff(out, p, b, offloadKey(run.Tenant))
	if err != nil {
		return blob.Ref{}, badInput(err)
	}
	if !fits {
		logger(ctx).Warn("no handoff: over the limit even after offloading", "run", run.ID, "size", b.Measure(out), "limit", b.Limit)
		return blob.Ref{}, nil
	}
	if err := a.storeOffloads(ctx, run, offloads); err != nil {
		return blob.Ref{}, err
	}
	data, err := conversation.Render(out)
	if err != nil {
		return blob.Ref{}, fmt.Errorf("render handoff: %w", err)
	}
	ref, err := a.Blob.PutContent(ctx, run.Tenant, "handoff", data)
	if err != nil {
		return blob.Ref{}, blobErr(fmt.Errorf("write handoff: %w", err))
	}
	return ref, nil
}

// FailRun marks a run failed; a run already final stays as it is.
func (a *Activities) FailRun(ctx context.Context, in FailInput) error {
	failed, err := a.Store.FailRun(ctx, in.RunID, store.Failure{Class: in.Class, Message: in.Message}, in.Steps...)
	if err != nil {
		return storeErr(fmt.Errorf("fail run: %w", err))
	}
	if failed {
		preset := ""
		if r, err := a.Store.GetRun(ctx, in.RunID); err == nil {
			preset = r.Preset
		}
		a.Metrics.Run(string(store.RunFailed), preset, "", "", 0, 0)
	}
	return nil
}

// runeCount is utf8.RuneCount without a copy of p: Go's counts a text
// that is not all ASCII through a string conversion of the rest, a copy
// of megabytes for a conversation.
func runeCount(p []byte) int {
	n := 0
	for len(p) > 0 {
		size := 1
		if p[0] >= utf8.RuneSelf {
			_, size = utf8.DecodeRune(p)
		}
		p = p[size:]
		n++
	}
	return n
}

func roundTo(v float64, digits int) float64 {
	f := 1.0
	for i := 0; i < digits; i++ {
		f *= 10
	}
	return float64(int64(v*f+0.5)) / f
}
