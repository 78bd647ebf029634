package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Only S3 keys and small metadata cross Temporal: every type in this file
// is an activity input or result, and none of them carries conversation
// text. Texts travel as S3 keys.

// Recorded is embedded in every step's result: the record of the step's
// successful attempt, which the workflow writes with the run's end.
type Recorded struct {
	StepRecord *store.Step `json:"step_record,omitempty"`
}

// TakeStepRecord returns the record and clears it, so that a result the
// workflow passes on to another step does not carry it again.
func (r *Recorded) TakeStepRecord() *store.Step {
	st := r.StepRecord
	r.StepRecord = nil
	return st
}

// PlanInput starts a run.
type PlanInput struct {
	Run         contract.Run `json:"run"`
	InputKey    string       `json:"input_key"`
	InputSHA256 string       `json:"input_sha256"`
}

// PlanResult is what the plan step learned about the input.
type PlanResult struct {
	Recorded
	Format       string  `json:"format"`
	Messages     int     `json:"messages"`
	Encoding     string  `json:"encoding"`
	ContextLimit int     `json:"context_limit"`
	TokensBefore int     `json:"tokens_before"`
	CharsBefore  int     `json:"chars_before"`
	UsageBefore  float64 `json:"usage_before"`
	LevelBefore  string  `json:"level_before"`
	// Skip is set when the preset has nothing to do (debug verbosity, an
	// empty conversation); the run still commits the input unchanged.
	Skip   bool   `json:"skip"`
	Reason string `json:"reason,omitempty"`
	// Preset is the run's resolved preset. The workflow decides from this
	// recorded copy, never by resolving it again, so that a change of a
	// built-in default cannot make a running or replayed history diverge.
	Preset policy.Preset `json:"preset"`
	// Archive is the verified copy of the original, when the input asked
	// the plan step to make it.
	Archive *ArchiveResult `json:"archive,omitempty"`
}

// ArchiveInput archives the original.
type ArchiveInput struct {
	Run         contract.Run `json:"run"`
	InputKey    string       `json:"input_key"`
	InputSHA256 string       `json:"input_sha256"`
}

// ArchiveResult is where the verified copy of the original lives.
type ArchiveResult struct {
	Recorded
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// DeterministicInput runs every pass that needs no LLM.
type DeterministicInput struct {
	Run     contract.Run `json:"run"`
	WorkKey string       `json:"work_key"`
}

// Target is one tool result an LLM pass will rewrite. TextKey holds the
// result text and ContextKey the turn's context (thought and action).
type Target struct {
	Msg        int    `json:"msg"`
	Block      int    `json:"block"`
	Chars      int    `json:"chars"`
	TextKey    string `json:"text_key"`
	ContextKey string `json:"context_key,omitempty"`
}

// PassStat reports one pass.
type PassStat = store.PassStat

// DeterministicResult is the working conversation after the cheap passes
// and the large results that need map-reduce.
type DeterministicResult struct {
	Recorded
	WorkKey      string     `json:"work_key"`
	Tokens       int        `json:"tokens"`
	Usage        float64    `json:"usage"`
	Passes       []PassStat `json:"passes"`
	Watermark    string     `json:"watermark,omitempty"`
	LargeResults []Target   `json:"large_results,omitempty"`
	// Done is set when usage is at or below the preset's target, so the
	// adaptive preset stops before any LLM pass.
	Done bool `json:"done"`
}

// Budget ladder stages run by FitBudget.
const (
	FitOffload  = "offload"
	FitTruncate = "truncate"
	// FitRelieve offloads until a run that fits its goal is under RED.
	FitRelieve = "relieve"
	// FitOffloadSmall offloads the small results left over the goal
	// after truncation.
	FitOffloadSmall = "offload-small"
)

// FitInput runs one deterministic step of the budget ladder.
type FitInput struct {
	Run     contract.Run `json:"run"`
	WorkKey string       `json:"work_key"`
	// Stage is FitOffload, FitTruncate or FitRelieve.
	Stage string `json:"stage"`
	// ArchiveKey is named in truncation notes.
	ArchiveKey string `json:"archive_key,omitempty"`
}

// FitResult is the working conversation after a ladder step.
type FitResult struct {
	Recorded
	WorkKey string   `json:"work_key"`
	Tokens  int      `json:"tokens"`
	Pass    PassStat `json:"pass"`
	// AboveGoal is set while the conversation is still over the ladder's
	// goal, so the next step runs.
	AboveGoal bool `json:"above_goal"`
	// HistoryAllowed is false for a ReAct trajectory, which never drops a
	// turn.
	HistoryAllowed bool `json:"history_allowed"`
	// Hopeless is set when what no step may cut (the user's words, the
	// system prompt) is over the limit by itself: the ladder stops.
	Hopeless bool `json:"hopeless,omitempty"`
}

// ChunkInput splits one large result into chunks.
type ChunkInput struct {
	Run     contract.Run `json:"run"`
	Step    string       `json:"step"`
	TextKey string       `json:"text_key"`
}

// ChunkResult lists the chunk keys in order.
type ChunkResult struct {
	Recorded
	Keys  []string `json:"keys"`
	Chars []int    `json:"chars"`
}

// SummarizeInput asks the summarizer for one text.
type SummarizeInput struct {
	Run  contract.Run `json:"run"`
	Step string       `json:"step"`
	// Prompt names the prompt file: chunk, merge, result, history, brief,
	// session, repair.
	Prompt       string `json:"prompt"`
	SourceKey    string `json:"source_key"`
	ContextKey   string `json:"context_key,omitempty"`
	MissingKey   string `json:"missing_key,omitempty"`
	ArchiveKey   string `json:"archive_key,omitempty"`
	TargetChars  int    `json:"target_chars,omitempty"`
	TargetTokens int    `json:"target_tokens,omitempty"`
	// SummarizerModel is the resolved preset's summarizer model ("" keeps
	// the worker's), set by the workflow in place of Run.Resolved, which
	// it leaves out of this regular activity's recorded input. Nil for
	// a caller that sets neither: the step resolves the preset.
	SummarizerModel *string `json:"summarizer_model,omitempty"`
}

// SummarizeResult is where the summary was written.
type SummarizeResult struct {
	Recorded
	Key           string `json:"key"`
	Chars         int    `json:"chars"`
	Model         string `json:"model"`
	PromptVersion string `json:"prompt_version"`
	Fallback      string `json:"fallback,omitempty"`
}

// Offline reports a summary made without an LLM (the offline summarizer,
// a fallback or a patch): it only copies from its source.
func (r SummarizeResult) Offline() bool {
	return r.Fallback != "" || r.Model == llm.ExtractiveModel
}

// FallbackInput asks for the no-LLM fallback of a summary.
type FallbackInput struct {
	Run         contract.Run `json:"run"`
	Step        string       `json:"step"`
	SourceKey   string       `json:"source_key"`
	TargetChars int          `json:"target_chars"`
	// Mode is "extractive" or "truncate" (seed 000's first N chars).
	Mode string `json:"mode"`
	// Prompt is the summary's prompt when it is a structured one
	// (history, session, brief): the extractive fallback then fills the
	// same sections the LLM would (llm.Extractive), not bare lines.
	Prompt string `json:"prompt,omitempty"`
	// ArchiveKey is named in a session summary's recovery references.
	ArchiveKey string `json:"archive_key,omitempty"`
}

// MergeInput joins chunk summaries in order.
type MergeInput struct {
	Run  contract.Run `json:"run"`
	Step string       `json:"step"`
	Keys []string     `json:"keys"`
}

// MergeResult is the merged text.
type MergeResult struct {
	Recorded
	Key   string `json:"key"`
	Chars int    `json:"chars"`
}

// Replacement puts the text at TextKey in place of one tool result.
type Replacement struct {
	Msg     int    `json:"msg"`
	Block   int    `json:"block"`
	TextKey string `json:"text_key"`
}

// ApplyResultsInput rewrites tool results in the working conversation.
type ApplyResultsInput struct {
	Run          contract.Run  `json:"run"`
	Step         string        `json:"step"`
	WorkKey      string        `json:"work_key"`
	Replacements []Replacement `json:"replacements"`
}

// WorkResult is a new working conversation.
type WorkResult struct {
	Recorded
	WorkKey string  `json:"work_key"`
	Tokens  int     `json:"tokens"`
	Usage   float64 `json:"usage"`
}

// GlobalInput plans seed 000's layer 2 over the working conversation.
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
	// Kept is how many messages follow the summary (seed 002's
	// preserved_count).
	Kept int `json:"kept,omitempty"`
	// Note says how the kept tail was chosen (plan.HistoryTail): figures
	// only, never conversation text.
	Note string `json:"note,omitempty"`
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
	// ArchiveKey is named in seed 004's recovery references.
	ArchiveKey string `json:"archive_key,omitempty"`
	// Ladder applies the budget ladder's history step (see HistoryInput).
	Ladder bool `json:"ladder,omitempty"`
}

// CommitInput finishes a run.
type CommitInput struct {
	Run        contract.Run `json:"run"`
	WorkKey    string       `json:"work_key"`
	ArchiveKey string       `json:"archive_key"`
	// TokensBefore is the plan's measure of the input (0 in runs started
	// before it was passed: commit reads it from the run row).
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
	// DeleteOffloads removes offloads restored into the summary (seed 002),
	// only after the commit.
	DeleteOffloads []string   `json:"delete_offloads,omitempty"`
	Passes         []PassStat `json:"passes,omitempty"`
	Model          string     `json:"model,omitempty"`
	PromptVersion  string     `json:"prompt_version,omitempty"`
	// HistoryFailed marks seed 002's "success false": the summary failed
	// and the history was left as it was.
	HistoryFailed bool `json:"history_failed,omitempty"`
	// Ladder is set when the budget ladder ran (runs started with the
	// budget check); it only shapes the over-limit reason.
	Ladder bool `json:"ladder,omitempty"`
	// Unit is "chars" or "tokens": the unit of every size of the run.
	Unit string `json:"unit,omitempty"`
	// Preserved is how many messages the last history summary kept after
	// it (seed 002's preserved_count); 0 when no summary was made.
	Preserved int `json:"preserved,omitempty"`
	// HandoffSummaryKey holds the handoff's summary, made by the
	// summarizer and drift-checked (PrepareHandoff); empty: commit makes
	// the structured offline one when it makes a handoff.
	HandoffSummaryKey string `json:"handoff_summary_key,omitempty"`
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
	OutputKey    string  `json:"output_key"`
	OutputSHA256 string  `json:"output_sha256"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Ratio        float64 `json:"ratio"`
	LevelAfter   string  `json:"level_after"`
	Committed    bool    `json:"committed"`
	Deleted      int     `json:"deleted_offloads"`
	// OverLimit is set when the output is still over the model's limit:
	// the run ends over_limit, never succeeded, with the reason.
	OverLimit bool   `json:"over_limit,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	// Recommendation is seed 004's action for the level after.
	Recommendation string `json:"recommendation,omitempty"`
	// LevelReason says why a run ends RED or above (plan.LevelReason).
	LevelReason string `json:"level_reason,omitempty"`
	// HandoffKey holds seed 004's fresh-session conversation, made when a
	// run ends CRITICAL (or over its limit) or on a checkpoint event.
	HandoffKey    string `json:"handoff_key,omitempty"`
	HandoffSHA256 string `json:"handoff_sha256,omitempty"`
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
