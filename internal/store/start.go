package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RunStart is what the plan step learned about a run, and its archived
// original: the object the gateway stored as the run's input.
type RunStart struct {
	RunPlan
	ArchiveKey    string
	ArchiveSHA256 string
}

// startRunSQL moves a live run the gateway recorded to running with its
// plan figures and archive in one statement. Zero figures keep the stored
// values; an archive is set only on a run that has none.
var startRunSQL = `
	update runs as r set
		status = 'running',
		preset = coalesce(nullif($4::text, ''), r.preset),
		model = coalesce(nullif($5::text, ''), r.model),
		prompt_version = coalesce(nullif($6::text, ''), r.prompt_version),
		level = coalesce(nullif($7::text, ''), r.level),
		tokens_before = coalesce(nullif($8::bigint, 0), r.tokens_before),
		chars_before = coalesce(nullif($9::bigint, 0), r.chars_before),
		archive_key = case when r.archive_key = '' then $10::text else r.archive_key end,
		archive_sha256 = case when r.archive_key = '' then $11::text else r.archive_sha256 end,
		updated_at = now()
	where r.id = $1 and r.tenant_id = $2 and r.session_id = $3 and r.status in ('pending', 'running')
		and ` + baseIsLatestSQL + `
	returning archive_key, archive_sha256`

// baseIsLatestSQL holds for a run (r) that continues no base, or whose
// base is still its session's latest output when it starts: another run
// of the session (a whole conversation, a promoted replay) may have
// committed since the event was accepted, and an output built on the
// older base would fork the session. A run already running passed it.
var baseIsLatestSQL = `(r.base_run_id is null or r.status = 'running' or
		r.base_run_id = (select id from (` + latestOutputSQL("r.tenant_id", "r.session_id") + `) latest))`

// ErrBaseSuperseded is StartRun refusing an incremental run whose base
// is no longer its session's latest output.
var ErrBaseSuperseded = errors.New("the run's base is no longer the session's latest output")

// StartRun marks run id of tenant and session running with what its plan
// step found, and its archive when st has one, in one round trip. The
// gateway recorded the run when it accepted the event; StartRun never
// creates one. A retry with the same values changes nothing new. A final
// run is an error wrapping ErrRunFinal, an unknown one ErrNotFound; an
// archive other than the one recorded, or a run id of another tenant or
// session, is an error.
func (s *Store) StartRun(ctx context.Context, id, tenant, session string, st RunStart) error {
	op := "start run " + id
	if err := requireNonEmpty(op, [2]string{"id", id}, [2]string{"tenant", tenant}, [2]string{"session", session}); err != nil {
		return err
	}
	if (st.ArchiveKey == "") != (st.ArchiveSHA256 == "") {
		return fmt.Errorf("%s: archive key and sha256 go together", op)
	}
	var key, sha string
	err := s.pool.QueryRow(ctx, startRunSQL, id, tenant, session,
		st.Preset, st.Model, st.PromptVersion, st.Level, st.TokensBefore, st.CharsBefore,
		st.ArchiveKey, st.ArchiveSHA256).Scan(&key, &sha)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.explainNotStarted(ctx, op, id, tenant, session)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if st.ArchiveKey != "" && (key != st.ArchiveKey || sha != st.ArchiveSHA256) {
		return fmt.Errorf("%s: already archived as %s (sha256 %s)", op, key, sha)
	}
	return nil
}

// explainNotStarted says why StartRun changed no row: the run does not
// exist, is final, or its id belongs to another tenant or session.
func (s *Store) explainNotStarted(ctx context.Context, op, id, tenant, session string) error {
	var status, storedTenant, storedSession, base string
	err := s.pool.QueryRow(ctx, `select status, tenant_id, session_id, coalesce(base_run_id, '') from runs where id = $1`, id).
		Scan(&status, &storedTenant, &storedSession, &base)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	case storedTenant != tenant || storedSession != session:
		return fmt.Errorf("%s: id already used by session %q/%q", op, storedTenant, storedSession)
	case status == string(RunPending) && base != "":
		latest, err := s.LatestOutput(ctx, tenant, session)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return fmt.Errorf("%s: it continues run %s, and run %s's output is the session's latest now: %w", op, base, latest.RunID, ErrBaseSuperseded)
	default:
		return fmt.Errorf("%s: status %s: %w", op, status, ErrRunFinal)
	}
}
