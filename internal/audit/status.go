package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/compress"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// HistoryRow is one applied pass of one run: a line of the three-tier
// status report's "Compression History" table.
type HistoryRow struct {
	Time        time.Time `json:"time"`
	RunID       string    `json:"run_id"`
	Type        string    `json:"type"`
	Count       int       `json:"count"`
	TokensSaved int       `json:"tokens_saved"`
	// Replay is set for a pass of a replay that was not promoted: what-if
	// audit data, not the session's life.
	Replay bool `json:"replay,omitempty"`
}

// SessionStatus is the three-tier context status report for one session.
type SessionStatus struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// LastRunID is the last succeeded run, whose output the figures
	// describe and the agent continues from (a promoted replay counts as
	// its session's run); "" when no run succeeded yet.
	LastRunID    string    `json:"last_run_id,omitempty"`
	Time         time.Time `json:"time"`
	Tokens       int64     `json:"tokens"`
	ContextLimit int       `json:"context_limit"`
	// Usage is a fraction (0.5 is 50%).
	Usage          float64 `json:"usage"`
	Level          string  `json:"level"`
	Recommendation string  `json:"recommendation"`
	// Offloads and OffloadTokens are the offloaded results still live.
	Offloads      int `json:"offloads"`
	OffloadTokens int `json:"offload_tokens"`
	// Truncations counts tool inputs truncated (tier 2) over all runs;
	// TruncatedTokens is what that saved.
	Truncations     int `json:"truncations"`
	TruncatedTokens int `json:"truncated_tokens"`
	// Summarisations counts applied summary passes over all runs: history
	// summaries, map-reduce and layer-2 result compression.
	Summarisations int `json:"summarisations"`
	// Runs counts the session's runs by status; Replays the replays among
	// them, which become the session's state only when promoted.
	Runs    map[string]int `json:"runs"`
	Replays int            `json:"replays"`
	// Promotions are the replays promoted to the session's state, oldest
	// first.
	Promotions []store.Promotion `json:"promotions"`
	// Breaker is the session's loop breaker, when open.
	Breaker   *store.Breaker `json:"breaker,omitempty"`
	History   []HistoryRow   `json:"history"`
	Watermark string         `json:"watermark,omitempty"`
}

// summaryPasses are the passes that summarise with an LLM (or its
// fallback).
var summaryPasses = []string{"history", "map-reduce", "global-results"}

// Status reports a session's context status from its last succeeded run,
// its live offloads and its watermark, with the compression history of
// every succeeded run. A session without runs of tenant is ErrNotFound.
func (s *Service) Status(ctx context.Context, tenant, session string) (SessionStatus, error) {
	if err := blob.ValidateTenant(tenant); err != nil {
		return SessionStatus{}, fmt.Errorf("status: %w", err)
	}
	if strings.TrimSpace(session) == "" {
		return SessionStatus{}, fmt.Errorf("status: session is empty")
	}
	runs, err := s.allRuns(ctx, store.RunFilter{Tenant: tenant, Session: session}, 0)
	if err != nil {
		return SessionStatus{}, err
	}
	if len(runs) == 0 {
		return SessionStatus{}, fmt.Errorf("session %s: %w", session, ErrNotFound)
	}
	promotions, err := s.Store.Promotions(ctx, tenant, session)
	if err != nil {
		return SessionStatus{}, err
	}
	promoted := map[string]bool{}
	for _, p := range promotions {
		promoted[p.RunID] = true
	}
	st := SessionStatus{Tenant: tenant, Session: session, Time: time.Now().UTC(), Runs: map[string]int{}, History: []HistoryRow{},
		Promotions: promotions}
	// Oldest first, for the history table.
	slices.Reverse(runs)
	for _, r := range runs {
		st.Runs[string(r.Status)]++
		if r.ReplayOf != "" {
			st.Replays++
		}
		replay := r.ReplayOf != "" && !promoted[r.ID]
		if !r.Status.Committed() {
			continue
		}
		stats, err := r.ParseStats()
		if err != nil {
			return SessionStatus{}, err
		}
		if !replay {
			// A what-if replay is audit data: the session's current state
			// is its last real or promoted run.
			st.LastRunID, st.Tokens, st.Usage, st.ContextLimit = r.ID, r.TokensAfter, stats.UsageAfter, stats.ContextLimit
			st.Level, st.Recommendation = r.Level, stats.Recommendation
		}
		for _, p := range stats.Passes {
			if !p.Applied {
				continue
			}
			st.History = append(st.History, HistoryRow{Time: r.FinishedAt, RunID: r.ID, Type: p.Name, Count: p.Count, TokensSaved: p.TokensSaved, Replay: replay})
			if replay {
				continue
			}
			switch {
			case p.Name == "truncate-inputs":
				st.Truncations += p.Count
				st.TruncatedTokens += p.TokensSaved
			case slices.Contains(summaryPasses, p.Name):
				st.Summarisations++
			}
		}
	}
	if st.LastRunID != "" {
		if st.Level == "" {
			st.Level = string(compress.LevelFor(st.Usage))
		}
		if st.Recommendation == "" {
			st.Recommendation = compress.Recommendation(compress.Level(st.Level))
		}
	}
	offloads, err := s.Store.ListOffloads(ctx, tenant, session, false)
	if err != nil {
		return SessionStatus{}, err
	}
	for _, o := range offloads {
		st.Offloads++
		st.OffloadTokens += o.Tokens
	}
	if st.Watermark, err = s.Store.GetWatermark(ctx, tenant, session); err != nil {
		return SessionStatus{}, err
	}
	if s.Breaker.Enabled() {
		b, err := s.Store.SessionBreaker(ctx, tenant, session, s.Breaker, time.Now(), "")
		if err != nil {
			return SessionStatus{}, err
		}
		if b.Open {
			st.Breaker = &b
		}
	}
	return st, nil
}
