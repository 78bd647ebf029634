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
