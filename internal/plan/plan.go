// Package plan decides, for one conversation and one preset, which passes
// run and in what order, and runs the deterministic ones. It is pure: the
// activities and `starter inspect` both call it, so what inspect shows is
// what a run does.
package plan

import (
	"fmt"
	"strings"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/textcut"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// Budget is how a conversation is measured against its limit.
type Budget struct {
	// Counter sizes texts, with the model's safety factor applied (see
	// Factor).
	Counter tokens.Counter
	// Limit is the context limit in the counter's unit.
	Limit int
	// Overhead is added to every measure (the ReAct two-layer design's system
	// prompt and instructions, which are not in the trajectory).
	Overhead int
	// Encoding is the unit the counts are made in before the margin:
	// "o200k_base", "cl100k_base" or "chars".
	Encoding string
	// Factor is the safety factor every count includes (tokens.Factors):
	// 1 for OpenAI models, whose encodings are their own, and for
	// characters; by default 1.25 for Claude, 1.15 for Gemini, DeepSeek
	// and unknown models. A size under Limit is under it with this
	// margin. Zero in a Budget built by hand; Margin reads that as 1.
	Factor float64
}

// NewBudget picks the counter and the limit for a preset and a model: the
// preset's encoding (react-two-layer counts characters) or the model's, scaled by
// the model's safety factor from limits; the caller's limit, else the
// preset's, else the model's known limit from limits. Counts are
// remembered in the process-wide cache (tokens.Shared).
func NewBudget(p policy.Preset, model string, callerLimit int, limits tokens.Limits) (Budget, error) {
	return NewBudgetCounting(p, model, callerLimit, limits, nil)
}

// NewBudgetCounting is NewBudget with the counts remembered in counts
// (nil: the process-wide cache).
func NewBudgetCounting(p policy.Preset, model string, callerLimit int, limits tokens.Limits, counts *tokens.CountCache) (Budget, error) {
	enc := p.Encoding
	if enc == "" {
		enc = tokens.EncodingForModel(model)
	}
	counter, err := tokens.New(enc)
	if err != nil {
		return Budget{}, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	limit := callerLimit
	if limit <= 0 {
		limit = p.ContextLimit
	}
	if limit <= 0 {
		limit = limits.For(model)
	}
	if limit <= 0 {
		return Budget{}, fmt.Errorf("no context limit for model %q: pass context_limit", model)
	}
	// Token counts of a model whose tokenizer is not the counter's are
	// estimates: the factor makes them err on the large side. Characters
	// are exact whatever the model.
	factor, prefix := 1.0, ""
	if counter.Name() != tokens.Chars {
		factor, prefix = limits.Factor(model)
	}
	// A budget serves one unit of work (an activity, an inspection) that
	// measures the same messages after every pass: remember their counts,
	// in the activity (Memo) and across activities and runs (the cache).
	// The cache holds the encoding's raw counts, shared by every model;
	// the factor is applied above it, so no model reads another's margin.
	cached := tokens.Shared(counter)
	if counts != nil {
		cached = counts.Wrap(counter)
	}
	scaled, err := tokens.Scale(cached, factor, prefix)
	if err != nil {
		return Budget{}, fmt.Errorf("model %q: %w", model, err)
	}
	return Budget{Counter: tokens.NewMemo(scaled), Limit: limit, Overhead: p.FixedOverhead,
		Encoding: counter.Name(), Factor: factor}, nil
}

// CounterName names the unit of the budget's sizes for reports and
// reasons, margin included: "o200k_base", "chars", or for a scaled
// counter "o200k_base×1.25 (claude)".
func (b Budget) CounterName() string {
	if b.Counter == nil {
		return b.Encoding
	}
	return b.Counter.Name()
}

// Margin is the safety factor the budget's sizes include: Factor, or 1 for
// a Budget built by hand without one.
func (b Budget) Margin() float64 {
	if b.Factor <= 0 {
		return 1
	}
	return b.Factor
}

// Measure is the conversation's size plus the fixed overhead.
func (b Budget) Measure(c conversation.Conversation) int {
	return tokens.Conversation(b.Counter, c) + b.Overhead
}

// Usage is size / limit.
func (b Budget) Usage(size int) float64 {
	return float64(size) / float64(b.Limit)
}

// Protection maps a preset's protection rules onto strategy's.
func Protection(p policy.Preset) strategy.Protection {
	pr := strategy.Protection{
		System:     p.Protection.System,
		FirstUser:  p.Protection.FirstUser,
		LastN:      p.Protection.LastN,
		PinMarkers: p.Protection.PinMarkers,
	}
	if p.Protection.Checkpoints {
		pr.CheckpointTools = p.Watermark.CheckpointTools
	}
	return pr
}

// HistoryProtection is the protection of a history summary: the preset's,
// with the recent tail no longer than the summary's own kept tail, so that
// a summary keeps exactly History.KeepLast messages after it (offload-compact's
// SYNAPSE_COMPACT_PRESERVE_COUNT) whatever the preset protects from the
// cheaper passes.
func HistoryProtection(p policy.Preset) strategy.Protection {
	pr := Protection(p)
	pr.LastN = min(pr.LastN, max(p.History.KeepLast, 0))
	return pr
}

// Pass reports one pass.
type Pass struct {
	Name        string `json:"name"`
	Applied     bool   `json:"applied"`
	Count       int    `json:"count"`
	TokensSaved int    `json:"tokens_saved"`
	Note        string `json:"note,omitempty"`
}

// Offload is a tool result moved out of the conversation: the caller
// stores Text under Key before the new conversation is used.
type Offload struct {
	Key      string
	ToolID   string
	ToolName string
	Tokens   int
	Text     string
}

// Input is what Deterministic works on.
type Input struct {
	Conv   conversation.Conversation
	Preset policy.Preset
	Budget Budget
	// Watermark is the session's persisted watermark (the watermark prune).
	Watermark string
	// Checkpoint is set for a checkpoint event: the watermark pass runs at
	// once, first, whatever the preset (its checkpoint tools are set in
	// every preset).
	Checkpoint bool
	// OffloadKey names the storage key for an offloaded text. It must be
	// a pure function of the text (content addressing), so that a retried
	// run computes the same keys.
	OffloadKey func(text string) string
	// Original is the run's archived original and Archive its SHA-256:
	// a tool result post-processing reduces and a tool input tier 2
	// truncates then name the id that gives them back (package
	// recoverid). Nil Original: no ids (starter inspect).
	Original *conversation.Conversation
	Archive  string
}

// blockIDs is the recover id of each block of c (a conversation the passes
// made from in.Conv) in the original: nil without one. The alignment is
// made on the first call.
func (in Input) blockIDs(c conversation.Conversation) func(msg, block int) string {
	if in.Original == nil || in.Archive == "" {
		return nil
	}
	var m *recoverid.Map
	return func(msg, block int) string {
		if m == nil {
			aligned := recoverid.Align(*in.Original, c, in.Archive)
			m = &aligned
		}
		id, ok := m.Block(msg, block)
		if !ok {
			return ""
		}
		return id.String()
	}
}

// nameCuts ends every tool result that next changed from before (the same
// conversation before a pass that keeps positions) with the recover id of
// the original result. References to offloads are left alone: they name
// their own id.
func nameCuts(before, next conversation.Conversation, ids func(msg, block int) string) conversation.Conversation {
	if ids == nil || len(before.Messages) != len(next.Messages) {
		return next
	}
	out := next
	cloned := false
	for i, m := range next.Messages {
		if len(m.Blocks) != len(before.Messages[i].Blocks) {
			continue
		}
		for j, b := range m.Blocks {
			if b.Kind != conversation.KindToolResult || b.Text == before.Messages[i].Blocks[j].Text {
				continue
			}
			if _, isRef := strategy.ParseReference(b.Text); isRef {
				continue
			}
			id := ids(i, j)
			if id == "" {
				continue
			}
			if !cloned {
				out, cloned = next.Clone(), true
			}
			out.Messages[i].Blocks[j].ReplaceResult(strings.TrimRight(b.Text, "\n") + "\n\n" + recoverid.ResultLine(id))
		}
	}
	return out
}

// Result is the conversation after the deterministic passes.
type Result struct {
	Conv         conversation.Conversation
	SizeBefore   int
	SizeAfter    int
	Passes       []Pass
	Watermark    string
	Offloads     []Offload
	LargeResults []strategy.ResultLoc
	// Done is set when the preset stops at its target usage and the
	// deterministic passes reached it.
	Done bool
}

// Deterministic runs the passes that need no LLM, cheapest first:
// watermark pruning, selective post-processing, offload, tool-input
// truncation; then it lists the results large enough for map-reduce.
func Deterministic(in Input) (Result, error) {
	p, b := in.Preset, in.Budget
	conv := in.Conv
	res := Result{SizeBefore: b.Measure(conv), Watermark: in.Watermark}
	res.SizeAfter = res.SizeBefore
	if p.Debug {
		res.Conv = conv
		res.Passes = append(res.Passes, Pass{Name: "all", Note: "debug verbosity: compression disabled"})
		res.Done = true
		return res, nil
	}
	stop := func() bool {
		return p.StopAtTarget && b.Usage(res.SizeAfter) <= p.TargetUsage
	}
	record := func(name string, next conversation.Conversation, count int, note string) {
		size := b.Measure(next)
		res.Passes = append(res.Passes, Pass{Name: name, Applied: count > 0, Count: count, TokensSaved: res.SizeAfter - size, Note: note})
		conv, res.SizeAfter = next, size
	}

	if (p.Watermark.Enabled || in.Checkpoint) && conv.Format == conversation.FormatReAct {
		res.Passes = append(res.Passes, Pass{Name: "watermark", Note: "skipped: a ReAct trajectory never drops a turn"})
	}
	if (p.Watermark.Enabled || in.Checkpoint) && conv.Format != conversation.FormatReAct {
		anchor := ""
		id, found, reanchored := strategy.FindCheckpointAnchored(conv, p.Watermark.CheckpointTools, res.Watermark)
		if reanchored {
			anchor = fmt.Sprintf("watermark %s no longer in the conversation: re-anchored; ", res.Watermark)
		}
		if found {
			res.Watermark = id
		}
		note := anchor + "no watermark yet"
		next := conv
		count := 0
		if res.Watermark != "" {
			out, st, err := strategy.PruneAtWatermarkWith(conv, res.Watermark, strategy.WatermarkOptions{
				KeepBefore: p.Watermark.KeepBefore, Protected: strategy.Protected(conv, Protection(p)),
			})
			if err != nil {
				return Result{}, fmt.Errorf("watermark pruning: %w", err)
			}
			next, count = out, st.BlocksRemoved
			note = anchor + fmt.Sprintf("watermark %s: removed %d tool blocks, %d messages", res.Watermark, st.BlocksRemoved, st.MessagesRemoved)
			if !st.Found {
				note = anchor + fmt.Sprintf("watermark %s not found: no pruning", res.Watermark)
			}
		}
		record("watermark", next, count, note)
	}

	if p.PostProcess.Enabled && !stop() {
		rules := textcut.PostRules{
			SmallTokens: p.PostProcess.SmallTokens, JSONTokens: p.PostProcess.JSONTokens,
			FileLines: p.PostProcess.FileLines, DBRows: p.PostProcess.DBRows, SampleRows: p.PostProcess.SampleRows,
		}
		// Every result, the newest included: the auto-summarize design post-processes a
		// result as it arrives. Only results change (errors, small ones
		// and JSON stay as they are by the table), so the recent turns
		// keep their structure and the user's words.
		out, st, err := strategy.PostProcessResults(conv, b.Counter, rules, strategy.Protected(conv, strategy.Protection{System: true}))
		if err != nil {
			return Result{}, fmt.Errorf("post-processing: %w", err)
		}
		// A reduced result names the id of the whole one.
		out = nameCuts(conv, out, in.blockIDs(conv))
		record("post-process", out, st.Changed, "")
	}

	if p.Offload.Enabled && !stop() && b.Usage(res.SizeAfter) >= p.Offload.TriggerUsage {
		// Every result above the threshold, wherever it is: protection
		// keeps the structure of the recent turns (their messages, calls
		// and pairing, the user's words), not an oversized result that
		// just arrived (the three-tier tier 1 offloads such a result "immediately").
		// The reference stays in the result's block, paired with its call.
		cands := strategy.PlanOffloadWith(conv, b.Counter, strategy.OffloadOptions{
			MinTokens:    p.Offload.MinTokens,
			PreviewLines: p.Offload.PreviewLines, PreviewChars: p.Offload.PreviewChars,
		})
		placed := make([]strategy.Placed, 0, len(cands))
		for _, c := range cands {
			text := conv.Messages[c.Msg].Blocks[c.Block].Text
			key := in.OffloadKey(text)
			placed = append(placed, strategy.Placed{OffloadCandidate: c, Key: key,
				Preview: strategy.PreviewN(text, p.Offload.PreviewLines, p.Offload.PreviewChars)})
			res.Offloads = append(res.Offloads, Offload{Key: key, ToolID: c.ToolID, ToolName: c.ToolName, Tokens: c.Tokens, Text: text})
		}
		out, err := strategy.ApplyOffload(conv, placed)
		if err != nil {
			return Result{}, fmt.Errorf("offload: %w", err)
		}
		record("offload", out, len(placed), "")
	}

	if p.Truncate.Enabled && !stop() && b.Usage(res.SizeAfter) >= p.Truncate.TriggerUsage {
		if conv.Format == conversation.FormatReAct {
			// The ReAct two-layer design never touches an action.
			record("truncate-inputs", conv, 0, "skipped: a ReAct trajectory keeps its actions")
		} else {
			out, st, err := strategy.TruncateInputs(conv, b.Counter, strategy.TruncateOptions{
				Tools: p.Truncate.Tools, MinTokens: p.Truncate.MinTokens, Protected: strategy.Protected(conv, Protection(p)),
				RecoverID: in.blockIDs(conv),
			})
			if err != nil {
				return Result{}, fmt.Errorf("truncate tool inputs: %w", err)
			}
			record("truncate-inputs", out, st.Count, "")
		}
	}

	if p.LargeResult.Enabled && !stop() {
		for _, r := range strategy.ToolResults(conv) {
			if r.Chars > p.LargeResult.ThresholdChars {
				res.LargeResults = append(res.LargeResults, r)
			}
		}
	}
	res.Conv = conv
	res.Done = stop() && len(res.LargeResults) == 0
	return res, nil
}

// GlobalTargets is layer 2 of the ReAct two-layer design: when usage passes the trigger,
// every result above the minimum size, except those already compressed
// (exclude, as message/block pairs), with its turn as context.
func GlobalTargets(conv conversation.Conversation, p policy.Preset, b Budget, exclude map[[2]int]bool) ([]strategy.ResultLoc, float64) {
	usage := b.Usage(b.Measure(conv))
	if !p.GlobalResults.Enabled || usage <= p.GlobalResults.TriggerUsage {
		return nil, usage
	}
	var out []strategy.ResultLoc
	for _, r := range strategy.ToolResults(conv) {
		if r.Chars > p.GlobalResults.MinChars && !exclude[[2]int{r.Msg, r.Block}] {
			out = append(out, r)
		}
	}
	return out, usage
}

// HistoryDecision says whether to compact the history and where to split.
type HistoryDecision struct {
	Run    bool
	Reason string
	// Split is the index of the first kept message.
	Split int
	// Summarized is how many messages the summary replaces.
	Summarized int
	Protected  []bool
	// Note says how the kept tail was chosen (HistoryTail).
	Note string
	// TargetTokens is what the summary aims at (BlockTarget with a
	// session log, else the preset's).
	TargetTokens int
	// Reflect is set when the session log, with the new block, outgrows
	// its budget: its blocks are condensed into one first.
	Reflect bool
}

// Force says why a history summary runs whatever the usage and the
// cheaper passes.
type Force int

const (
	// NotForced: the preset's trigger decides.
	NotForced Force = iota
	// ForcedByLadder: the budget ladder's summary, which keeps the
	// largest tail that fits.
	ForcedByLadder
	// ForcedManual: a manual compaction (offload-compact's /compact).
	// Under the preset's target usage a tail-filling preset would keep
	// nearly everything, so it keeps the preset's keep_last messages
	// instead: a manual compaction compacts.
	ForcedManual
)

// History decides history compaction of conv, whose session log (after
// SeparateLog) is view: the preset's trigger usage, offload-compact's
// rule that compaction runs only when the cheaper passes freed less than
// MaxFreedTokens, or force. Everything up to the log's end is frozen: the
// summary covers only what is new since the last block.
func History(conv conversation.Conversation, p policy.Preset, b Budget, freed int, force Force, view LogView) HistoryDecision {
	h := p.History
	if !h.Enabled {
		return HistoryDecision{Reason: "history compaction disabled by the preset"}
	}
	if conv.Format == conversation.FormatReAct {
		return HistoryDecision{Reason: "a ReAct trajectory never drops a turn"}
	}
	usage := b.Usage(b.Measure(conv))
	if force == ForcedManual && usage < p.TargetUsage {
		p.StopAtTarget = false
	}
	if force == NotForced {
		if usage < h.TriggerUsage {
			return HistoryDecision{Reason: fmt.Sprintf("usage %.1f%% is under the %.0f%% trigger", usage*100, h.TriggerUsage*100)}
		}
		if h.MaxFreedTokens > 0 && freed >= h.MaxFreedTokens {
			return HistoryDecision{Reason: fmt.Sprintf("offload freed %d ≥ %d tokens: no compaction needed", freed, h.MaxFreedTokens)}
		}
	}
	target := BlockTarget(p, b)
	p.History.TargetTokens = target
	protected := strategy.Protected(conv, Frozen(p, view))
	tail := HistoryTail(conv, p, b, protected)
	split := tail.Split
	n := 0
	for i := 0; i < split; i++ {
		if !protected[i] {
			n++
		}
	}
	if n == 0 {
		return HistoryDecision{Reason: fmt.Sprintf("%d messages: nothing to summarize beyond the kept %d", len(conv.Messages), h.KeepLast)}
	}
	budget := LogBudget(p, b)
	reflect := budget > 0 && len(view.Messages) > 0 && view.Tokens+target > budget
	return HistoryDecision{Run: true, Split: split, Summarized: n, Protected: protected, Note: tail.Note,
		TargetTokens: target, Reflect: reflect}
}
