package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestRecordStepIsIdempotentPerAttempt(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")

	st := store.Step{RunID: r.ID, Name: "summarize-chunk-1", Attempt: 1, Kind: "llm", InputSize: 50000,
		OutputSize: 5000, PromptTokens: 12000, CompletionTokens: 1300, Model: "m", PromptVersion: "p1",
		Duration: 1500 * time.Millisecond, Error: "429 rate limited"}
	require.NoError(t, s.RecordStep(ctx, st))
	dup := st
	dup.Error = "" // a retried write of the same attempt, even if it differs
	require.NoError(t, s.RecordStep(ctx, dup))
	steps, err := s.ListSteps(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, "429 rate limited", steps[0].Error)
	require.Equal(t, 1500*time.Millisecond, steps[0].Duration)
	require.Equal(t, 12000, steps[0].PromptTokens)
	require.False(t, steps[0].At.IsZero())

	// The next attempt is a new record.
	next := st
	next.Attempt = 2
	next.Error = ""
	require.NoError(t, s.RecordStep(ctx, next))
	steps, err = s.ListSteps(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, []int{1, 2}, []int{steps[0].Attempt, steps[1].Attempt})
}

func TestRecordStepValidation(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	r := newRun(t, s, "acme", "s1")
	tests := []struct {
		name string
		step store.Step
		want string
	}{
		{"no run", store.Step{Name: "plan"}, "RunID is empty"},
		{"no name", store.Step{RunID: r.ID}, "Name is empty"},
		{"negative attempt", store.Step{RunID: r.ID, Name: "plan", Attempt: -1}, "negative attempt"},
		{"negative duration", store.Step{RunID: r.ID, Name: "plan", Duration: -time.Second}, "negative duration"},
		{"unknown run", store.Step{RunID: "nope", Name: "plan"}, "foreign key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, s.RecordStep(t.Context(), tt.step), tt.want)
		})
	}
}

func TestRecordDrift(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")

	first := store.Drift{RunID: r.ID, Pass: 0, Score: 0.62, Passed: false,
		Missing: []string{"/src/main.go", "--no-cache"}, Verdict: "repair"}
	require.NoError(t, s.RecordDrift(ctx, first))
	retry := first
	retry.Score = 0.99
	require.NoError(t, s.RecordDrift(ctx, retry))
	require.NoError(t, s.RecordDrift(ctx, store.Drift{RunID: r.ID, Pass: 1, Score: 0.91, Passed: true, Verdict: "ok"}))

	verdicts, err := s.ListDrift(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, verdicts, 2)
	require.InDelta(t, 0.62, verdicts[0].Score, 1e-9)
	require.Equal(t, first.Missing, verdicts[0].Missing)
	require.False(t, verdicts[0].Passed)
	require.Equal(t, 1, verdicts[1].Pass)
	require.True(t, verdicts[1].Passed)
	require.Empty(t, verdicts[1].Missing)

	require.ErrorContains(t, s.RecordDrift(ctx, store.Drift{RunID: r.ID, Pass: -1}), "negative pass")
}

// TestHistoryIsAppendOnly changes history behind the store's back, as an
// operator with psql could, and expects the schema to refuse.
func TestHistoryIsAppendOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	require.NoError(t, s.RecordStep(ctx, store.Step{RunID: r.ID, Name: "plan", Attempt: 1}))
	require.NoError(t, s.RecordDrift(ctx, store.Drift{RunID: r.ID, Score: 1, Passed: true}))
	require.NoError(t, s.SetWatermark(ctx, "acme", "s1", "toolu_1", r.ID))
	_, err := s.SubmitRun(ctx, store.Run{ID: r.ID, Tenant: "acme", Session: "s1", EventID: "ev-1"}, "body", nil)
	require.NoError(t, err)
	require.NoError(t, s.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", RunID: r.ID, Key: "k1"}))
	c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 7})
	require.NoError(t, err)
	require.True(t, c.Committed)
	_, err = s.MarkOffloadsDeleted(ctx, "acme", "s1", []string{"k1"})
	require.NoError(t, err)

	for _, stmt := range []string{
		"update run_steps set error = 'x'",
		"delete from run_steps",
		"update drift_verdicts set passed = false",
		"delete from drift_verdicts",
		"update watermark_history set run_id = 'x'",
		"delete from watermark_history",
		"update events set run_id = 'x'",
		"delete from events",
		"update runs set tokens_after = 1",
		"delete from runs",
		"update offloads set deleted_at = now()",
		"update offloads set tokens = 1",
		"delete from offloads",
	} {
		_, err := s.Pool().Exec(ctx, stmt)
		require.ErrorContains(t, err, "SQLSTATE 23000", stmt)
		require.False(t, store.IsRetryable(err), stmt)
	}
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.TokensAfter)
}
