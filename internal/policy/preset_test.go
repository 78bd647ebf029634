package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuiltinPresetsCarryTheSeedNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		check func(t *testing.T, p Preset)
	}{
		{ReactTwoLayer, func(t *testing.T, p Preset) {
			require.Equal(t, "chars", p.Encoding)
			require.Equal(t, 200000, p.ContextLimit)
			require.Equal(t, 8000, p.FixedOverhead)
			require.Equal(t, 50000, p.LargeResult.ThresholdChars)
			require.Equal(t, 50000, p.LargeResult.ChunkChars)
			require.InDelta(t, 0.10, p.LargeResult.Ratio, 1e-9)
			require.Equal(t, 50000, p.LargeResult.SecondPassAboveChars)
			require.Equal(t, 1000, p.LargeResult.TruncateChars)
			require.InDelta(t, 0.80, p.GlobalResults.TriggerUsage, 1e-9)
			require.Equal(t, 5000, p.GlobalResults.MinChars)
			require.False(t, p.History.Enabled, "the ReAct two-layer design never drops a turn")
		}},
		{Watermark, func(t *testing.T, p Preset) {
			require.True(t, p.Watermark.Enabled)
			require.Contains(t, p.Watermark.CheckpointTools, "deactivate_augments")
			require.Contains(t, p.Watermark.CheckpointTools, "compress_to_checkpoint")
		}},
		{OffloadCompact, func(t *testing.T, p Preset) {
			require.Equal(t, 15000, p.History.MaxFreedTokens)
			require.Equal(t, 8000, p.History.TargetTokens)
			require.Equal(t, 5, p.History.KeepLast)
			require.Equal(t, 3, p.History.Attempts)
			require.Equal(t, "history", p.History.Prompt)
			require.True(t, p.History.RestoreOffloads)
			require.True(t, p.History.DeleteOffloads)
		}},
		{AutoSummarize, func(t *testing.T, p Preset) {
			require.InDelta(t, 0.50, p.History.TriggerUsage, 1e-9)
			require.Equal(t, 3, p.History.KeepLast)
			require.Equal(t, "summary-first", p.History.Style)
			require.True(t, p.PostProcess.Enabled)
			require.Equal(t, 200, p.PostProcess.SmallTokens)
			require.Equal(t, 500, p.PostProcess.JSONTokens)
			require.Equal(t, 500, p.PostProcess.FileLines)
			require.Equal(t, 100, p.PostProcess.DBRows)
			require.True(t, p.Protection.System)
			require.NotEmpty(t, p.Protection.PinMarkers)
		}},
		{ThreeTier, func(t *testing.T, p Preset) {
			require.Equal(t, 15000, p.Offload.MinTokens)
			require.Equal(t, 500, p.Offload.PreviewChars)
			require.InDelta(t, 0.50, p.Truncate.TriggerUsage, 1e-9)
			require.InDelta(t, 0.75, p.History.TriggerUsage, 1e-9)
			require.InDelta(t, 0.85, p.History.CriticalUsage, 1e-9)
			require.Equal(t, "session", p.History.Prompt)
			require.True(t, p.Drift.Enabled)
		}},
		{Adaptive, func(t *testing.T, p Preset) {
			require.True(t, p.Watermark.Enabled)
			require.True(t, p.Offload.Enabled)
			require.True(t, p.Truncate.Enabled)
			require.True(t, p.History.Enabled)
			require.True(t, p.Drift.Enabled)
		}},
	}
	require.Len(t, tests, len(Names()))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Builtin(tc.name)
			require.NoError(t, err)
			require.NoError(t, p.Validate())
			require.Equal(t, tc.name, p.Name)
			tc.check(t, p)
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := Resolve("", nil)
	require.NoError(t, err)
	require.Equal(t, Adaptive, p.Name)

	p, err = Resolve(OffloadCompact, json.RawMessage(`{"history":{"keep_last":7}}`))
	require.NoError(t, err)
	require.Equal(t, 7, p.History.KeepLast)
	require.Equal(t, 8000, p.History.TargetTokens, "fields not overridden keep the preset's value")

	_, err = Resolve("nope", nil)
	require.ErrorContains(t, err, `unknown preset "nope"`)
	_, err = Resolve(Watermark, json.RawMessage(`{"watermark":{"keep_befor":1}}`))
	require.ErrorContains(t, err, "keep_befor")
	_, err = Resolve(ThreeTier, json.RawMessage(`{"history":{"prompt":"poem"}}`))
	require.ErrorContains(t, err, "history.prompt")
	_, err = Resolve(ThreeTier, json.RawMessage(`{"target_usage":2}`))
	require.ErrorContains(t, err, "target_usage")
	// Issue 20: a negative count was accepted and failed the run later.
	_, err = Resolve(Watermark, json.RawMessage(`{"watermark":{"keep_before":-5}}`))
	require.ErrorContains(t, err, "watermark.keep_before")
}

func TestLoadFileAndMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"presets":{"three-tier":{"offload":{"min_tokens":9000}}}}`), 0o600))
	o, err := LoadFile(good)
	require.NoError(t, err)
	p, err := Resolve(ThreeTier, o[ThreeTier])
	require.NoError(t, err)
	require.Equal(t, 9000, p.Offload.MinTokens)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"presets":{"three-tier":{"offload":{"min_tokens":"x"}}}}`), 0o600))
	_, err = LoadFile(bad)
	require.ErrorContains(t, err, "bad.json")

	merged, err := Merge(json.RawMessage(`{"history":{"keep_last":2,"attempts":5}}`), json.RawMessage(`{"history":{"keep_last":9}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"history":{"keep_last":9,"attempts":5}}`, string(merged))
}
