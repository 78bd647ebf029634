package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// The inputs and results of the later steps: layer 2, history, drift,
// commit, handoff and fail. Like those of types.go, they carry S3 keys and
// small figures, never conversation text.

// GlobalInput plans the ReAct two-layer design's layer 2 over the working conversation.
type GlobalInput struct {
	Run     contract.Run `json:"run"`
	WorkKey string       `json:"work_key"`
	// Exclude lists results already compressed by layer 1, which are not
	// compressed again.
	Exclude []Replacement `json:"exclude,omitempty"`
}

// GlobalResult lists the results to compress; empty when usage is under
// the trigger.
type GlobalResult struct {
	Recorded
	Targets []Target `json:"targets,omitempty"`
	Usage   float64  `json:"usage"`
}

// HistoryInput prepares history compaction.
type HistoryInput struct {
	Run         contract.Run `json:"run"`
	WorkKey     string       `json:"work_key"`
	TokensFreed int          `json:"tokens_freed"`
	// Ladder runs the budget ladder's history step: forced, with the
	// ladder's smaller tail (plan.LadderHistoryPreset).
	Ladder bool `json:"ladder,omitempty"`
	// Step names the step in the run's records ("history/prepare" when
	// empty).
	Step string `json:"step,omitempty"`
	// Pending are the digests of the log blocks this run appended in an
	// earlier history pass: blocks of the session's log, not yet
	// recorded (commit records them).
	Pending []string `json:"pending,omitempty"`
}

// HistoryPlan says whether and how to compact the history.
type HistoryPlan struct {
	Recorded
	Skip   bool   `json:"skip"`
	Reason string `json:"reason,omitempty"`
	Split  int    `json:"split"`
	// TranscriptKey holds the text of the messages to summarize, with
	// offloaded content restored.
	TranscriptKey string `json:"transcript_key,omitempty"`
	Summarized    int    `json:"summarized"`
	// Tokens is the size of the working conversation before compaction.
	Tokens      int      `json:"tokens"`
	Restored    []string `json:"restored,omitempty"`
	Unavailable int      `json:"unavailable,omitempty"`
	// Kept is how many messages follow the summary (offload-compact's
	// preserved_count).
	Kept int `json:"kept,omitempty"`
	// Note says how the kept tail was chosen (plan.HistoryTail): figures
	// only, never conversation text.
	Note string `json:"note,omitempty"`
	// Log are the digests of the session log's blocks found in the
	// conversation (ApplyHistory separates the same ones).
	Log []string `json:"log,omitempty"`
	// TargetTokens is the size the summary aims at (plan.BlockTarget).
	TargetTokens int `json:"target_tokens,omitempty"`
	// ReflectKey holds the log's blocks for a reflection to condense
	// when the log outgrew its budget; empty otherwise.
	ReflectKey string `json:"reflect_key,omitempty"`
	// LogTokens is the log's size before this pass.
	LogTokens int `json:"log_tokens,omitempty"`
}

// DriftInput measures a summary against its source.
type DriftInput struct {
	Run        contract.Run `json:"run"`
	Step       string       `json:"step"`
	Pass       int          `json:"pass"`
	SourceKey  string       `json:"source_key"`
	SummaryKey string       `json:"summary_key"`
	// JudgeKey holds an LLM judge's verdict (llm.JudgeSchema) of a
	// history summary; empty: the deterministic checks decide.
	JudgeKey string `json:"judge_key,omitempty"`
}

// DriftResult is the verdict. The missing items stay in S3 and Postgres:
// they are conversation text.
type DriftResult struct {
	Recorded
	Score        float64 `json:"score"`
	Passed       bool    `json:"passed"`
	MissingCount int     `json:"missing_count"`
	MissingKey   string  `json:"missing_key,omitempty"`
	// Fabricated counts the quotes, paths, URLs and ids of the summary
	// that its source does not hold (digest.FabricationCheck).
	Fabricated int `json:"fabricated,omitempty"`
}

// PatchInput appends the still-missing items to a summary: the last,
// deterministic resort of the drift check.
type PatchInput struct {
	Run        contract.Run `json:"run"`
	Step       string       `json:"step"`
	SummaryKey string       `json:"summary_key"`
	MissingKey string       `json:"missing_key"`
}

// ApplyHistoryInput replaces the summarized messages with the summary.
type ApplyHistoryInput struct {
	Run        contract.Run `json:"run"`
	Step       string       `json:"step"`
	WorkKey    string       `json:"work_key"`
	Split      int          `json:"split"`
	SummaryKey string       `json:"summary_key"`
	// ArchiveKey is named in the three-tier design's recovery references.
	ArchiveKey string `json:"archive_key,omitempty"`
	// Ladder applies the budget ladder's history step (see HistoryInput).
	Ladder bool `json:"ladder,omitempty"`
	// Log are the digests of the log blocks HistoryPlan found.
	Log []string `json:"log,omitempty"`
	// ReflectionKey holds the reflection that replaces the log's blocks;
	// empty: the blocks stay as they are.
	ReflectionKey string `json:"reflection_key,omitempty"`
}

// CommitInput finishes a run.
type CommitInput struct {
	Run        contract.Run `json:"run"`
	WorkKey    string       `json:"work_key"`
	ArchiveKey string       `json:"archive_key"`
	// TokensBefore is the plan's measure of the input, as the workflow
	// passed it from the plan step (0 only for an empty conversation).
	TokensBefore int `json:"tokens_before,omitempty"`
	// LevelBefore is the plan's level of the input and Drift the run's
	// drift verdict (passed, repaired, patched; empty without a checked
	// summary): commit records both in the run's stats, so that the
	// finished run's answer is read from Postgres alone.
	LevelBefore string `json:"level_before,omitempty"`
	Drift       string `json:"drift,omitempty"`
	// Steps are the run's step records gathered by the workflow, written
	// with the commit.
	Steps     []store.Step `json:"steps,omitempty"`
	Watermark string       `json:"watermark,omitempty"`
	// DeleteOffloads removes offloads restored into the summary (offload-compact),
	// only after the commit.
	DeleteOffloads []string   `json:"delete_offloads,omitempty"`
	Passes         []PassStat `json:"passes,omitempty"`
	Model          string     `json:"model,omitempty"`
	PromptVersion  string     `json:"prompt_version,omitempty"`
	// HistoryFailed marks offload-compact's "success false": the summary failed
	// and the history was left as it was.
	HistoryFailed bool `json:"history_failed,omitempty"`
	// Ladder is set when the budget ladder ran (runs started with the
	// budget check); it only shapes the over-limit reason.
	Ladder bool `json:"ladder,omitempty"`
	// Unit is "chars" or "tokens": the unit of every size of the run.
	Unit string `json:"unit,omitempty"`
	// Preserved is how many messages the last history summary kept after
	// it (offload-compact's preserved_count); 0 when no summary was made.
	Preserved int `json:"preserved,omitempty"`
	// HandoffSummaryKey holds the handoff's summary, made by the
	// summarizer and drift-checked (PrepareHandoff); empty: commit makes
	// the structured offline one when it makes a handoff.
	HandoffSummaryKey string `json:"handoff_summary_key,omitempty"`
	// Log are the session log blocks the run's history passes appended;
	// commit records those its output still holds.
	Log []store.LogBlock `json:"log,omitempty"`
	// Degraded are the fallbacks the run went through, in order (see
	// contract.Outcome.Degraded): plain words, never an error's text.
	Degraded []string `json:"degraded,omitempty"`
}

// HandoffInput prepares the summary of a CRITICAL handoff.
type HandoffInput struct {
	Run     contract.Run `json:"run"`
	WorkKey string       `json:"work_key"`
}

// HandoffPrep is the transcript a handoff summarizes (plan.HandoffTranscript).
type HandoffPrep struct {
	Recorded
	// Skip is set when there is nothing to hand off.
	Skip          bool   `json:"skip,omitempty"`
	TranscriptKey string `json:"transcript_key,omitempty"`
}

// CommitResult is the run's outcome.
type CommitResult struct {
	Recorded
	// Committed is set when this call marked the run final (a retried
	// commit finds it final already).
	Committed bool `json:"committed"`
	// Outcome is the run's outcome as its row now reads (store.OutcomeOf):
	// the workflow's result.
	Outcome contract.Outcome `json:"outcome"`
	// Notify is set when the run's tenant has webhook endpoints: the
	// workflow then starts the delivery of its final state.
	Notify bool `json:"notify,omitempty"`
}

// FailResult is what marking a run failed learned.
type FailResult struct {
	// Notify: see CommitResult.Notify.
	Notify bool `json:"notify,omitempty"`
}

// FailInput marks a run failed.
type FailInput struct {
	RunID string `json:"run_id"`
	// Class and Message are what the run shows its caller (see
	// Describe).
	Class   store.ErrorClass `json:"class,omitempty"`
	Message string           `json:"message"`
	// Steps are the run's step records gathered by the workflow, written
	// with the failure.
	Steps []store.Step `json:"steps,omitempty"`
}
