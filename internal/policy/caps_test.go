package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCallerOverridesAreBounded(t *testing.T) {
	t.Parallel()
	caps := DefaultCaps()
	caps.SummarizerModels = []string{"gpt-4o-mini"}
	tests := []struct {
		name, raw, field string
	}{
		{"empty", ``, ""},
		{"attempts at the cap", `{"history":{"attempts":5}}`, ""},
		{"attempts above", `{"history":{"attempts":1000000}}`, "history.attempts"},
		{"parallelism at the cap", `{"large_result":{"parallelism":16}}`, ""},
		{"parallelism above", `{"large_result":{"parallelism":1e8}}`, "large_result.parallelism"},
		{"layer 2 parallelism above", `{"global_results":{"parallelism":17}}`, "global_results.parallelism"},
		{"chunk at the minimum", `{"large_result":{"chunk_chars":10000}}`, ""},
		{"chunk below", `{"large_result":{"chunk_chars":10}}`, "large_result.chunk_chars"},
		{"repair passes above", `{"drift":{"repair_passes":50}}`, "drift.repair_passes"},
		{"target tokens above", `{"history":{"target_tokens":1000000}}`, "history.target_tokens"},
		{"allowed model", `{"summarizer_model":"gpt-4o-mini"}`, ""},
		{"other model", `{"summarizer_model":"o1-pro"}`, "summarizer_model"},
		{"operator field", `{"encoding":"chars"}`, "encoding"},
		{"name", `{"name":"x"}`, "name"},
		{"unknown field", `{"histroy":{"attempts":2}}`, "histroy"},
		{"unknown nested field, by its path", `{"cost":{"skip_unprofitable":true,"turns":7}}`, "cost.turns"},
		{"empty pin marker", `{"protection":{"pin_markers":["PIN", ""]}}`, "protection.pin_markers"},
		{"blank pin marker", `{"protection":{"pin_markers":["  "]}}`, "protection.pin_markers"},
		{"wrong type", `{"history":3}`, "history"},
		{"budget opt-out refused", `{"budget":{"enabled":false}}`, "budget.enabled"},
		{"long string", `{"history":{"prompt":"` + strings.Repeat("x", 300) + `"}}`, "history.prompt"},
		{"too many markers", `{"protection":{"pin_markers":[` + strings.TrimSuffix(strings.Repeat(`"m",`, 40), ",") + `]}}`, "protection.pin_markers"},
		{"debug stays allowed (the auto-summarize design)", `{"debug":true}`, ""},
		{"keep_last", `{"history":{"keep_last":4}}`, ""},
		{"too large", `{"protection":{"pin_markers":["` + strings.Repeat("y", 20000) + `"]}}`, "overrides"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckCallerOverrides(json.RawMessage(tt.raw), caps)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var oe *OverrideError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, tt.field, oe.Field, oe.Reason)
		})
	}
	open := caps
	open.AllowBudgetOptOut = true
	require.NoError(t, CheckCallerOverrides(json.RawMessage(`{"budget":{"enabled":false}}`), open))
	var zero Caps
	require.Error(t, CheckCallerOverrides(json.RawMessage(`{"history":{"attempts":6}}`), zero), "zero caps take the defaults")
}

// TestValidateRefusesAnEmptyPinMarker: a preset file (the operator's)
// with an empty pin marker is refused too: it would pin every message.
func TestValidateRefusesAnEmptyPinMarker(t *testing.T) {
	t.Parallel()
	_, err := Resolve(Adaptive, json.RawMessage(`{"protection":{"pin_markers":[""]}}`))
	require.ErrorContains(t, err, "protection.pin_markers")
}

// TestOverridesNeverChangeTheBuiltins: a caller's list override (pin
// markers, checkpoint tools, write tools) decodes into its own copy:
// before, JSON decoding reused the built-in list's backing array, so
// one request's `"pin_markers": ["x"]` rewrote the markers of every
// later run in the process.
func TestOverridesNeverChangeTheBuiltins(t *testing.T) {
	t.Parallel()
	before, err := Builtin(ThreeTier)
	require.NoError(t, err)
	_, err = Resolve(ThreeTier, json.RawMessage(`{"protection":{"pin_markers":["MINE"]},"watermark":{"checkpoint_tools":["mine"]},"truncate":{"tools":["mine"]}}`))
	require.NoError(t, err)
	after, err := Builtin(ThreeTier)
	require.NoError(t, err)
	require.Equal(t, before.Protection.PinMarkers, after.Protection.PinMarkers)
	require.Equal(t, before.Watermark.CheckpointTools, after.Watermark.CheckpointTools)
	require.Equal(t, before.Truncate.Tools, after.Truncate.Tools)
	require.Equal(t, DefaultPinMarkers(), after.Protection.PinMarkers)
}

// TestAutoSummarizeProtectsTheActiveCheckpoint: seed 003 never
// summarizes active state checkpoints; its preset protects the latest
// checkpoint call, and the others do not unless asked.
func TestAutoSummarizeProtectsTheActiveCheckpoint(t *testing.T) {
	t.Parallel()
	p, err := Builtin(AutoSummarize)
	require.NoError(t, err)
	require.True(t, p.Protection.Checkpoints)
	require.NotEmpty(t, p.Watermark.CheckpointTools)
	q, err := Resolve(Adaptive, json.RawMessage(`{"protection":{"checkpoints":true}}`))
	require.NoError(t, err)
	require.True(t, q.Protection.Checkpoints)
	require.NoError(t, CheckCallerOverrides(json.RawMessage(`{"protection":{"checkpoints":true}}`), DefaultCaps()))
}
