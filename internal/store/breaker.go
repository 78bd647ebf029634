package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BreakerRule is when a session's automatic compactions stop: after Runs
// consecutive runs, all within Window, that failed or freed less than
// MinFreed of their size. One agent product compacted 211 times in one
// session because nothing stopped it. A manual compaction is the probe:
// it always runs, and its success closes the breaker (it is then the
// latest run). MinInterval spaces automatic runs of one session.
type BreakerRule struct {
	Runs        int
	Window      time.Duration
	MinFreed    float64
	MinInterval time.Duration
}

// Enabled reports whether the rule can ever open a breaker: with no run
// count (BREAKER_RUNS=0) and no minimum interval it cannot, and nothing
// needs to be read.
func (r BreakerRule) Enabled() bool { return r.Runs > 0 || r.MinInterval > 0 }

// Breaker is the state of a session's breaker.
type Breaker struct {
	Open   bool      `json:"open"`
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitempty"`
}

// SessionBreaker reads the breaker of a session from its latest runs
// (replays excluded: they are audit data, not the session's life) for an
// event whose conversation has SHA-256 input. The breaker stops a loop,
// not a long session: the runs must have failed or freed too little, and
// the event must bring nothing new, its conversation being the request
// or the output of one of those runs. A session whose agent keeps
// appending messages always gets its run (which fits, or ends over_limit
// with a handoff). An empty input reads the breaker as it stands for a
// repeat (the session's status).
func (s *Store) SessionBreaker(ctx context.Context, tenant, session string, rule BreakerRule, now time.Time, input string) (Breaker, error) {
	if !rule.Enabled() {
		return Breaker{}, nil
	}
	n := max(rule.Runs, 1)
	rows, err := s.pool.Query(ctx, `
		select status, tokens_before, tokens_after, started_at, trigger, input_sha256, output_sha256 from runs
		where tenant_id = $1 and session_id = $2 and replay_of is null
		order by started_at desc, id desc limit $3`, tenant, session, n)
	if err != nil {
		return Breaker{}, fmt.Errorf("read breaker of %s/%s: %w", tenant, session, err)
	}
	type runRow struct {
		status        RunStatus
		before, after int64
		started       time.Time
		trigger       string
		in, out       string
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runRow, error) {
		var r runRow
		err := row.Scan(&r.status, &r.before, &r.after, &r.started, &r.trigger, &r.in, &r.out)
		return r, err
	})
	if err != nil {
		return Breaker{}, fmt.Errorf("read breaker of %s/%s: %w", tenant, session, err)
	}
	if len(runs) > 0 && rule.MinInterval > 0 && runs[0].started.Add(rule.MinInterval).After(now) {
		return Breaker{Open: true, Until: runs[0].started.Add(rule.MinInterval),
			Reason: fmt.Sprintf("the session's last run started less than %s ago (minimum interval between automatic runs)", rule.MinInterval)}, nil
	}
	if rule.Runs <= 0 || len(runs) < rule.Runs {
		return Breaker{}, nil
	}
	for _, r := range runs {
		if now.Sub(r.started) > rule.Window {
			return Breaker{}, nil
		}
		bad := r.status == RunFailed
		if r.status.Committed() && r.before > 0 {
			bad = float64(r.before-r.after)/float64(r.before) < rule.MinFreed
		}
		if !bad {
			return Breaker{}, nil
		}
	}
	repeat := input == ""
	for _, r := range runs {
		repeat = repeat || input == r.in || input == r.out
	}
	if !repeat {
		return Breaker{}, nil
	}
	oldest := runs[len(runs)-1].started
	return Breaker{Open: true, Until: oldest.Add(rule.Window),
		Reason: fmt.Sprintf("the session's last %d runs within %s failed or freed less than %.0f%%: an automatic event that brings nothing new (the request or output of one of them again) is refused; a manual compaction probes, and its success closes the breaker",
			rule.Runs, rule.Window, rule.MinFreed*100)}, nil
}

// EventRun returns the run id an event id of the tenant's session was
// claimed for, or "" when it was never submitted.
func (s *Store) EventRun(ctx context.Context, tenant, session, eventID string) (string, error) {
	var run string
	err := s.pool.QueryRow(ctx, `select run_id from events where tenant_id = $1 and session_id = $2 and event_id = $3`,
		tenant, session, eventID).Scan(&run)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read event %s: %w", eventID, err)
	}
	return run, nil
}
