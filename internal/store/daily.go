package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DailyRuns counts one tenant's runs that started on one UTC day, by
// outcome, for the audit overview.
type DailyRuns struct {
	// Day is the day's midnight, UTC.
	Day       time.Time
	Succeeded int
	OverLimit int
	Failed    int
	// Live counts the runs still pending or running.
	Live int
	// Replays counts the what-if replays among the day's runs (of any
	// outcome): a promoted replay is its session's run, not one.
	Replays int
	// TokensSaved adds up tokens_before - tokens_after of the day's
	// committed runs (succeeded or over_limit) that are their session's
	// state (RunPromotions.SessionState): a what-if replay saves nothing
	// in the session, a promoted one does, in place of the run it
	// repaired, which is left out so that the repair is counted once.
	TokensSaved int64
	// Promoted counts the promoted replays among the day's runs;
	// Degraded the runs that reached their result through a fallback.
	Promoted, Degraded int
	// SummarizerUSD adds up what the day's runs paid their summarizer,
	// NetSavingUSD what their compactions save the agents net of the
	// prompt cache they rewrite (cost figures; runs of the session's
	// state only, as TokensSaved).
	SummarizerUSD, NetSavingUSD float64
}

// Total is the number of the day's runs, whatever their outcome.
func (d DailyRuns) Total() int {
	return d.Succeeded + d.OverLimit + d.Failed + d.Live
}

// DailyRunStats returns, oldest first, one row per UTC day on which a run
// of tenant started at or after since. Days without runs have no row.
func (s *Store) DailyRunStats(ctx context.Context, tenant string, since time.Time) ([]DailyRuns, error) {
	op := "daily run stats of tenant " + tenant
	if err := requireNonEmpty(op, [2]string{"tenant", tenant}); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		select date_trunc('day', runs.started_at at time zone 'UTC') as day,
			count(*) filter (where status = 'succeeded'),
			count(*) filter (where status = 'over_limit'),
			count(*) filter (where status = 'failed'),
			count(*) filter (where status in ('pending', 'running')),
			count(*) filter (where runs.replay_of is not null and promoted.run_id is null),
			coalesce(sum(tokens_before - tokens_after)
				filter (where status in ('succeeded', 'over_limit')
					and ((runs.replay_of is null and repaired.run_id is null) or promoted.run_id is not null)), 0)::bigint,
			count(*) filter (where promoted.run_id is not null),
			count(*) filter (where coalesce(jsonb_array_length(runs.stats->'degraded_reasons'), 0) > 0),
			coalesce(sum((runs.stats->'cost'->>'summarizer_usd')::float8), 0),
			coalesce(sum((runs.stats->'cost'->>'net_saving_usd')::float8)
				filter (where (runs.replay_of is null and repaired.run_id is null) or promoted.run_id is not null), 0)
		from runs
		left join promotions promoted on promoted.run_id = runs.id
		left join promotions repaired on repaired.replay_of = runs.id
		where runs.tenant_id = $1 and runs.started_at >= $2
		group by day
		order by day`, tenant, since)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DailyRuns, error) {
		var d DailyRuns
		err := row.Scan(&d.Day, &d.Succeeded, &d.OverLimit, &d.Failed, &d.Live, &d.Replays, &d.TokensSaved,
			&d.Promoted, &d.Degraded, &d.SummarizerUSD, &d.NetSavingUSD)
		d.Day = time.Date(d.Day.Year(), d.Day.Month(), d.Day.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return days, nil
}
