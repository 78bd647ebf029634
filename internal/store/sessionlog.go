package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// LogBlock is one block of a session's append-only log (plan.LogView):
// its digest and figures, never its text.
type LogBlock struct {
	SHA256 string `json:"sha256"`
	// Label is the block's number ("3"), or the range a reflection
	// condensed ("1-4").
	Label  string `json:"label"`
	Tokens int    `json:"tokens"`
	// Reflection marks a block that condensed the earlier ones, whose
	// digests Condensed lists.
	Reflection bool     `json:"reflection,omitempty"`
	Condensed  []string `json:"condensed,omitempty"`
	// RunID is the run that appended it (set when read).
	RunID string `json:"run_id,omitempty"`
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// queueLogBlock queues the insert of run's log block l. It lands only
// while the run is live, so a retried commit adds nothing. A replay's
// blocks are recorded too: a digest changes nothing of the session until
// its text comes back in a conversation, which happens when the replay is
// promoted and the agent continues from its output.
func queueLogBlock(batch *pgx.Batch, run string, l LogBlock) error {
	if !hexDigest.MatchString(l.SHA256) {
		return fmt.Errorf("record log block of run %s: sha256 %q is not a hex SHA-256", run, l.SHA256)
	}
	for _, d := range l.Condensed {
		if !hexDigest.MatchString(d) {
			return fmt.Errorf("record log block of run %s: condensed %q is not a hex SHA-256", run, d)
		}
	}
	condensed := l.Condensed
	if condensed == nil {
		condensed = []string{}
	}
	batch.Queue(`insert into session_log (tenant_id, session_id, sha256, run_id, label, tokens, reflection, condensed)
		select r.tenant_id, r.session_id, $2, r.id, $3, $4, $5, $6 from runs r
		where r.id = $1 and r.status in ('pending', 'running')
		on conflict do nothing`, run, l.SHA256, Storable(l.Label), l.Tokens, l.Reflection, condensed)
	return nil
}

// SessionLog lists the blocks tenant's session's runs appended, oldest
// first (reflected blocks included: each stays a block of the session).
func (s *Store) SessionLog(ctx context.Context, tenant, session string) ([]LogBlock, error) {
	rows, err := s.pool.Query(ctx, `select sha256, label, tokens, reflection, condensed, run_id from session_log
		where tenant_id = $1 and session_id = $2 order by seq`, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("read session log of %s: %w", session, err)
	}
	blocks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LogBlock, error) {
		var l LogBlock
		err := row.Scan(&l.SHA256, &l.Label, &l.Tokens, &l.Reflection, &l.Condensed, &l.RunID)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read session log of %s: %w", session, err)
	}
	return blocks, nil
}

// Output names a run's committed output.
type Output struct {
	RunID  string
	Key    string
	SHA256 string
}

// LatestOutput is the output tenant's session continues from: its last
// committed run's (a promoted replay counts from its promotion; any other
// replay is a what-if and never does). ErrNotFound when the session has
// none.
func (s *Store) LatestOutput(ctx context.Context, tenant, session string) (Output, error) {
	var o Output
	err := s.pool.QueryRow(ctx, latestOutputSQL("$1", "$2"), tenant, session).Scan(&o.RunID, &o.Key, &o.SHA256)
	if errors.Is(err, pgx.ErrNoRows) {
		return Output{}, fmt.Errorf("latest output of session %s: %w", session, ErrNotFound)
	}
	if err != nil {
		return Output{}, fmt.Errorf("latest output of session %s: %w", session, err)
	}
	return o, nil
}

// latestOutputSQL selects the id, output key and output SHA-256 of the
// latest output of the session of tenant (both SQL expressions): the
// latest committed run's, a replay's only once promoted (from its
// promotion). LatestOutput reads it, and StartRun checks an incremental
// run's base against it.
func latestOutputSQL(tenant, session string) string {
	return `
		select lr.id, lr.output_key, lr.output_sha256 from runs lr
		left join promotions lp on lp.run_id = lr.id
		where lr.tenant_id = ` + tenant + ` and lr.session_id = ` + session + ` and lr.status in ('succeeded', 'over_limit') and lr.output_key <> ''
			and (lr.replay_of is null or lp.run_id is not null)
		order by coalesce(lp.promoted_at, lr.finished_at) desc, lr.id desc limit 1`
}
