// Package audit answers what was done to a tenant's sessions: the runs with
// their steps and drift verdicts, the original conversation of any run
// (byte for byte, checksum verified), what a run removed or replaced,
// recovery search over archived and offloaded content, the three-tier context
// status report, and exports of the history.
//
// Every method takes the caller's tenant and never returns another
// tenant's data: a run of another tenant is store.ErrNotFound, exactly like a
// run that does not exist, and every S3 key read is checked to lie under
// the caller's tenant prefix.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// ErrNoArchive reports a run that failed before its original was archived.
var ErrNoArchive = errors.New("run has no archived original")

// ErrNoOutput reports a run without a compacted conversation (not
// succeeded).
var ErrNoOutput = errors.New("run has no output")

// Service is the audit API over the store and the blob store.
type Service struct {
	Store *store.Store
	Blob  *blob.Store
	// Breaker is the deployment's loop breaker rule, for the status
	// report; zero reports none.
	Breaker store.BreakerRule
	// SearchBytes bounds what one search reads; 0 is MaxSearchBytes.
	SearchBytes int64
}

// RunDetail is one run with everything recorded about it.
type RunDetail struct {
	Run   store.Run
	Steps []store.Step
	Drift []store.Drift
	// Duration is from start to finish; zero while the run is live.
	Duration time.Duration
	// PromptTokens and CompletionTokens add up the LLM usage of every
	// step attempt.
	PromptTokens     int
	CompletionTokens int
}

// Runs lists the tenant's runs matching f, newest first; f.Tenant is
// replaced by tenant so that no filter can reach another tenant.
func (s *Service) Runs(ctx context.Context, tenant string, f store.RunFilter) ([]store.Run, error) {
	if err := blob.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	f.Tenant = tenant
	if f.AfterID != "" {
		// The cursor must be the tenant's own run, or its existence leaks.
		if _, err := s.run(ctx, tenant, f.AfterID); err != nil {
			return nil, fmt.Errorf("list runs: cursor: %w", err)
		}
	}
	runs, err := s.Store.ListRuns(ctx, f)
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// Run returns a run of tenant with its steps and drift verdicts.
func (s *Service) Run(ctx context.Context, tenant, runID string) (RunDetail, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return RunDetail{}, err
	}
	return s.Detail(ctx, r)
}

// RunRow returns the row of a run of tenant: another tenant's run, or
// none, is ErrNotFound.
func (s *Service) RunRow(ctx context.Context, tenant, runID string) (store.Run, error) {
	return s.run(ctx, tenant, runID)
}

// Detail adds the steps and drift verdicts of run r, a row RunRow
// returned, to it.
func (s *Service) Detail(ctx context.Context, r store.Run) (RunDetail, error) {
	steps, err := s.Store.ListSteps(ctx, r.ID)
	if err != nil {
		return RunDetail{}, err
	}
	drift, err := s.Store.ListDrift(ctx, r.ID)
	if err != nil {
		return RunDetail{}, err
	}
	d := RunDetail{Run: r, Steps: steps, Drift: drift, Duration: duration(r)}
	for _, st := range steps {
		d.PromptTokens += st.PromptTokens
		d.CompletionTokens += st.CompletionTokens
	}
	return d, nil
}

// Restore returns the original conversation of a run exactly as it was
// archived, after checking it against the sha256 recorded on the run.
func (s *Service) Restore(ctx context.Context, tenant, runID string) ([]byte, error) {
	r, err := s.run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	return s.archive(ctx, r)
}

// OriginalOf is Restore of run r, a row RunRow returned: ErrNoArchive
// when it has none.
func (s *Service) OriginalOf(ctx context.Context, r store.Run) ([]byte, error) {
	return s.archive(ctx, r)
}

// OutputOf is Output of run r, a row RunRow returned: ErrNoOutput when
// it has none.
func (s *Service) OutputOf(ctx context.Context, r store.Run) ([]byte, error) {
	return s.output(ctx, r)
}

// run reads a run of tenant; anything else is store.ErrNotFound.
func (s *Service) run(ctx context.Context, tenant, runID string) (store.Run, error) {
	if err := blob.ValidateTenant(tenant); err != nil {
		return store.Run{}, fmt.Errorf("run %s: %w", runID, err)
	}
	if strings.TrimSpace(runID) == "" {
		return store.Run{}, fmt.Errorf("run id is empty: %w", store.ErrNotFound)
	}
	r, err := s.Store.GetRunForTenant(ctx, tenant, runID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, fmt.Errorf("run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, err
	}
	return r, nil
}

// archive reads and verifies a run's archived original.
func (s *Service) archive(ctx context.Context, r store.Run) ([]byte, error) {
	if r.ArchiveKey == "" {
		return nil, fmt.Errorf("run %s (%s): %w", r.ID, r.Status, ErrNoArchive)
	}
	if err := ownKey(r.Tenant, r.ArchiveKey); err != nil {
		return nil, fmt.Errorf("run %s archive: %w", r.ID, err)
	}
	data, err := s.Blob.GetVerified(ctx, r.ArchiveKey, r.ArchiveSHA256)
	if err != nil {
		return nil, fmt.Errorf("run %s archive: %w", r.ID, err)
	}
	return data, nil
}

// output reads and verifies a run's compacted conversation.
func (s *Service) output(ctx context.Context, r store.Run) ([]byte, error) {
	if r.OutputKey == "" {
		return nil, fmt.Errorf("run %s (%s): %w", r.ID, r.Status, ErrNoOutput)
	}
	if err := ownKey(r.Tenant, r.OutputKey); err != nil {
		return nil, fmt.Errorf("run %s output: %w", r.ID, err)
	}
	data, err := s.Blob.GetVerified(ctx, r.OutputKey, r.OutputSHA256)
	if err != nil {
		return nil, fmt.Errorf("run %s output: %w", r.ID, err)
	}
	return data, nil
}

// ownKey refuses a key outside tenant's prefix. Keys come from the
// tenant's own rows, so this is a second line of defence against a row
// that names someone else's object.
func ownKey(tenant, key string) error {
	prefix, err := blob.TenantPrefix(tenant)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(key, prefix) {
		return fmt.Errorf("key %s is outside the tenant's prefix %s", key, prefix)
	}
	return nil
}

// duration is a final run's wall time; zero while it is live.
func duration(r store.Run) time.Duration {
	if r.FinishedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) {
		return 0
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// allRuns pages through every run matching f, newest first.
func (s *Service) allRuns(ctx context.Context, f store.RunFilter, max int) ([]store.Run, error) {
	f.Limit = store.MaxListLimit
	var out []store.Run
	for {
		page, err := s.Store.ListRuns(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if max > 0 && len(out) >= max {
			return out[:max], nil
		}
		if len(page) < f.Limit {
			return out, nil
		}
		f.AfterID = page[len(page)-1].ID
	}
}

// RunRecord is the flat, JSON- and CSV-friendly form of a run.
type RunRecord struct {
	ID            string     `json:"id"`
	Tenant        string     `json:"tenant"`
	Session       string     `json:"session"`
	EventID       string     `json:"event_id"`
	Trigger       string     `json:"trigger"`
	Preset        string     `json:"preset"`
	Model         string     `json:"model"`
	PromptVersion string     `json:"prompt_version"`
	Status        string     `json:"status"`
	Level         string     `json:"level"`
	TokensBefore  int64      `json:"tokens_before"`
	TokensAfter   int64      `json:"tokens_after"`
	CharsBefore   int64      `json:"chars_before"`
	CharsAfter    int64      `json:"chars_after"`
	Ratio         float64    `json:"ratio"`
	DurationMS    int64      `json:"duration_ms"`
	StartedAt     time.Time  `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	Error         string     `json:"error,omitempty"`
	// ErrorClass says what kind of failure a failed run had.
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorCause: see contract.Outcome.ErrorCause.
	ErrorCause    string          `json:"error_cause,omitempty"`
	ReplayOf      string          `json:"replay_of,omitempty"`
	InputKey      string          `json:"input_key"`
	ArchiveKey    string          `json:"archive_key"`
	ArchiveSHA256 string          `json:"archive_sha256"`
	OutputKey     string          `json:"output_key"`
	OutputSHA256  string          `json:"output_sha256"`
	Stats         json.RawMessage `json:"stats,omitempty"`
	// What the caller asked for, recorded at submit: the agent's model
	// (Model is the summarizer's), the context limit, the effective
	// overrides, the input's digest and the preset resolved from them.
	AgentModel     string          `json:"agent_model,omitempty"`
	ContextLimit   int             `json:"context_limit,omitempty"`
	Overrides      json.RawMessage `json:"overrides,omitempty"`
	InputSHA256    string          `json:"input_sha256,omitempty"`
	ResolvedPreset json.RawMessage `json:"resolved_preset,omitempty"`
	// Degraded says the run reached its result through a fallback
	// (DegradedReasons, from its stats, say which): the same figure its
	// outcome gives, beside the stats rather than only inside them.
	Degraded        bool     `json:"degraded"`
	DegradedReasons []string `json:"degraded_reasons,omitempty"`
	// stats are the run's parsed stats, for the CSV's figures.
	stats store.RunStats
}

// NewRunRecord flattens a run.
func NewRunRecord(r store.Run) RunRecord {
	rec := RunRecord{
		ID: r.ID, Tenant: r.Tenant, Session: r.Session, EventID: r.EventID, Trigger: r.Trigger,
		Preset: r.Preset, Model: r.Model, PromptVersion: r.PromptVersion, Status: string(r.Status), Level: r.Level,
		TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter, CharsBefore: r.CharsBefore, CharsAfter: r.CharsAfter,
		Ratio: r.Ratio, DurationMS: duration(r).Milliseconds(), StartedAt: r.StartedAt, Error: r.Error, ErrorClass: string(r.ErrorClass),
		ErrorCause: r.ErrorCause, ReplayOf: r.ReplayOf, InputKey: r.InputKey, ArchiveKey: r.ArchiveKey, ArchiveSHA256: r.ArchiveSHA256,
		OutputKey: r.OutputKey, OutputSHA256: r.OutputSHA256, Stats: r.Stats,
		AgentModel: r.AgentModel, ContextLimit: r.ContextLimit, Overrides: r.Overrides, InputSHA256: r.InputSHA256,
		ResolvedPreset: r.ResolvedPreset,
	}
	if !r.FinishedAt.IsZero() {
		f := r.FinishedAt
		rec.FinishedAt = &f
	}
	// A run whose stats do not read has none of these figures; its
	// stats are exported as they are.
	if st, err := r.ParseStats(); err == nil {
		rec.stats = st
		rec.DegradedReasons = st.DegradedReasons
		rec.Degraded = len(st.DegradedReasons) > 0
	}
	return rec
}

// Records flattens runs, for JSON answers.
func Records(runs []store.Run) []RunRecord {
	out := make([]RunRecord, len(runs))
	for i, r := range runs {
		out[i] = NewRunRecord(r)
	}
	return out
}

// StepRecord is the JSON form of one step attempt.
type StepRecord struct {
	Name             string    `json:"name"`
	Attempt          int       `json:"attempt"`
	Kind             string    `json:"kind"`
	InputSize        int64     `json:"input_size"`
	OutputSize       int64     `json:"output_size"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	Model            string    `json:"model,omitempty"`
	PromptVersion    string    `json:"prompt_version,omitempty"`
	DurationMS       int64     `json:"duration_ms"`
	Error            string    `json:"error,omitempty"`
	At               time.Time `json:"at"`
}

// DriftRecord is the JSON form of one drift verdict.
type DriftRecord struct {
	Step    string    `json:"step"`
	Pass    int       `json:"pass"`
	Score   float64   `json:"score"`
	Passed  bool      `json:"passed"`
	Missing []string  `json:"missing"`
	Verdict string    `json:"verdict"`
	At      time.Time `json:"at"`
}

// MarshalJSON writes the detail with snake_case field names throughout.
func (d RunDetail) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Record())
}

// RunDetailRecord is a RunDetail as the API writes it.
type RunDetailRecord struct {
	Run   RunRecord    `json:"run"`
	Steps []StepRecord `json:"steps"`
	// DriftVerdicts are the run's drift checks (the outcome's "drift" is
	// its last verdict).
	DriftVerdicts    []DriftRecord `json:"drift_verdicts"`
	DurationMS       int64         `json:"duration_ms"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
}

// Record is d as the API writes it.
func (d RunDetail) Record() RunDetailRecord {
	steps := make([]StepRecord, len(d.Steps))
	for i, st := range d.Steps {
		steps[i] = newStepRecord(st)
	}
	drift := make([]DriftRecord, len(d.Drift))
	for i, v := range d.Drift {
		missing := v.Missing
		if missing == nil {
			missing = []string{}
		}
		drift[i] = DriftRecord{Step: v.Step, Pass: v.Pass, Score: v.Score, Passed: v.Passed, Missing: missing, Verdict: v.Verdict, At: v.At}
	}
	return RunDetailRecord{NewRunRecord(d.Run), steps, drift, d.Duration.Milliseconds(), d.PromptTokens, d.CompletionTokens}
}

// newStepRecord is st as the API and the export write it.
func newStepRecord(st store.Step) StepRecord {
	return StepRecord{Name: st.Name, Attempt: st.Attempt, Kind: st.Kind, InputSize: st.InputSize,
		OutputSize: st.OutputSize, PromptTokens: st.PromptTokens, CompletionTokens: st.CompletionTokens,
		Model: st.Model, PromptVersion: st.PromptVersion, DurationMS: st.Duration.Milliseconds(), Error: st.Error, At: st.At}
}
