package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// Outcome is a run's result as every reader reports it: the HTTP answer
// of a finished run (which adds the conversation), `starter compact` and
// `starter replay` (as a table or as JSON) and the dev stack. It is read
// from the run's row and stats, the one source of truth.
type Outcome struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// ErrorClass says what kind of failure a failed run had
	// (store.ErrorClass); Error is then a message safe to show.
	ErrorClass    string  `json:"error_class,omitempty"`
	Format        string  `json:"format,omitempty"`
	TokensBefore  int     `json:"tokens_before"`
	TokensAfter   int     `json:"tokens_after"`
	Ratio         float64 `json:"ratio"`
	LevelBefore   string  `json:"level_before,omitempty"`
	LevelAfter    string  `json:"level_after,omitempty"`
	Drift         string  `json:"drift,omitempty"`
	HistoryFailed bool    `json:"history_failed"`
	// Success is offload-compact's success: the run committed under its limit
	// and the history summary, if one was wanted, was made.
	Success bool `json:"success"`
	// OverLimit is set when the output is still over the model's limit
	// (status over_limit); OverLimitReason says why.
	OverLimit       bool   `json:"over_limit"`
	OverLimitReason string `json:"over_limit_reason,omitempty"`
	// LevelReason says why the run ended RED or above when no step that
	// keeps the recent turns' structure could bring it lower.
	LevelReason string `json:"level_reason,omitempty"`
	// Unit is the unit of the sizes: "tokens", or "chars" (react-two-layer).
	Unit         string `json:"unit,omitempty"`
	ContextLimit int    `json:"context_limit,omitempty"`
	// Counter is what measured the sizes: the encoding, with the model
	// family's safety margin when it is not the model's own tokenizer
	// (e.g. "o200k_base×1.25 (claude)"), or "chars".
	Counter string `json:"counter,omitempty"`
	// FreedTokens, PreservedCount and DeletedOffloads are offload-compact's
	// CompactResult figures.
	FreedTokens     int `json:"freed_tokens"`
	PreservedCount  int `json:"preserved_count"`
	DeletedOffloads int `json:"deleted_offloads"`
	// ContextCompression is the ReAct two-layer design's stats for a ReAct trajectory; a
	// bare list of turns has no place for them in the conversation.
	ContextCompression json.RawMessage `json:"context_compression,omitempty"`
	// Recommendation is the three-tier design's action for the level after.
	Recommendation string           `json:"recommendation,omitempty"`
	ArchiveKey     string           `json:"archive_key,omitempty"`
	OutputKey      string           `json:"output_key,omitempty"`
	OutputSHA256   string           `json:"output_sha256,omitempty"`
	Passes         []store.PassStat `json:"passes"`
}

// Outcome reads the outcome of run r from its row and stats. A run that
// did not commit (failed, skipped or still live) has its status and error
// only.
func (s *Service) Outcome(ctx context.Context, r store.Run) (Outcome, error) {
	out := Outcome{RunID: r.ID, Status: string(r.Status), Error: r.Error, ErrorClass: string(r.ErrorClass), Passes: []store.PassStat{}}
	if !r.Status.Committed() {
		return out, nil
	}
	out.TokensBefore, out.TokensAfter, out.Ratio = int(r.TokensBefore), int(r.TokensAfter), r.Ratio
	out.LevelAfter, out.ArchiveKey, out.OutputKey, out.OutputSHA256 = r.Level, r.ArchiveKey, r.OutputKey, r.OutputSHA256
	st, err := r.ParseStats()
	if err != nil {
		return Outcome{}, err
	}
	if st.Passes != nil {
		out.Passes = st.Passes
	}
	out.Format, out.LevelBefore, out.Drift = st.Format, st.LevelBefore, st.Drift
	out.HistoryFailed, out.OverLimit, out.OverLimitReason = st.HistoryFailed, st.OverLimit, st.OverLimitReason
	out.Unit, out.ContextLimit, out.Counter, out.LevelReason = st.Unit, st.ContextLimit, st.Encoding, st.LevelReason
	out.PreservedCount, out.DeletedOffloads = st.PreservedCount, st.DeletedOffloads
	out.Recommendation, out.ContextCompression = st.Recommendation, st.ContextCompression
	out.FreedTokens = max(out.TokensBefore-out.TokensAfter, 0)
	out.Success = r.Status == store.RunSucceeded && !out.HistoryFailed
	if out.Drift == "" {
		// A run committed before its stats held the workflow's verdict.
		drift, err := s.Store.ListDrift(ctx, r.ID)
		if err != nil {
			return Outcome{}, fmt.Errorf("read drift of run %s: %w", r.ID, err)
		}
		if len(drift) > 0 {
			out.Drift = drift[len(drift)-1].Verdict
		}
	}
	return out, nil
}

// RunOutcome is the outcome of run runID of tenant (another tenant's run
// is ErrNotFound).
func (s *Service) RunOutcome(ctx context.Context, tenant, runID string) (Outcome, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return Outcome{}, err
	}
	return s.Outcome(ctx, r)
}
