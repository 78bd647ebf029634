package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// TestDeterministicKeepsAnUnchangedConversation: passes that change
// nothing hand on the input's key (no S3 write); passes that change the
// conversation store a new working copy, and the input stays as it was.
func TestDeterministicKeepsAnUnchangedConversation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		preset  string
		limit   int
		changed bool
	}{
		{name: "watermark without a checkpoint, under the limit", preset: "watermark", limit: 200000},
		{name: "three-tier truncates old inputs far over the limit", preset: "three-tier", limit: 4000, changed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newStepEnv(t)
			e.run.Preset, e.run.ContextLimit = tt.preset, tt.limit
			res := e.deterministic()
			require.NotNil(t, res.StepRecord)
			if !tt.changed {
				require.Equal(t, e.input.Key, res.WorkKey, "nothing changed: the input's key, no new object")
				return
			}
			require.NotEqual(t, e.input.Key, res.WorkKey)
			work, err := e.blob.Get(t.Context(), res.WorkKey)
			require.NoError(t, err)
			require.Less(t, len(work), len(e.data), "the passes made it smaller")
			input, err := e.blob.GetVerified(t.Context(), e.input.Key, e.input.SHA256)
			require.NoError(t, err)
			require.Equal(t, e.data, input, "the input is never changed")
		})
	}
}

// TestStepsUseTheResolvedPreset: a step works from the run's snapshot of
// its preset (contract.Run.Resolved, resolved by the gateway at submit),
// never from the name; a run without a snapshot is a configuration error,
// not a preset resolved again.
func TestStepsUseTheResolvedPreset(t *testing.T) {
	t.Parallel()
	watermark, err := policy.Resolve("watermark", nil)
	require.NoError(t, err)
	threeTier, err := policy.Resolve("three-tier", nil)
	require.NoError(t, err)
	tests := []struct {
		name     string
		preset   string
		resolved *policy.Preset
		changed  bool
		err      string
	}{
		{name: "the three-tier snapshot truncates", preset: "three-tier", resolved: &threeTier, changed: true},
		{name: "the watermark snapshot wins over the name", preset: "three-tier", resolved: &watermark},
		{name: "a name no longer known is not resolved again", preset: "retired-preset", resolved: &watermark},
		{name: "no snapshot: refused", preset: "three-tier", err: "carries no resolved preset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newStepEnv(t)
			e.run.Preset, e.run.Resolved = tt.preset, tt.resolved
			if tt.err != "" {
				_, err := e.env.ExecuteActivity("Deterministic", activities.DeterministicInput{Run: e.run, WorkKey: e.input.Key})
				require.ErrorContains(t, err, tt.err)
				return
			}
			res := e.deterministic()
			require.Equal(t, tt.changed, res.WorkKey != e.input.Key)
		})
	}
}

// TestDriftCheckWritesMissingItemsOnlyWhenItFails: a failed check hands
// its missing items on by key (to the repair pass and the patch); a
// passed one that still misses some records them in Postgres only, with
// no S3 write.
func TestDriftCheckWritesMissingItemsOnlyWhenItFails(t *testing.T) {
	t.Parallel()
	source := "Edited src/app/alpha.go, src/app/bravo.go, src/app/charlie.go, src/app/delta.go and src/app/echo.go."
	tests := []struct {
		name    string
		summary string
		passed  bool
	}{
		{name: "four of five kept: passed", summary: "Edited src/app/alpha.go, src/app/bravo.go, src/app/charlie.go and src/app/delta.go.", passed: true},
		{name: "one of five kept: failed", summary: "Edited src/app/alpha.go."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newStepEnv(t)
			ctx := t.Context()
			src, err := e.blob.PutContent(ctx, "acme", "text", []byte(source))
			require.NoError(t, err)
			sum, err := e.blob.PutContent(ctx, "acme", "summary", []byte(tt.summary))
			require.NoError(t, err)
			val, err := e.env.ExecuteActivity("CheckDrift", activities.DriftInput{Run: e.resolved(), Step: "large/0/drift/0",
				SourceKey: src.Key, SummaryKey: sum.Key})
			require.NoError(t, err)
			var res activities.DriftResult
			require.NoError(t, val.Get(&res))
			require.Equal(t, tt.passed, res.Passed)
			require.Positive(t, res.MissingCount, "either way something is missing")
			if tt.passed {
				require.Empty(t, res.MissingKey, "a passed check writes nothing to S3")
				return
			}
			require.NotEmpty(t, res.MissingKey)
			data, err := e.blob.Get(ctx, res.MissingKey)
			require.NoError(t, err)
			var missing []string
			require.NoError(t, json.Unmarshal(data, &missing))
			require.Len(t, missing, res.MissingCount)
			require.Contains(t, missing, "src/app/echo.go")
		})
	}
}
