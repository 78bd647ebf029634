package activities

import (
	"github.com/ctxcompact/orchestrator/contract"
)

// The inputs and results of the drift check of a summary (CheckDrift) and
// of its last resort (Patch). Like every type of the types*.go files, they
// carry S3 keys and small figures, never conversation text: the missing
// items themselves stay in S3 and Postgres.

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
	// Offline says the summary is the product's own deterministic one
	// (it only copies, and trims in its own order under its budget): the
	// last-errors check, which holds a model to the errors it was given,
	// does not apply to it.
	Offline bool `json:"offline,omitempty"`
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
	// that its source does not hold (drift.FabricationCheck).
	Fabricated int `json:"fabricated,omitempty"`
	// PatchOnly says the summary failed only because it left out some
	// of the last errors still open: verbatim lines, which the patch
	// appends as they are, without a repair pass rewriting the summary.
	PatchOnly bool `json:"patch_only,omitempty"`
}

// PatchInput appends the still-missing items to a summary: the last,
// deterministic resort of the drift check.
type PatchInput struct {
	Run        contract.Run `json:"run"`
	Step       string       `json:"step"`
	SummaryKey string       `json:"summary_key"`
	MissingKey string       `json:"missing_key"`
}
