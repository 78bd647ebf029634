package store

import (
	"context"
	"fmt"
	"github.com/ctxcompact/orchestrator/contract"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Step is one attempt of one pipeline step of a run, as the workflow
// carries it (contract.Step); the store keeps it as a run_steps row.
type Step = contract.Step

// RecordStep appends step records, all in one round trip and one
// implicit transaction. A record with the same run, name, attempt and
// execution already stored is skipped, so a retried write adds nothing.
// The runs must exist.
func (s *Store) RecordStep(ctx context.Context, steps ...Step) error {
	var batch pgx.Batch
	for _, st := range steps {
		if err := queueStep(&batch, st); err != nil {
			return err
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return fmt.Errorf("record %d steps of run %s: %w", len(steps), steps[0].RunID, err)
	}
	return nil
}

// queueStep checks a step record and queues its insert on batch.
func queueStep(batch *pgx.Batch, st Step) error {
	return queueStepIf(batch, st, false)
}

// queueStepIf is queueStep; with live set, the step is recorded only
// while its run is not final yet. A run's steps go with its commit or
// failure; a workflow task that timed out runs its local steps and the
// commit again, and that repeated commit (which changes nothing) must not
// record a second row of each step either.
func queueStepIf(batch *pgx.Batch, st Step, live bool) error {
	op := fmt.Sprintf("record step %q attempt %d of run %s", st.Name, st.Attempt, st.RunID)
	if err := requireNonEmpty(op, [2]string{"RunID", st.RunID}, [2]string{"Name", st.Name}); err != nil {
		return err
	}
	if st.Attempt < 0 {
		return fmt.Errorf("%s: negative attempt", op)
	}
	if st.Duration < 0 {
		return fmt.Errorf("%s: negative duration %s", op, st.Duration)
	}
	guard := ""
	if live {
		guard = ` where exists (select 1 from runs where id = $1 and status in ('pending', 'running'))`
	}
	batch.Queue(`
		insert into run_steps (run_id, name, attempt, kind, input_size, output_size,
			prompt_tokens, completion_tokens, model, prompt_version, duration, error, at, execution)
		select $1::text, $2::text, $3::integer, $4::text, $5::bigint, $6::bigint, $7::integer, $8::integer,
			$9::text, $10::text, $11::interval, $12::text, coalesce($13::timestamptz, now()), $14::text`+guard+`
		on conflict (run_id, name, attempt, execution) do nothing`,
		st.RunID, st.Name, st.Attempt, st.Kind, st.InputSize, st.OutputSize,
		st.PromptTokens, st.CompletionTokens, st.Model, st.PromptVersion, st.Duration, Storable(st.Error),
		nullIfZero(st.At), st.Execution)
	return nil
}

// Storable is text as Postgres can hold it: NUL bytes (which a text
// column refuses, failing the whole write) written as the two characters
// \0, and invalid UTF-8 as U+FFFD. An error message that quotes a
// caller's bytes is then written sanitized, never dropped.
func Storable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", `\0`)
}

// ListSteps returns the steps of a run in the order they happened.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]Step, error) {
	rows, err := s.pool.Query(ctx, `
		select run_id, name, attempt, kind, input_size, output_size, prompt_tokens, completion_tokens,
			model, prompt_version, duration, error, at, execution
		from run_steps where run_id = $1 order by at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, err)
	}
	steps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Step, error) {
		var st Step
		err := row.Scan(&st.RunID, &st.Name, &st.Attempt, &st.Kind, &st.InputSize, &st.OutputSize,
			&st.PromptTokens, &st.CompletionTokens, &st.Model, &st.PromptVersion, &st.Duration, &st.Error, &st.At, &st.Execution)
		st.At = st.At.UTC()
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, err)
	}
	return steps, nil
}

// Drift is the verdict of one drift check of a run's summary.
type Drift struct {
	RunID   string
	Step    string // the summary checked, e.g. "history" or "large/0"
	Pass    int    // 0 for the first check, 1 for the check after repair
	Score   float64
	Passed  bool
	Missing []string // what the summary lost: identifiers, constraints, ...
	Verdict string
	At      time.Time // set by the database
}

// RecordDrift appends drift verdicts, all in one round trip and one
// implicit transaction. A verdict already stored for the same run, step
// and pass is skipped, so a retried write adds nothing. The runs must
// exist.
func (s *Store) RecordDrift(ctx context.Context, verdicts ...Drift) error {
	var batch pgx.Batch
	for _, d := range verdicts {
		op := fmt.Sprintf("record drift %q pass %d of run %s", d.Step, d.Pass, d.RunID)
		if err := requireNonEmpty(op, [2]string{"RunID", d.RunID}); err != nil {
			return err
		}
		if d.Pass < 0 {
			return fmt.Errorf("%s: negative pass", op)
		}
		missing := d.Missing
		if missing == nil {
			missing = []string{}
		}
		batch.Queue(`
			insert into drift_verdicts (run_id, step, pass, score, passed, missing, verdict)
			values ($1, $2, $3, $4, $5, $6, $7)
			on conflict (run_id, step, pass) do nothing`,
			d.RunID, d.Step, d.Pass, d.Score, d.Passed, missing, d.Verdict)
	}
	if batch.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return fmt.Errorf("record %d drift verdicts: %w", batch.Len(), err)
	}
	return nil
}

// ListDrift returns the drift verdicts of a run in the order they were made.
func (s *Store) ListDrift(ctx context.Context, runID string) ([]Drift, error) {
	rows, err := s.pool.Query(ctx, `
		select run_id, step, pass, score, passed, missing, verdict, created_at
		from drift_verdicts where run_id = $1 order by created_at, step, pass`, runID)
	if err != nil {
		return nil, fmt.Errorf("list drift of run %s: %w", runID, err)
	}
	verdicts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Drift, error) {
		var d Drift
		err := row.Scan(&d.RunID, &d.Step, &d.Pass, &d.Score, &d.Passed, &d.Missing, &d.Verdict, &d.At)
		d.At = d.At.UTC()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list drift of run %s: %w", runID, err)
	}
	return verdicts, nil
}
