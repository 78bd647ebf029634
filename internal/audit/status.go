package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
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
	// Promoted is set for a pass of a promoted replay, which is the
	// session's state. Superseded is set for a pass of the run it
	// repaired: the session's life until the promotion, but replaced by
	// the replay's passes over the same conversation, so that counting
	// both would count the same truncations and summaries twice. Neither
	// a replay's nor a superseded run's pass adds to the report's totals.
	Promoted   bool `json:"promoted,omitempty"`
	Superseded bool `json:"superseded,omitempty"`
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
	// Truncations counts tool inputs truncated (tier 2) over the runs
	// that are the session's state (see HistoryRow); TruncatedTokens is
	// what that saved.
	Truncations     int `json:"truncations"`
	TruncatedTokens int `json:"truncated_tokens"`
	// Summarisations counts the summaries those runs made (summaryPass):
	// history summaries, the budget ladder's, handoffs', map-reduce and
	// layer-2 result compression.
	Summarisations int `json:"summarisations"`
	// Runs counts the session's runs by status, replays included.
	// Replays counts the replays among them that were not promoted
	// (what-if audit data, not the session's state); PromotedReplays
	// the promoted ones, which are the session's runs.
	Runs            map[string]int `json:"runs"`
	Replays         int            `json:"replays"`
	PromotedReplays int            `json:"promoted_replays"`
	// Promotions are the replays promoted to the session's state, oldest
	// first.
	Promotions []store.Promotion `json:"promotions"`
	// Breaker is the session's loop breaker, when open.
	Breaker   *store.Breaker `json:"breaker,omitempty"`
	History   []HistoryRow   `json:"history"`
	Watermark string         `json:"watermark,omitempty"`
}

// summaryPasses are the passes that make a summary with an LLM (or its
// fallback): the history summary, the budget ladder's history step, the
// handoff's summary, map-reduce and layer-2 result compression. A
// session log's reflection ("…/reflect") condenses summaries already
// counted, without the summarizer, and is not one.
var summaryPasses = []string{"history", plan.LadderHistory, handoffSummaryPass, "map-reduce", "global-results"}

// handoffSummaryPass is the pass of a handoff's summary, and
// handoffReusedNote the note it has when the handoff reuses the run's
// own history summary (workflows' handoffSummary): no second summary
// was made then, so it is not counted twice.
const (
	handoffSummaryPass = "handoff/summary"
	handoffReusedNote  = "the run's history summary"
)

// summaryPass reports whether applied pass p made a summary.
func summaryPass(p store.PassStat) bool {
	if p.Name == handoffSummaryPass && p.Note == handoffReusedNote {
		return false
	}
	return slices.Contains(summaryPasses, p.Name)
}

// Status reports a session's context status from its last succeeded run,
// its live offloads and its watermark, with the compression history of
// every succeeded run. A session without runs of tenant is store.ErrNotFound.
func (s *Service) Status(ctx context.Context, tenant, session string) (SessionStatus, error) {
	if err := blob.ValidateTenant(tenant); err != nil {
		return SessionStatus{}, fmt.Errorf("status: %w", err)
	}
	if strings.TrimSpace(session) == "" {
		return SessionStatus{}, fmt.Errorf("status: session is empty")
	}
	if err := s.Store.CheckSessionGone(ctx, tenant, session); err != nil {
		return SessionStatus{}, fmt.Errorf("status: %w", err)
	}
	runs, err := s.allRuns(ctx, store.RunFilter{Tenant: tenant, Session: session}, 0)
	if err != nil {
		return SessionStatus{}, err
	}
	if len(runs) == 0 {
		return SessionStatus{}, fmt.Errorf("session %s: %w", session, store.ErrNotFound)
	}
	promotions, err := s.Store.Promotions(ctx, tenant, session)
	if err != nil {
		return SessionStatus{}, err
	}
	promoted := store.SessionPromotions(promotions)
	st := SessionStatus{Tenant: tenant, Session: session, Time: time.Now().UTC(), Runs: map[string]int{}, History: []HistoryRow{},
		Promotions: promotions}
	// Oldest first, for the history table.
	slices.Reverse(runs)
	for _, r := range runs {
		st.Runs[string(r.Status)]++
		replay := r.ReplayOf != "" && !promoted.Promoted(r.ID)
		switch {
		case replay:
			st.Replays++
		case r.ReplayOf != "":
			st.PromotedReplays++
		}
		superseded := promoted.Superseded(r.ID)
		if !r.Status.Committed() {
			continue
		}
		stats, err := r.ParseStats()
		if err != nil {
			return SessionStatus{}, err
		}
		if !replay && !superseded {
			// A what-if replay is audit data, and a repaired run was
			// replaced: the session's current state is its last real or
			// promoted run.
			st.LastRunID, st.Tokens, st.Usage, st.ContextLimit = r.ID, r.TokensAfter, stats.UsageAfter, stats.ContextLimit
			st.Level, st.Recommendation = r.Level, stats.Recommendation
		}
		for _, p := range stats.Passes {
			if !p.Applied {
				continue
			}
			st.History = append(st.History, HistoryRow{Time: r.FinishedAt, RunID: r.ID, Type: p.Name, Count: p.Count, TokensSaved: p.TokensSaved,
				Replay: replay, Promoted: r.ReplayOf != "" && !replay, Superseded: superseded})
			if replay || superseded {
				continue
			}
			switch {
			case p.Name == "truncate-inputs":
				st.Truncations += p.Count
				st.TruncatedTokens += p.TokensSaved
			case summaryPass(p):
				st.Summarisations++
			}
		}
	}
	if st.LastRunID != "" {
		if st.Level == "" {
			st.Level = string(strategy.LevelFor(st.Usage))
		}
		if st.Recommendation == "" {
			st.Recommendation = strategy.Recommendation(strategy.Level(st.Level))
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
