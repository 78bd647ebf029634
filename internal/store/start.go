package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RunStart is what the plan step learned about a run, and where it
// archived the original (empty when another step archives it).
type RunStart struct {
	RunPlan
	ArchiveKey    string
	ArchiveSHA256 string
}

// startRunSQL moves a live run to running with its plan figures and
// archive in one statement, creating the run (and its tenant and session)
// when the gateway did not. Zero figures keep the stored values; an
// archive is set only on a run that has none.
var startRunSQL = `
	with tenant as (insert into tenants (id) values ($2) on conflict do nothing),
	session as (insert into sessions (tenant_id, id, generation) values ($2, $3, ` + generationSQL("$2", "$3") + `) on conflict do nothing)
	insert into runs as r (id, tenant_id, session_id, event_id, trigger, replay_of, status,
		preset, model, prompt_version, level, input_key, tokens_before, chars_before, archive_key, archive_sha256)
	values ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9, $10, $11, $12, $13, $14, $15)
	on conflict (id) do update set
		status = 'running',
		preset = coalesce(nullif(excluded.preset, ''), r.preset),
		model = coalesce(nullif(excluded.model, ''), r.model),
		prompt_version = coalesce(nullif(excluded.prompt_version, ''), r.prompt_version),
		level = coalesce(nullif(excluded.level, ''), r.level),
		input_key = coalesce(nullif(excluded.input_key, ''), r.input_key),
		tokens_before = coalesce(nullif(excluded.tokens_before, 0), r.tokens_before),
		chars_before = coalesce(nullif(excluded.chars_before, 0), r.chars_before),
		archive_key = case when r.archive_key = '' then excluded.archive_key else r.archive_key end,
		archive_sha256 = case when r.archive_key = '' then excluded.archive_sha256 else r.archive_sha256 end,
		updated_at = now()
	where r.status in ('pending', 'running') and r.tenant_id = excluded.tenant_id and r.session_id = excluded.session_id
	returning archive_key, archive_sha256`

// StartRun marks run r running with what its plan step found, and its
// archive when st has one, in one round trip. It creates the run when it
// does not exist (a run submitted before the gateway recorded runs). A
// retry with the same values changes nothing new. A final run is an error
// wrapping ErrRunFinal; an archive other than the one recorded, or a run
// id of another tenant or session, is an error.
func (s *Store) StartRun(ctx context.Context, r Run, st RunStart) error {
	op := "start run " + r.ID
	if err := checkNewRun(r); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if (st.ArchiveKey == "") != (st.ArchiveSHA256 == "") {
		return fmt.Errorf("%s: archive key and sha256 go together", op)
	}
	var key, sha string
	err := s.pool.QueryRow(ctx, startRunSQL,
		r.ID, r.Tenant, r.Session, r.EventID, r.Trigger, nullIfEmpty(r.ReplayOf),
		st.Preset, st.Model, st.PromptVersion, st.Level, st.InputKey, st.TokensBefore, st.CharsBefore,
		st.ArchiveKey, st.ArchiveSHA256).Scan(&key, &sha)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.explainNotStarted(ctx, op, r)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if st.ArchiveKey != "" && (key != st.ArchiveKey || sha != st.ArchiveSHA256) {
		return fmt.Errorf("%s: already archived as %s (sha256 %s)", op, key, sha)
	}
	return nil
}

// explainNotStarted says why StartRun changed no row: the run is final,
// or its id belongs to another tenant or session.
func (s *Store) explainNotStarted(ctx context.Context, op string, r Run) error {
	var status, tenant, session string
	err := s.pool.QueryRow(ctx, `select status, tenant_id, session_id from runs where id = $1`, r.ID).Scan(&status, &tenant, &session)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	case tenant != r.Tenant || session != r.Session:
		return fmt.Errorf("%s: id already used by session %q/%q", op, tenant, session)
	default:
		return fmt.Errorf("%s: status %s: %w", op, status, ErrRunFinal)
	}
}
