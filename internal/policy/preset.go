// Package policy holds the compaction presets, one per source design
// (docs/designs.md), as plain data with each design's numbers, and the user
// configuration that overrides them. Behaviour lives in internal/strategy
// and internal/plan; this package only says which passes run and with which
// numbers.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Preset names.
const (
	ReactTwoLayer  = "react-two-layer"
	Watermark      = "watermark"
	OffloadCompact = "offload-compact"
	AutoSummarize  = "auto-summarize"
	ThreeTier      = "three-tier"
	Adaptive       = "adaptive"
)

// Preset is one complete compaction policy. Numbers that its source design
// leaves open are ours and are marked so in docs/presets.md and docs/designs.md.
type Preset struct {
	Name        string `json:"name"`
	Seed        string `json:"seed"`
	Description string `json:"description"`

	// Encoding is the unit of every size in this preset: "chars" (the ReAct
	// two-layer design measures characters) or a token encoding; "" means the encoding that
	// fits the conversation's model.
	Encoding string `json:"encoding"`
	// ContextLimit is used when the caller gives none, in Encoding units;
	// 0 means the model's known limit.
	ContextLimit int `json:"context_limit"`
	// FixedOverhead is added to the measured conversation: the ReAct
	// two-layer design counts a ~5K system prompt and ~3K of instructions
	// outside the trajectory.
	FixedOverhead int `json:"fixed_overhead"`
	// TargetUsage is where the adaptive preset stops: once usage is at or
	// below it, no further (costlier) pass runs. It is also where a
	// history summary that fills its tail aims (the adaptive preset's, and
	// the budget ladder's of every preset): the largest recent tail that
	// keeps the output under it.
	TargetUsage float64 `json:"target_usage"`
	// StopAtTarget stops before the next (costlier) pass once usage is at
	// or below TargetUsage: the adaptive preset's "cheapest first". Its
	// history summary then removes no more than the target needs: it
	// keeps the largest recent tail (at least History.KeepLast messages)
	// that leaves the output under TargetUsage.
	StopAtTarget bool `json:"stop_at_target"`
	// Debug disables every pass (the auto-summarize design's context.verbosity=debug).
	Debug bool `json:"debug"`
	// SummarizerModel overrides the worker's summarizer model for this
	// preset (offload-compact's SYNAPSE_COMPACT_MODEL); "" keeps the worker's.
	SummarizerModel string `json:"summarizer_model"`

	Protection    Protection    `json:"protection"`
	LargeResult   LargeResult   `json:"large_result"`
	GlobalResults GlobalResults `json:"global_results"`
	Watermark     WatermarkRule `json:"watermark"`
	Offload       Offload       `json:"offload"`
	Truncate      Truncate      `json:"truncate"`
	PostProcess   PostProcess   `json:"post_process"`
	History       History       `json:"history"`
	Drift         Drift         `json:"drift"`
	Budget        BudgetRule    `json:"budget"`
	Cost          CostRule      `json:"cost"`
}

// CostRule is what a run may do with its price (package pricing).
type CostRule struct {
	// SkipUnprofitable keeps the conversation as it came when the
	// session did not need the compaction yet (its input was under the
	// limit) and the compaction would cost the agent more over its next
	// calls than it saves (the prompt-cache re-write above the reads
	// saved); the run says so in a "skip" pass. Off by default.
	SkipUnprofitable bool `json:"skip_unprofitable"`
}

// Protection says what no strategy may touch (the auto-summarize design's
// "never summarize" rules).
type Protection struct {
	System     bool     `json:"system"`
	FirstUser  bool     `json:"first_user"`
	LastN      int      `json:"last_n"`
	PinMarkers []string `json:"pin_markers"`
	// Checkpoints protects the session's active state checkpoint (the
	// auto-summarize design's "never summarize: active state
	// checkpoints"): the latest call of one of watermark.checkpoint_tools
	// and its result.
	Checkpoints bool `json:"checkpoints,omitempty"`
}

// LargeResult is layer 1 of the ReAct two-layer design (preset
// react-two-layer): map-reduce of one huge tool result.
type LargeResult struct {
	Enabled        bool    `json:"enabled"`
	ThresholdChars int     `json:"threshold_chars"`
	ChunkChars     int     `json:"chunk_chars"`
	Ratio          float64 `json:"ratio"`
	// SecondPassAboveChars triggers the second-level pass over the merged
	// chunk summaries.
	SecondPassAboveChars int `json:"second_pass_above_chars"`
	// Fallback when the LLM keeps failing: "extractive" (ours) or
	// "truncate" (the design's first TruncateChars characters).
	Fallback      string `json:"fallback"`
	TruncateChars int    `json:"truncate_chars"`
	// Parallelism bounds the chunk summaries in flight for one result.
	Parallelism int `json:"parallelism"`
}

// GlobalResults is layer 2 of the ReAct two-layer design: every large
// result compressed with its thought/action as context once the context
// passes TriggerUsage.
type GlobalResults struct {
	Enabled      bool    `json:"enabled"`
	TriggerUsage float64 `json:"trigger_usage"`
	MinChars     int     `json:"min_chars"`
	Ratio        float64 `json:"ratio"`
	Parallelism  int     `json:"parallelism"`
}

// WatermarkRule is the watermark prune (preset watermark): pruning at the
// watermark a checkpoint tool call sets.
type WatermarkRule struct {
	Enabled         bool     `json:"enabled"`
	CheckpointTools []string `json:"checkpoint_tools"`
	// KeepBefore keeps this many messages before the watermark untouched
	// (the watermark design's "keep N messages before watermark" future item).
	KeepBefore int `json:"keep_before"`
}

// Offload moves large tool results to S3 and leaves a reference (the
// offload-compact offload and the three-tier tier-1 offload).
type Offload struct {
	Enabled      bool    `json:"enabled"`
	MinTokens    int     `json:"min_tokens"`
	TriggerUsage float64 `json:"trigger_usage"`
	PreviewChars int     `json:"preview_chars"`
	PreviewLines int     `json:"preview_lines"`
}

// Truncate shortens old, already persisted write/edit tool inputs (the
// three-tier tier-2 input truncation).
type Truncate struct {
	Enabled      bool     `json:"enabled"`
	TriggerUsage float64  `json:"trigger_usage"`
	MinTokens    int      `json:"min_tokens"`
	Tools        []string `json:"tools"`
}

// PostProcess is the selective tool post-processing table (preset
// auto-summarize).
type PostProcess struct {
	Enabled     bool `json:"enabled"`
	SmallTokens int  `json:"small_tokens"`
	JSONTokens  int  `json:"json_tokens"`
	FileLines   int  `json:"file_lines"`
	DBRows      int  `json:"db_rows"`
	SampleRows  int  `json:"sample_rows"`
}

// History is LLM compaction of everything but the last messages (the
// offload-compact compressed-history summary, the auto-summarize brief
// summary, the three-tier tier-3 session summary).
type History struct {
	Enabled bool `json:"enabled"`
	// TriggerUsage starts compaction once usage reaches it (after the
	// cheaper passes).
	TriggerUsage float64 `json:"trigger_usage"`
	// MaxFreedTokens: compaction runs only when the cheaper passes freed
	// fewer tokens than this (offload-compact: 15,000); 0 disables the rule.
	MaxFreedTokens int `json:"max_freed_tokens"`
	KeepLast       int `json:"keep_last"`
	// Prompt is the prompt file: "history" (offload-compact),
	// "brief" (auto-summarize), "session" (three-tier).
	Prompt string `json:"prompt"`
	// Style is how the summary is inserted, see strategy.SummaryStyle.
	Style        string `json:"style"`
	TargetTokens int    `json:"target_tokens"`
	// Attempts is the LLM attempts before giving up (offload-compact: 3).
	Attempts int `json:"attempts"`
	// RestoreOffloads puts offloaded content back before summarizing, and
	// DeleteOffloads removes it after a successful compaction (offload-compact).
	RestoreOffloads bool `json:"restore_offloads"`
	// OnFailure is what happens when the summary cannot be made:
	// "unchanged" leaves the history as it was (offload-compact's success false),
	// "extractive" uses the offline extractive summary instead.
	OnFailure      string `json:"on_failure"`
	DeleteOffloads bool   `json:"delete_offloads"`
	// CriticalUsage recommends a fresh session (three-tier: 85%).
	CriticalUsage float64 `json:"critical_usage"`
	// Log keeps the session's summaries as an append-only session log
	// (ours, every summarizing preset): see SessionLog.
	Log SessionLog `json:"log"`
}

// SessionLog is how a session's summaries accumulate over its many
// compactions. Enabled, each compaction summarizes only the messages that
// are new since the log's last block and appends one block after the
// earlier ones, which stay byte-identical (the agent's prompt cache keeps
// hitting, and nothing is re-summarized); when the log outgrows
// BudgetShare of the limit, one reflection condenses its blocks into one,
// and the run says so. Disabled, every summary covers everything before
// the kept tail again, earlier summaries included (the source designs'
// rule, kept for comparison).
type SessionLog struct {
	Enabled bool `json:"enabled"`
	// BudgetShare is the share of the context limit the log may hold
	// before a reflection; a block aims at a quarter of it at most.
	BudgetShare float64 `json:"budget_share"`
}

// defaultLog is every summarizing preset's session log.
var defaultLog = SessionLog{Enabled: true, BudgetShare: 0.3}

// Drift is the check of a summary against its source.
type Drift struct {
	Enabled bool `json:"enabled"`
	// MinRetention is the share of the source's identifiers the summary
	// must keep.
	MinRetention float64 `json:"min_retention"`
	// RepairPasses is how many repair passes may run before falling back.
	RepairPasses int `json:"repair_passes"`
	// MaxIdentifiers bounds how many identifiers are checked (the most
	// recent ones), so that a huge history does not demand the impossible.
	MaxIdentifiers int `json:"max_identifiers"`
	// Behaviour checks what the agent did after the previous compaction
	// (the three-tier design's post-compression verification: a question
	// to the user at once, done declared early, other files) and appends
	// a Goal Drift Warning at the output's tail when it finds a sign
	// (plan.Behaviour).
	Behaviour bool `json:"behaviour"`
}

// BudgetRule is the budget check that closes every run: when the output of
// the preset's own passes is still over the model's limit, the run climbs
// one ladder (offload the remaining large results, largest first; a
// history summary with a smaller tail; truncation of the largest results
// with an archive reference) until it fits, and otherwise ends over_limit
// with the reason. Every preset has it on; turning it off is an explicit
// setting, and the outcome stays honest either way.
type BudgetRule struct {
	Enabled bool `json:"enabled"`
	// TargetUsage is where the ladder aims (a share of the limit), below
	// the limit itself so that the agent's next turn still fits.
	TargetUsage float64 `json:"target_usage"`
	// OffloadMinTokens: the ladder offloads remaining results larger than
	// this (in the preset's unit), wherever they are.
	OffloadMinTokens int `json:"offload_min_tokens"`
	// KeepLast is the tail the ladder's history summary keeps (smaller than
	// the preset's own).
	KeepLast int `json:"keep_last"`
	// TargetTokens bounds the ladder's history summary.
	TargetTokens int `json:"target_tokens"`
	// History is the summary the ladder makes for a preset without a
	// history rule of its own: Resolve copies the adaptive preset's, so
	// that the resolved preset is all a run needs and no step looks a
	// built-in up again.
	History *History `json:"history,omitempty"`
}

var checkpointTools = []string{"deactivate_augments", "compress_to_checkpoint",
	"mcp__nisaba__deactivate_augments", "mcp__nisaba__compress_to_checkpoint"}

var writeTools = []string{"write_file", "edit_file", "create_file", "str_replace_editor",
	"str_replace_based_edit_tool", "apply_patch", "Write", "Edit", "MultiEdit"}

var pinMarkers = []string{"[pinned]", "<constraints>", "IMPORTANT:", "CONSTRAINT:"}

// DefaultPinMarkers returns the markers that pin a user message (ours;
// the auto-summarize design names pinned constraints without a syntax).
func DefaultPinMarkers() []string {
	return append([]string(nil), pinMarkers...)
}

func basePreset() Preset {
	return Preset{
		TargetUsage: 0.5,
		Protection:  Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers()},
		LargeResult: LargeResult{ThresholdChars: 50000, ChunkChars: 50000, Ratio: 0.10,
			SecondPassAboveChars: 50000, Fallback: "extractive", TruncateChars: 1000, Parallelism: 8},
		GlobalResults: GlobalResults{TriggerUsage: 0.80, MinChars: 5000, Ratio: 0.10, Parallelism: 8},
		Watermark:     WatermarkRule{CheckpointTools: slices.Clone(checkpointTools)},
		Offload:       Offload{MinTokens: 15000, PreviewChars: 500, PreviewLines: 10},
		Truncate:      Truncate{TriggerUsage: 0.50, MinTokens: 500, Tools: slices.Clone(writeTools)},
		PostProcess:   PostProcess{SmallTokens: 200, JSONTokens: 500, FileLines: 500, DBRows: 100, SampleRows: 5},
		History: History{KeepLast: 5, Prompt: "history", Style: "compressed-history",
			TargetTokens: 8000, Attempts: 3, CriticalUsage: 0.85, OnFailure: "extractive", Log: defaultLog},
		Drift:  Drift{Enabled: true, MinRetention: 0.6, RepairPasses: 1, MaxIdentifiers: 60, Behaviour: true},
		Budget: BudgetRule{Enabled: true, TargetUsage: 0.9, OffloadMinTokens: 1000, KeepLast: 1, TargetTokens: 2000},
	}
}

// Builtin returns the named built-in preset with its source design's numbers
// (docs/designs.md).
func Builtin(name string) (Preset, error) {
	p := basePreset()
	p.Name = name
	switch name {
	case ReactTwoLayer:
		p.Seed = "000"
		p.Description = "ReAct two-layer: map-reduce of results > 50,000 chars; at 80% every result > 5,000 chars to 10% with its thought/action"
		p.Encoding = "chars"
		p.ContextLimit = 200000
		p.FixedOverhead = 8000
		p.Protection = Protection{System: true}
		// Characters: 1,000 tokens are about 4,000 characters.
		p.Budget.OffloadMinTokens = 4000
		p.LargeResult.Enabled = true
		p.GlobalResults.Enabled = true
		// The ReAct two-layer design reports usage but never drops a turn; its summaries are
		// per result, so the drift bar applies per result.
		p.History.Enabled = false
	case Watermark:
		p.Seed = "001"
		p.Description = "Watermark: drop tool_use/tool_result blocks before the latest checkpoint tool call, keep text"
		p.Watermark.Enabled = true
		// The watermark design prunes tool blocks only; the task and pinned
		// constraints are protected for the budget ladder's summary
		// (ours: the user's words survive every preset).
		p.Protection = Protection{System: true, FirstUser: true, PinMarkers: DefaultPinMarkers()}
		p.Drift.Enabled = false
	case OffloadCompact:
		p.Seed = "002"
		p.Description = "Offload then compact: offload large results; when that frees < 15,000 tokens, summarize all but the last 5 into 8 sections"
		p.Offload.Enabled = true
		p.Offload.MinTokens = 5000
		p.Offload.TriggerUsage = 0.70
		// The task and pinned constraints stay beside the 8-section
		// summary (ours: the design summarizes them with the rest, and
		// agents then lose the task statement).
		p.Protection = Protection{System: true, FirstUser: true, LastN: 5, PinMarkers: DefaultPinMarkers()}
		p.History = History{Enabled: true, TriggerUsage: 0.70, MaxFreedTokens: 15000, KeepLast: 5,
			Prompt: "history", Style: "compressed-history", TargetTokens: 8000, Attempts: 3,
			RestoreOffloads: true, DeleteOffloads: true, OnFailure: "unchanged"}
	case AutoSummarize:
		p.Seed = "003"
		p.Description = "Auto-summarize at 50%: post-process tool outputs, summarize all but the last 3, never the system prompt or pinned constraints"
		p.PostProcess.Enabled = true
		p.Protection = Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers(), Checkpoints: true}
		p.History = History{Enabled: true, TriggerUsage: 0.50, KeepLast: 3, Prompt: "brief",
			Style: "summary-first", TargetTokens: 2000, Attempts: 3, OnFailure: "extractive"}
	case ThreeTier:
		p.Seed = "004"
		p.Description = "Three tiers: offload results > 15,000 tokens; > 50% truncate persisted inputs; > 75% session summary with archive refs; > 85% recommend a fresh session"
		p.Offload.Enabled = true
		p.Offload.MinTokens = 15000
		p.Truncate.Enabled = true
		p.Protection = Protection{System: true, FirstUser: true, LastN: 3, PinMarkers: DefaultPinMarkers()}
		p.History = History{Enabled: true, TriggerUsage: 0.75, KeepLast: 3, Prompt: "session",
			Style: "session-summary", TargetTokens: 4000, Attempts: 3, CriticalUsage: 0.85, OnFailure: "extractive"}
	case Adaptive:
		p.Seed = "all"
		p.Description = "Adaptive (default): cheapest first — prune, offload, truncate, post-process, map-reduce, summarize — stop once usage ≤ target"
		p.Watermark.Enabled = true
		p.Offload.Enabled = true
		p.Offload.MinTokens = 5000
		p.Truncate.Enabled = true
		p.Truncate.TriggerUsage = 0
		p.PostProcess.Enabled = true
		p.StopAtTarget = true
		// Results over 5,000 tokens are offloaded first, which is cheaper
		// than map-reduce and loses nothing, so layer 1 stays off here.
		p.History = History{Enabled: true, TriggerUsage: 0.5, KeepLast: 5, Prompt: "history",
			Style: "compressed-history", TargetTokens: 8000, Attempts: 3, RestoreOffloads: true,
			CriticalUsage: 0.85, OnFailure: "extractive"}
	default:
		return Preset{}, fmt.Errorf("unknown preset %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	p.History.Log = defaultLog
	return p, nil
}

// Names lists the built-in presets.
func Names() []string {
	return []string{ReactTwoLayer, Watermark, OffloadCompact, AutoSummarize, ThreeTier, Adaptive}
}

// Resolve returns the named preset (the default when name is empty) with
// overrides applied. Overrides are a JSON object with the same field names
// as Preset; unknown fields are an error naming them, so a typo never
// silently does nothing.
func Resolve(name string, overrides json.RawMessage) (Preset, error) {
	if name == "" {
		name = Adaptive
	}
	p, err := Builtin(name)
	if err != nil {
		return Preset{}, err
	}
	if len(bytes.TrimSpace(overrides)) != 0 && string(bytes.TrimSpace(overrides)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(overrides))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return Preset{}, fmt.Errorf("preset %s overrides: %w", name, err)
		}
		p.Name = name
	}
	p.Budget.History = nil
	if !p.History.Enabled {
		base, err := Builtin(Adaptive)
		if err != nil {
			return Preset{}, err
		}
		h := base.History
		p.Budget.History = &h
	}
	return p, p.Validate()
}

// Validate reports the first number that makes no sense, naming its field.
func (p Preset) Validate() error {
	checks := []struct {
		field string
		bad   bool
	}{
		{"context_limit", p.ContextLimit < 0},
		{"fixed_overhead", p.FixedOverhead < 0},
		{"target_usage", p.TargetUsage < 0 || p.TargetUsage > 1},
		{"protection.last_n", p.Protection.LastN < 0},
		// An empty marker is in every message: it would pin them all.
		{"protection.pin_markers", slices.ContainsFunc(p.Protection.PinMarkers, func(m string) bool { return strings.TrimSpace(m) == "" })},
		{"large_result.chunk_chars", p.LargeResult.Enabled && p.LargeResult.ChunkChars < 1000},
		{"large_result.ratio", p.LargeResult.Enabled && (p.LargeResult.Ratio <= 0 || p.LargeResult.Ratio >= 1)},
		{"large_result.fallback", p.LargeResult.Fallback != "extractive" && p.LargeResult.Fallback != "truncate"},
		{"large_result.parallelism", p.LargeResult.Parallelism < 1},
		{"global_results.ratio", p.GlobalResults.Enabled && (p.GlobalResults.Ratio <= 0 || p.GlobalResults.Ratio >= 1)},
		{"global_results.parallelism", p.GlobalResults.Parallelism < 1},
		{"watermark.checkpoint_tools", p.Watermark.Enabled && len(p.Watermark.CheckpointTools) == 0},
		{"watermark.keep_before", p.Watermark.KeepBefore < 0},
		{"offload.min_tokens", p.Offload.Enabled && p.Offload.MinTokens < 1},
		{"history.keep_last", p.History.Enabled && p.History.KeepLast < 0},
		{"history.target_tokens", p.History.Enabled && p.History.TargetTokens < 50},
		{"history.attempts", p.History.Enabled && p.History.Attempts < 1},
		{"history.prompt", p.History.Enabled && !oneOf(p.History.Prompt, "history", "brief", "session")},
		{"history.on_failure", p.History.Enabled && !oneOf(p.History.OnFailure, "unchanged", "extractive")},
		{"history.style", p.History.Enabled && !oneOf(p.History.Style, "compressed-history", "summary-first", "session-summary")},
		{"history.log.budget_share", p.History.Enabled && p.History.Log.Enabled && (p.History.Log.BudgetShare <= 0 || p.History.Log.BudgetShare > 0.5)},
		{"drift.min_retention", p.Drift.MinRetention < 0 || p.Drift.MinRetention > 1},
		{"budget.target_usage", p.Budget.Enabled && (p.Budget.TargetUsage <= 0 || p.Budget.TargetUsage > 1)},
		{"budget.offload_min_tokens", p.Budget.Enabled && p.Budget.OffloadMinTokens < 1},
		{"budget.keep_last", p.Budget.Enabled && p.Budget.KeepLast < 0},
		{"budget.target_tokens", p.Budget.Enabled && p.Budget.TargetTokens < 50},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("preset %s: invalid %s", p.Name, c.field)
		}
	}
	return nil
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}
