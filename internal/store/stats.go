package store

import (
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
)

// PassStat reports one pass of a run (contract.PassStat).
type PassStat = contract.PassStat

// RunStats is what a run's commit records in runs.stats, and the one type
// every reader of it uses (status report, finished-run answer, replay,
// web UI). Sizes are in Unit ("tokens", or react-two-layer's "chars").
type RunStats struct {
	// Format is the conversation's wire format (openai, anthropic, react).
	Format         string     `json:"format,omitempty"`
	Passes         []PassStat `json:"passes"`
	UsageAfter     float64    `json:"usage_after"`
	AgentModel     string     `json:"agent_model"`
	ContextLimit   int        `json:"context_limit"`
	Encoding       string     `json:"encoding"`
	Unit           string     `json:"unit"`
	HistoryFailed  bool       `json:"history_failed"`
	Recommendation string     `json:"recommendation"`
	ArchiveKey     string     `json:"archive_key"`
	OverLimit      bool       `json:"over_limit"`
	// OverLimitReason says why a run ended over_limit (empty otherwise).
	OverLimitReason string `json:"over_limit_reason,omitempty"`
	PreservedCount  int    `json:"preserved_count"`
	DeletedOffloads int    `json:"deleted_offloads"`
	// ContextCompression is the ReAct two-layer design's {"enabled", "stats"} block of a
	// ReAct run, as rendered into its output.
	ContextCompression json.RawMessage `json:"context_compression,omitempty"`
	// HandoffKey and HandoffSHA256 name the fresh session's conversation
	// of a run that ended CRITICAL, over its limit or at a checkpoint.
	HandoffKey    string `json:"handoff_key,omitempty"`
	HandoffSHA256 string `json:"handoff_sha256,omitempty"`
	// LevelBefore is the input's level (the row's level is the output's);
	// Drift the run's drift verdict as the workflow decided it (passed,
	// repaired, patched). Both empty in runs committed before they were
	// recorded.
	LevelBefore string `json:"level_before,omitempty"`
	Drift       string `json:"drift,omitempty"`
	// LevelReason says why a run ended RED or above (its output's level)
	// when no step that keeps the recent turns' structure could bring it
	// lower; empty under RED.
	LevelReason string `json:"level_reason,omitempty"`
	// Watermark is the watermark the run reached ("" none). A run moves
	// its session's watermark to it when it commits; a replay only when
	// it is promoted (Store.Promote).
	Watermark string `json:"watermark,omitempty"`
	// Cache and SessionLog: see contract.Outcome.
	Cache      *contract.CacheFigures `json:"cache,omitempty"`
	SessionLog *contract.LogFigures   `json:"session_log,omitempty"`
	Cost       *contract.CostFigures  `json:"cost,omitempty"`
	// DegradedReasons are the fallbacks the run went through (see
	// contract.Outcome.Degraded).
	DegradedReasons []string `json:"degraded_reasons,omitempty"`
	// TokenCounting is how the output's size was counted (see
	// contract.Outcome.TokenCounting).
	TokenCounting string `json:"token_counting,omitempty"`
}

// ParseStats reads the run's stats; a run without stats (not committed)
// has zero stats.
func (r Run) ParseStats() (RunStats, error) {
	var st RunStats
	if len(r.Stats) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(r.Stats, &st); err != nil {
		return RunStats{}, fmt.Errorf("stats of run %s: %w", r.ID, err)
	}
	return st, nil
}

// Outcome is run r's outcome, read from its row and stats. A run that did
// not commit (failed or still live) has its status and error
// only.
func (r Run) Outcome() (contract.Outcome, error) {
	st, err := r.ParseStats()
	if err != nil {
		return contract.Outcome{}, err
	}
	return OutcomeOf(r, st), nil
}

// OutcomeOf maps a run's row r and its stats st to its outcome: the one
// mapping, used by every reader and by the commit step for the outcome it
// returns, so that the workflow's result and every later answer agree.
func OutcomeOf(r Run, st RunStats) contract.Outcome {
	out := contract.Outcome{RunID: r.ID, Status: string(r.Status), Error: r.Error, ErrorClass: string(r.ErrorClass),
		Passes: []PassStat{}}
	if !r.Status.Committed() {
		return out
	}
	out.TokensBefore, out.TokensAfter, out.Ratio = int(r.TokensBefore), int(r.TokensAfter), r.Ratio
	out.LevelAfter, out.ArchiveKey, out.OutputKey, out.OutputSHA256 = r.Level, r.ArchiveKey, r.OutputKey, r.OutputSHA256
	if out.ArchiveKey == "" {
		out.ArchiveKey = st.ArchiveKey
	}
	if st.Passes != nil {
		out.Passes = st.Passes
	}
	out.Format, out.LevelBefore, out.Drift = st.Format, st.LevelBefore, st.Drift
	out.HistoryFailed, out.OverLimit, out.OverLimitReason = st.HistoryFailed, st.OverLimit, st.OverLimitReason
	out.Unit, out.ContextLimit, out.Counter, out.LevelReason = st.Unit, st.ContextLimit, st.Encoding, st.LevelReason
	out.TokenCounting = st.TokenCounting
	out.PreservedCount, out.DeletedOffloads = st.PreservedCount, st.DeletedOffloads
	out.Recommendation, out.ContextCompression = st.Recommendation, st.ContextCompression
	out.HandoffKey, out.HandoffSHA256 = st.HandoffKey, st.HandoffSHA256
	out.Cache, out.SessionLog, out.Cost = st.Cache, st.SessionLog, st.Cost
	out.Degraded, out.DegradedReasons = len(st.DegradedReasons) > 0, st.DegradedReasons
	out.FreedTokens = max(out.TokensBefore-out.TokensAfter, 0)
	out.Success = r.Status == RunSucceeded && !out.HistoryFailed
	return out
}
