package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
)

// The inputs and results of the history summary's steps (PrepareHistory,
// ApplyHistory). Like every type of the types*.go files, they carry S3
// keys and small figures, never conversation text.

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
	// LogRecorded are the digests of the blocks the session's runs recorded
	// (its log in Postgres), read once here and handed to the commit
	// (CommitInput.LogRecorded), which needs the same set; LogRead says
	// they were read (an empty log is still read).
	LogRecorded []string `json:"log_recorded,omitempty"`
	LogRead     bool     `json:"log_read,omitempty"`
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
