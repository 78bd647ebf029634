package store

import (
	"encoding/json"
	"fmt"

	"github.com/ctxcompact/orchestrator/contract"
)

// PassStat reports one pass of a run (contract.PassStat).
type PassStat = contract.PassStat

// RunStats is what a run's commit records in runs.stats: the outcome's
// recorded figures (contract.Stats, answered as fields of the run's
// Outcome) and the few that only the store's readers use. A new outcome
// figure goes into contract.Stats, not here.
type RunStats struct {
	contract.Stats
	// UsageAfter is the output's share of the limit (the status report's
	// usage).
	UsageAfter float64 `json:"usage_after"`
	// AgentModel is the agent's model the run was measured for (a replay
	// of a run recorded before runs.agent_model reads it here).
	AgentModel string `json:"agent_model"`
	// Encoding is the outcome's Counter, under the name the stats have
	// always recorded it by.
	Encoding string `json:"encoding"`
	// Watermark is the watermark the run reached ("" none). A run moves
	// its session's watermark to it when it commits; a replay only when
	// it is promoted (Store.Promote).
	Watermark string `json:"watermark,omitempty"`
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
// The recorded figures (contract.Stats) are the outcome's as they are.
func OutcomeOf(r Run, st RunStats) contract.Outcome {
	out := contract.Outcome{RunID: r.ID, Status: string(r.Status), Error: r.Error, ErrorClass: string(r.ErrorClass),
		ErrorCause: r.ErrorCause, Stats: contract.Stats{Passes: []PassStat{}}}
	if !r.Status.Committed() {
		return out
	}
	out.Stats = st.Stats
	if out.Passes == nil {
		out.Passes = []PassStat{}
	}
	if r.ArchiveKey != "" {
		out.ArchiveKey = r.ArchiveKey
	}
	out.TokensBefore, out.TokensAfter, out.Ratio = int(r.TokensBefore), int(r.TokensAfter), r.Ratio
	out.LevelAfter, out.OutputKey, out.OutputSHA256 = r.Level, r.OutputKey, r.OutputSHA256
	out.Counter = st.Encoding
	out.Degraded = len(st.DegradedReasons) > 0
	out.FreedTokens = max(out.TokensBefore-out.TokensAfter, 0)
	out.Success = r.Status == RunSucceeded && !out.HistoryFailed
	return out
}
