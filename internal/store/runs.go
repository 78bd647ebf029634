package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunStatus is the state of a compaction run. pending and running are live;
// succeeded, over_limit and failed are final and frozen.
type RunStatus string

// Run states.
const (
	RunPending   RunStatus = "pending"
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	// RunOverLimit: the run committed its output, but the output is still
	// over the model's limit; Error holds the reason. Never a success.
	RunOverLimit RunStatus = "over_limit"
	RunFailed    RunStatus = "failed"
)

// ErrorClass says what kind of failure ended a failed run. Callers switch
// on it; the run's Error is a message safe to show them, and the detail
// stays in the worker's logs.
type ErrorClass string

// Error classes.
const (
	// ErrorBadInput: the conversation or the request could not be used;
	// sending it again will fail again. Error says what is wrong.
	ErrorBadInput ErrorClass = "bad_input"
	// ErrorConfig: the deployment's configuration refused the run.
	ErrorConfig ErrorClass = "config"
	// ErrorSummarizer: the summarizer refused the request or failed
	// through every retry.
	ErrorSummarizer ErrorClass = "summarizer"
	// ErrorDependency: Postgres or S3 failed, or stayed down through
	// every retry.
	ErrorDependency ErrorClass = "dependency"
	// ErrorTimeout: a step ran out of time through every retry.
	ErrorTimeout ErrorClass = "timeout"
	// ErrorCanceled: the run was canceled.
	ErrorCanceled ErrorClass = "canceled"
	// ErrorInterrupted: the run's workflow ended or vanished without
	// recording it (found by the reconciler).
	ErrorInterrupted ErrorClass = "interrupted"
	// ErrorInternal: anything else; a bug to report with the run id.
	ErrorInternal ErrorClass = "internal"
)

// Failure is what a failed run records: its class and a message safe to
// show its caller.
type Failure struct {
	Class   ErrorClass
	Message string
	// Cause is why a dependency's call failed (netcause's words: "refused",
	// "http 503"), "" when the error has none.
	Cause string
}

// Final reports whether no further state change is allowed.
func (s RunStatus) Final() bool {
	return s == RunSucceeded || s == RunOverLimit || s == RunFailed
}

// Committed reports whether the run stored an output: succeeded, or
// over_limit (the best it could do, said so).
func (s RunStatus) Committed() bool {
	return s == RunSucceeded || s == RunOverLimit
}

// Valid reports whether s is one of the known states.
func (s RunStatus) Valid() bool {
	return s == RunPending || s == RunRunning || s.Final()
}

// Run is one compaction run of one session.
type Run struct {
	ID            string // chosen by the caller: the workflow run id
	Tenant        string
	Session       string
	EventID       string
	Trigger       string
	Preset        string
	Model         string
	PromptVersion string
	Status        RunStatus
	TokensBefore  int64
	TokensAfter   int64
	CharsBefore   int64
	CharsAfter    int64
	Ratio         float64
	InputKey      string
	ArchiveKey    string
	ArchiveSHA256 string
	OutputKey     string
	OutputSHA256  string
	Level         string
	Error         string
	// ErrorClass is set on failed runs.
	ErrorClass ErrorClass
	// ErrorCause is why a failed run's dependency call failed (see
	// Failure.Cause).
	ErrorCause string
	ReplayOf   string // id of the run this one replays, "" if none
	// AgentModel, ContextLimit, Overrides (the effective ones) and
	// InputSHA256 are what the caller asked for, recorded at submit; Model
	// is the summarizer's.
	AgentModel   string
	ContextLimit int
	Overrides    json.RawMessage
	InputSHA256  string
	// ResolvedPreset is the preset the run works with (policy.Preset as
	// JSON: built-in numbers under the effective overrides), resolved at
	// submit: every run the gateway records has one.
	ResolvedPreset json.RawMessage
	// ObservedTurns are the agent's calls since the session's previous
	// compaction, as an incremental event showed them (the assistant
	// messages it appended); 0 when not known.
	ObservedTurns int
	// BaseRunID is the run whose output an incremental event continued
	// ("" for a whole conversation): one live run extends a base.
	BaseRunID  string
	StartedAt  time.Time
	FinishedAt time.Time // zero while the run is live
	UpdatedAt  time.Time
	Stats      json.RawMessage // the commit's RunStats as JSON (see ParseStats), nil if none
}

// RunPlan holds what the plan step learns about a live run. Zero fields
// leave the stored value unchanged.
type RunPlan struct {
	Preset        string
	Model         string
	PromptVersion string
	Level         string
	TokensBefore  int64
	CharsBefore   int64
}

// RunResult is what a successful run commits. Zero fields among Model,
// PromptVersion, Level and Stats leave the stored value unchanged.
type RunResult struct {
	TokensAfter   int64
	CharsAfter    int64
	Ratio         float64
	OutputKey     string
	OutputSHA256  string
	Model         string
	PromptVersion string
	Level         string
	Stats         json.RawMessage
	// OverLimit ends the run over_limit instead of succeeded, with
	// OverLimitReason in the run's error.
	OverLimit       bool
	OverLimitReason string
	// Steps are step records written in the same round trip as the
	// commit (the run's successful steps, gathered by the workflow).
	Steps []Step
	// Log are the session log blocks the run appended (and the
	// reflection it made), recorded with the commit.
	Log []LogBlock
}

// RunFilter selects runs for ListRuns. Zero fields do not filter.
type RunFilter struct {
	Tenant   string
	Session  string // only with Tenant
	Status   RunStatus
	Preset   string // the preset the run resolved (recorded by plan)
	ReplayOf string
	// Degraded keeps only the runs that reached their result through a
	// fallback (their stats name a degraded reason).
	Degraded bool
	From     time.Time // started at or after
	To       time.Time // started before
	// AfterID is the id of the last run of the previous page; the page
	// continues with older runs.
	AfterID string
	// Limit caps the page; 0 means DefaultListLimit, more than MaxListLimit
	// is capped.
	Limit int
}

// Page sizes of ListRuns.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// runColumns is the select list scanned by scanRun, in order.
const runColumns = `id, tenant_id, session_id, event_id, trigger, preset, model, prompt_version,
	status, tokens_before, tokens_after, chars_before, chars_after, ratio,
	input_key, archive_key, archive_sha256, output_key, output_sha256, level, error, error_class,
	coalesce(replay_of, ''), started_at, finished_at, updated_at, stats,
	agent_model, context_limit, overrides, input_sha256, resolved_preset, coalesce(base_run_id, ''), error_cause, observed_turns`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	var status string
	var finished *time.Time
	var stats, overrides, resolved []byte
	err := row.Scan(&r.ID, &r.Tenant, &r.Session, &r.EventID, &r.Trigger, &r.Preset, &r.Model, &r.PromptVersion,
		&status, &r.TokensBefore, &r.TokensAfter, &r.CharsBefore, &r.CharsAfter, &r.Ratio,
		&r.InputKey, &r.ArchiveKey, &r.ArchiveSHA256, &r.OutputKey, &r.OutputSHA256, &r.Level, &r.Error, &r.ErrorClass,
		&r.ReplayOf, &r.StartedAt, &finished, &r.UpdatedAt, &stats,
		&r.AgentModel, &r.ContextLimit, &overrides, &r.InputSHA256, &resolved, &r.BaseRunID, &r.ErrorCause, &r.ObservedTurns)
	if err != nil {
		return Run{}, err
	}
	r.Status = RunStatus(status)
	r.StartedAt = r.StartedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	if finished != nil {
		r.FinishedAt = finished.UTC()
	}
	if len(stats) > 0 {
		r.Stats = json.RawMessage(stats)
	}
	if len(overrides) > 0 {
		r.Overrides = json.RawMessage(overrides)
	}
	if len(resolved) > 0 {
		r.ResolvedPreset = json.RawMessage(resolved)
	}
	return r, nil
}

// jsonArg validates raw JSON and turns empty into SQL NULL.
func jsonArg(op string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s: stats is not valid JSON", op)
	}
	return string(raw), nil
}

// nullIfEmpty maps "" to SQL NULL for optional references.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullIfZero maps the zero time to SQL NULL so that the database clock fills
// the default.
func nullIfZero(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// CreateRun records a run, and its tenant and session if new. It is
// idempotent by ID: when the run already exists nothing is written and the
// stored run is returned with created false. A run id already used by
// another tenant or session is an error. An empty Status means pending; a
// zero StartedAt means now.
func (s *Store) CreateRun(ctx context.Context, r Run) (Run, bool, error) {
	if err := checkNewRun(r); err != nil {
		return Run{}, false, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	var stored Run
	var created bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := ensureSession(ctx, tx, r.Tenant, r.Session); err != nil {
			return err
		}
		var err error
		if created, err = createRun(ctx, tx, r); err != nil {
			return err
		}
		stored, err = scanRun(tx.QueryRow(ctx, `select `+runColumns+` from runs where id = $1`, r.ID))
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		return nil
	})
	if err != nil {
		return Run{}, false, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return stored, created, nil
}

// checkNewRun refuses a run that createRun must not insert.
func checkNewRun(r Run) error {
	if err := requireNonEmpty("new run", [2]string{"ID", r.ID}, [2]string{"Tenant", r.Tenant}, [2]string{"Session", r.Session}); err != nil {
		return err
	}
	if r.Status != "" && !r.Status.Valid() {
		return fmt.Errorf("unknown status %q", r.Status)
	}
	if r.ReplayOf == r.ID {
		return errors.New("a run cannot replay itself")
	}
	return nil
}

// createRun inserts run r (checked by checkNewRun) in tx unless a run with its id exists; the
// tenant and session must exist. It reports whether it inserted. An id
// already used by another tenant or session is an error.
func createRun(ctx context.Context, tx pgx.Tx, r Run) (bool, error) {
	args, err := runInsertArgs(r)
	if err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, runInsertSQL("true"), args...)
	if err != nil {
		return false, fmt.Errorf("insert: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var tenant, session string
	if err := tx.QueryRow(ctx, `select tenant_id, session_id from runs where id = $1`, r.ID).Scan(&tenant, &session); err != nil {
		return false, fmt.Errorf("read existing run: %w", err)
	}
	if tenant != r.Tenant || session != r.Session {
		return false, fmt.Errorf("id already used by session %q/%q", tenant, session)
	}
	return false, nil
}

// runInsertSQL inserts the run of runInsertArgs ($1 its id, $2 its
// tenant, $3 its session, $4 its event) when cond holds; an id taken
// already inserts nothing. It is an insert from a select so that a
// condition can ride with it (SubmitRun's: the event's claim names this
// run); Postgres types the parameters by the columns all the same.
func runInsertSQL(cond string) string {
	return `insert into runs (id, tenant_id, session_id, event_id, trigger, preset, model, prompt_version,
			status, tokens_before, tokens_after, chars_before, chars_after, ratio,
			input_key, archive_key, archive_sha256, output_key, output_sha256, level, error,
			replay_of, started_at, finished_at, stats, agent_model, context_limit, overrides, input_sha256,
			resolved_preset, base_run_id, observed_turns)
		select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
			$22, coalesce($23, now()), $24, $25, $26, $27, $28, $29, $30, $31, $32
		where ` + cond + `
		on conflict (id) do nothing`
}

// runInsertArgs are the parameters of runInsertSQL for r, pending unless
// r says otherwise.
func runInsertArgs(r Run) ([]any, error) {
	if r.Status == "" {
		r.Status = RunPending
	}
	stats, err := jsonArg("stats", r.Stats)
	if err != nil {
		return nil, err
	}
	overrides, err := jsonArg("overrides", r.Overrides)
	if err != nil {
		return nil, err
	}
	resolved, err := jsonArg("resolved preset", r.ResolvedPreset)
	if err != nil {
		return nil, err
	}
	var finished any
	if r.Status.Final() {
		if r.FinishedAt.IsZero() {
			r.FinishedAt = time.Now()
		}
		finished = r.FinishedAt
	}
	return []any{r.ID, r.Tenant, r.Session, r.EventID, r.Trigger, r.Preset, r.Model, r.PromptVersion,
		string(r.Status), r.TokensBefore, r.TokensAfter, r.CharsBefore, r.CharsAfter, r.Ratio,
		r.InputKey, r.ArchiveKey, r.ArchiveSHA256, r.OutputKey, r.OutputSHA256, r.Level, r.Error,
		nullIfEmpty(r.ReplayOf), nullIfZero(r.StartedAt), finished, stats,
		r.AgentModel, r.ContextLimit, overrides, r.InputSHA256, resolved, nullIfEmpty(r.BaseRunID), r.ObservedTurns}, nil
}

// GetRun returns the run with the given id, or an error wrapping ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `select `+runColumns+` from runs where id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, fmt.Errorf("get run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// runStatus returns the status of run id, or an error wrapping ErrNotFound.
func (s *Store) runStatus(ctx context.Context, id string) (RunStatus, error) {
	var status string
	err := s.pool.QueryRow(ctx, `select status from runs where id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", err
	}
	return RunStatus(status), nil
}

// Commit is what CommitRun did.
type Commit struct {
	// Committed is true when this call finished the run, false when it
	// was already final (a retried or concurrent commit, or a run that
	// failed meanwhile).
	Committed bool
	// Webhooks reports whether the run's tenant has a live webhook
	// endpoint, read in the commit's round trip: a run of a tenant
	// without one starts no delivery.
	Webhooks bool
}

// CommitRun marks a live run succeeded (over_limit when res.OverLimit) with its results. It commits at most
// once: if the run is already final (a retried or concurrent commit, or a run
// that failed meanwhile) nothing changes and Committed is false with no
// error. A missing run is an error wrapping ErrNotFound.
func (s *Store) CommitRun(ctx context.Context, id string, res RunResult) (Commit, error) {
	op := "commit run " + id
	status := RunSucceeded
	if res.OverLimit {
		if strings.TrimSpace(res.OverLimitReason) == "" {
			return Commit{}, fmt.Errorf("%s: over limit without a reason", op)
		}
		status = RunOverLimit
	} else if res.OverLimitReason != "" {
		return Commit{}, fmt.Errorf("%s: a reason is only for a run over its limit", op)
	}
	stats, err := jsonArg(op, res.Stats)
	if err != nil {
		return Commit{}, err
	}
	var c Commit
	rows, err := s.finishWithSteps(ctx, res.Steps, res.Log, &c.Webhooks, `
		update runs set
			status = $11, error = $12,
			tokens_after = $2, chars_after = $3, ratio = $4,
			output_key = $5, output_sha256 = $6,
			model = coalesce(nullif($7, ''), model),
			prompt_version = coalesce(nullif($8, ''), prompt_version),
			level = coalesce(nullif($9, ''), level),
			stats = coalesce($10::jsonb, stats),
			finished_at = now(), updated_at = now()
		where id = $1 and status in ('pending', 'running')`,
		id, res.TokensAfter, res.CharsAfter, res.Ratio, res.OutputKey, res.OutputSHA256,
		res.Model, res.PromptVersion, res.Level, stats, string(status), res.OverLimitReason)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: %w", op, err)
	}
	if c.Committed, err = s.finished(ctx, op, id, rows); err != nil {
		return Commit{}, err
	}
	return c, nil
}

// finishWithSteps runs the update that finishes a run (sql, args; $1 is
// the run's id) after inserting steps, in one round trip and one implicit
// transaction, and returns the rows the update changed. With webhooks
// set, the same round trip reads whether the run's tenant has a live
// webhook endpoint into it.
func (s *Store) finishWithSteps(ctx context.Context, steps []Step, logs []LogBlock, webhooks *bool, sql string, args ...any) (int64, error) {
	var batch pgx.Batch
	for _, st := range steps {
		if err := queueStepIf(&batch, st, true); err != nil {
			return 0, err
		}
	}
	for _, l := range logs {
		if err := queueLogBlock(&batch, args[0].(string), l); err != nil {
			return 0, err
		}
	}
	batch.Queue(sql, args...)
	if webhooks != nil {
		batch.Queue(`select exists (select 1 from webhook_endpoints w join runs r on r.tenant_id = w.tenant_id
			where r.id = $1 and w.deleted_at is null)`, args[0])
	}
	results := s.pool.SendBatch(ctx, &batch)
	defer results.Close()
	for range steps {
		if _, err := results.Exec(); err != nil {
			return 0, fmt.Errorf("record steps: %w", err)
		}
	}
	for range logs {
		if _, err := results.Exec(); err != nil {
			return 0, fmt.Errorf("record session log: %w", err)
		}
	}
	tag, err := results.Exec()
	if err != nil {
		return 0, err
	}
	if webhooks != nil {
		if err := results.QueryRow().Scan(webhooks); err != nil {
			return 0, fmt.Errorf("look up webhooks: %w", err)
		}
	}
	if err := results.Close(); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// FailRun marks a live run failed with f, and records steps in the same
// round trip. Like CommitRun it changes only a live run and reports
// whether it did. A failure without a class is ErrorInternal.
func (s *Store) FailRun(ctx context.Context, id string, f Failure, steps ...Step) (bool, error) {
	op := "fail run " + id
	if f.Class == "" {
		f.Class = ErrorInternal
	}
	if strings.TrimSpace(f.Message) == "" {
		return false, fmt.Errorf("%s: message is empty", op)
	}
	rows, err := s.finishWithSteps(ctx, steps, nil, nil, `
		update runs set status = 'failed', error = $2, error_class = $3, error_cause = $4, finished_at = now(), updated_at = now()
		where id = $1 and status in ('pending', 'running')`, id, Storable(f.Message), string(f.Class), Storable(f.Cause))
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return s.finished(ctx, op, id, rows)
}

// finished interprets the row count of a finishing update.
func (s *Store) finished(ctx context.Context, op, id string, rows int64) (bool, error) {
	if rows == 1 {
		return true, nil
	}
	if _, err := s.runStatus(ctx, id); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return false, nil
}

// ListRuns returns the runs matching f, newest first (by start time, then
// id). Pass the last id of a page as AfterID to get the next page.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	if f.Session != "" && f.Tenant == "" {
		return nil, errors.New("list runs: session filter needs a tenant")
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, fmt.Errorf("list runs: unknown status %q", f.Status)
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("list runs: negative limit %d", f.Limit)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	if f.AfterID != "" {
		var exists bool
		if err := s.pool.QueryRow(ctx, `select exists (select 1 from runs where id = $1)`, f.AfterID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("list runs: look up cursor: %w", err)
		}
		if !exists {
			return nil, fmt.Errorf("list runs: cursor run %s: %w", f.AfterID, ErrNotFound)
		}
	}
	query, args := listRunsQuery(f, limit)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// listRunsQuery is ListRuns' query for f and a page of limit runs, with
// its arguments. A tenant's pages use runs_tenant_started_idx, so that a
// small tenant's page reads its own rows only, whatever the others hold.
func listRunsQuery(f RunFilter, limit int) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Tenant != "" {
		add("tenant_id = $%d", f.Tenant)
	}
	if f.Session != "" {
		add("session_id = $%d", f.Session)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if f.Preset != "" {
		add("preset = $%d", f.Preset)
	}
	if f.ReplayOf != "" {
		add("replay_of = $%d", f.ReplayOf)
	}
	if f.Degraded {
		where = append(where, "coalesce(jsonb_array_length(stats->'degraded_reasons'), 0) > 0")
	}
	if !f.From.IsZero() {
		add("started_at >= $%d", f.From)
	}
	if !f.To.IsZero() {
		add("started_at < $%d", f.To)
	}
	if f.AfterID != "" {
		add("(started_at, id) < (select started_at, id from runs where id = $%d)", f.AfterID)
	}
	query := `select ` + runColumns + ` from runs`
	if len(where) > 0 {
		query += ` where ` + strings.Join(where, " and ")
	}
	args = append(args, limit)
	query += fmt.Sprintf(` order by started_at desc, id desc limit $%d`, len(args))
	return query, args
}
