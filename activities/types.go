package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// Only S3 keys and small metadata cross Temporal: every type of the
// types*.go files is an activity input or result, and none of them carries
// conversation text. Texts travel as S3 keys. This file holds what every
// step shares and the steps up to the tool results' passes: plan, archive,
// the deterministic passes, the budget ladder, map-reduce and the ReAct
// two-layer design's layer 2; types_history.go the history summary,
// types_drift.go the drift check, types_commit.go the end of a run
// (handoff, commit, failure).

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
	// Archive is the run's original as the plan step recorded it: the
	// input, which the gateway stored as its archive. Every plan that
	// succeeds sets it.
	Archive *ArchiveResult `json:"archive,omitempty"`
	// Final is the run's recorded outcome when the run had succeeded (or
	// ended over its limit) before this plan step: an earlier execution of its steps committed (or
	// failed) it in a workflow task that Temporal never recorded, the
	// worker cut off from Temporal after the commit (the chaos soak's
	// finding). The workflow ends with it instead of running again.
	Final *contract.Outcome `json:"final,omitempty"`
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
type PassStat = contract.PassStat

// LogBlock is a session log block a history summary appended: its
// digest and figures (store.LogBlock), which commit records.
type LogBlock = store.LogBlock

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
	return r.Fallback != "" || r.Model == offline.ExtractiveModel
}

// FallbackInput asks for the no-LLM fallback of a summary.
type FallbackInput struct {
	Run         contract.Run `json:"run"`
	Step        string       `json:"step"`
	SourceKey   string       `json:"source_key"`
	TargetChars int          `json:"target_chars"`
	// Mode is "extractive" or "truncate" (the ReAct two-layer design's first N chars).
	Mode string `json:"mode"`
	// Prompt is the summary's prompt when it is a structured one
	// (history, session, brief): the extractive fallback then fills the
	// same sections the LLM would (offline.Summarizer), not bare lines.
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
	// Log are the session log blocks a history summary appended (and
	// the reflection it made): digests and figures, for commit to record.
	Log []LogBlock `json:"log,omitempty"`
}
