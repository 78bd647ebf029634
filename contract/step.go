package contract

import "time"

// Step is one attempt of one pipeline step of a run (plan, archive, one
// chunk summary, merge, drift check, commit, ...). It crosses Temporal in
// the results of steps that succeed (see activities.Recorded), hence the
// JSON tags; it holds figures and names, never conversation text. The
// store keeps it as a run_steps row (store.Step is this type).
type Step struct {
	RunID            string        `json:"run_id"`
	Name             string        `json:"name"`    // unique within the run, e.g. "summarize-chunk-3"
	Attempt          int           `json:"attempt"` // the activity attempt, from Temporal
	Kind             string        `json:"kind"`    // e.g. "plan", "llm", "archive"
	InputSize        int64         `json:"input_size,omitempty"`
	OutputSize       int64         `json:"output_size,omitempty"`
	PromptTokens     int           `json:"prompt_tokens,omitempty"`
	CompletionTokens int           `json:"completion_tokens,omitempty"`
	Model            string        `json:"model,omitempty"`
	PromptVersion    string        `json:"prompt_version,omitempty"`
	Duration         time.Duration `json:"duration"`
	Error            string        `json:"error,omitempty"`
	At               time.Time     `json:"at"` // when the attempt ended; zero means now
	// Execution identifies one execution of the step, drawn once when
	// it ends: a write retried by that execution adds nothing, a step
	// executed again after its worker died (same attempt) adds its row.
	Execution string `json:"execution"`
}

// PassStat reports one pass of a run: what it did and the tokens it saved.
// It is the one type of the pass figures: the workflow's result, the
// run's stored stats (store.PassStat is this type) and the API's answers.
type PassStat struct {
	Name        string `json:"name"`
	Applied     bool   `json:"applied"`
	Count       int    `json:"count"`
	TokensSaved int    `json:"tokens_saved"`
	Note        string `json:"note,omitempty"`
}
