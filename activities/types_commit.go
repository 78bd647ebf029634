package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// The inputs and results of the steps that end a run: the handoff's
// summary (PrepareHandoff), the commit (Commit) and the failure (FailRun).
// Like every type of the types*.go files, they carry S3 keys and small
// figures, never conversation text.

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
	// LogRecorded are the session log's recorded blocks as the history pass
	// read them (HistoryPlan.LogRecorded), when LogRead: the commit
	// then does not read the log again.
	LogRecorded []string `json:"log_recorded,omitempty"`
	LogRead     bool     `json:"log_read,omitempty"`
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
	// Cause is why the dependency call behind the failure failed (see
	// Cause); "" when it has none.
	Cause string `json:"cause,omitempty"`
	// Steps are the run's step records gathered by the workflow, written
	// with the failure.
	Steps []store.Step `json:"steps,omitempty"`
}
