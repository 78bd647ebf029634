package activities_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
)

// The steps that work on texts (a result, its chunks, a summary), on the
// in-memory stores.

// longText is a tool output of at least n characters.
func longText(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString("ok   github.com/acme/pkg/handler.go:42 request served in 12ms, status 200\n")
	}
	return sb.String()
}

// TestUnitChunk: a large result is cut into bounded chunks, stored in
// order, that give the result back joined.
func TestUnitChunk(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	text := longText(120000)
	res, err := u.a.Chunk(t.Context(), activities.ChunkInput{Run: u.run, Step: "large/0/chunk", TextKey: u.put("text", text)})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(res.Keys), 3, "50,000-character chunks")
	require.Len(t, res.Chars, len(res.Keys))
	var joined strings.Builder
	for i, k := range res.Keys {
		_, kind, _, err := blob.ParseContentKey(k)
		require.NoError(t, err)
		require.Equal(t, blob.KindChunk, kind)
		chunk := u.get(k)
		require.Equal(t, utf8.RuneCountInString(chunk), res.Chars[i])
		require.LessOrEqual(t, res.Chars[i], 50000)
		joined.WriteString(chunk)
	}
	require.Equal(t, text, joined.String())
}

// TestUnitSummarize: the summarizer's text is stored and named; without a
// summarizer the step fails for good, and records the failure.
func TestUnitSummarize(t *testing.T) {
	t.Parallel()
	t.Run("extractive", func(t *testing.T) {
		t.Parallel()
		u := newUnit(t)
		res, err := u.a.Summarize(t.Context(), activities.SummarizeInput{Run: u.run, Step: "large/0/summarize",
			Prompt: llm.PromptChunk, SourceKey: u.put("text", longText(20000)), TargetChars: 2000})
		require.NoError(t, err)
		require.Equal(t, offline.ExtractiveModel, res.Model)
		require.True(t, res.Offline())
		summary := u.get(res.Key)
		require.NotEmpty(t, summary)
		require.Equal(t, utf8.RuneCountInString(summary), res.Chars)
		require.NotNil(t, res.StepRecord)
		require.Equal(t, "llm", res.StepRecord.Kind)
	})
	t.Run("no summarizer", func(t *testing.T) {
		t.Parallel()
		u := newUnit(t)
		u.a.Summarizer = nil
		_, err := u.a.Summarize(t.Context(), activities.SummarizeInput{Run: u.run, Step: "large/0/summarize",
			Prompt: llm.PromptChunk, SourceKey: u.put("text", "x")})
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		require.True(t, app.NonRetryable())
		require.Equal(t, []string{"large/0/summarize"}, u.store.stepNames())
	})
}

// TestUnitFallback: each fallback mode makes a summary without an LLM; an
// unknown mode is a configuration error.
func TestUnitFallback(t *testing.T) {
	t.Parallel()
	source := longText(5000)
	for _, tt := range []struct {
		name, mode, prompt string
		check              func(t *testing.T, summary string)
		wantErr            bool
	}{
		{name: "truncate keeps the preset's first characters", mode: "truncate", check: func(t *testing.T, s string) {
			require.Equal(t, source[:1000], s)
		}},
		{name: "extractive selects lines", mode: "extractive", check: func(t *testing.T, s string) {
			require.NotEmpty(t, s)
			require.Less(t, len(s), len(source))
		}},
		{name: "extractive fills a structured prompt's sections", mode: "extractive", prompt: llm.PromptHistory,
			check: func(t *testing.T, s string) { require.NotEmpty(t, s) }},
		{name: "unknown mode", mode: "guess", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			res, err := u.a.Fallback(t.Context(), activities.FallbackInput{Run: u.run, Step: "large/0/fallback",
				SourceKey: u.put("text", source), TargetChars: 500, Mode: tt.mode, Prompt: tt.prompt})
			if tt.wantErr {
				require.ErrorContains(t, err, "unknown fallback mode")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.mode, res.Fallback)
			require.True(t, res.Offline())
			tt.check(t, u.get(res.Key))
		})
	}
}

// TestUnitMerge: chunk summaries are joined in order, trimmed, one blank
// line apart.
func TestUnitMerge(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	keys := []string{u.put("summary", "  first part\n"), u.put("summary", "second part"), u.put("summary", "\nthird\n\n")}
	res, err := u.a.Merge(t.Context(), activities.MergeInput{Run: u.run, Step: "large/0/merge", Keys: keys})
	require.NoError(t, err)
	want := "first part\n\nsecond part\n\nthird"
	require.Equal(t, want, u.get(res.Key))
	require.Equal(t, len(want), res.Chars)
}

// TestUnitCheckDrift: the check records its verdicts in one write; only a
// failed check stores its missing items, for the repair pass.
func TestUnitCheckDrift(t *testing.T) {
	t.Parallel()
	source := "Edited src/app/alpha.go, src/app/bravo.go, src/app/charlie.go, src/app/delta.go and src/app/echo.go."
	for _, tt := range []struct {
		name, summary string
		passed        bool
	}{
		{name: "four of five kept", summary: "Edited src/app/alpha.go, src/app/bravo.go, src/app/charlie.go and src/app/delta.go.", passed: true},
		{name: "one of five kept", summary: "Edited src/app/alpha.go."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			res, err := u.a.CheckDrift(t.Context(), activities.DriftInput{Run: u.run, Step: "large/0/drift/0",
				SourceKey: u.put("text", source), SummaryKey: u.put("summary", tt.summary)})
			require.NoError(t, err)
			require.Equal(t, tt.passed, res.Passed)
			require.Positive(t, res.MissingCount)
			require.Len(t, u.store.drifts, 2, "the identifiers' verdict and the fabrication check's")
			require.Equal(t, "large/0/drift/0", u.store.drifts[0].Step)
			require.Equal(t, tt.passed, u.store.drifts[0].Passed)
			if tt.passed {
				require.Empty(t, res.MissingKey)
				return
			}
			var missing []string
			require.NoError(t, json.Unmarshal([]byte(u.get(res.MissingKey)), &missing))
			require.Len(t, missing, res.MissingCount)
			require.Contains(t, missing, "src/app/echo.go")
		})
	}
}

// TestUnitPatch: the items still missing are appended to the summary;
// with none, the summary stays as it is.
func TestUnitPatch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		missing []string
		want    string
	}{
		{name: "missing items", missing: []string{"src/a.go", "E1234"},
			want: "Summary.\n\nIdentifiers kept by the drift check:\n- src/a.go\n- E1234\n"},
		{name: "nothing missing", want: "Summary."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			missingKey := ""
			if tt.missing != nil {
				data, err := json.Marshal(tt.missing)
				require.NoError(t, err)
				missingKey = u.put("drift", string(data))
			}
			res, err := u.a.Patch(t.Context(), activities.PatchInput{Run: u.run, Step: "large/0/patch",
				SummaryKey: u.put("summary", "Summary.\n"), MissingKey: missingKey})
			require.NoError(t, err)
			require.Equal(t, tt.want, u.get(res.Key))
			require.Equal(t, "patch", res.Fallback)
		})
	}
}

// TestUnitTextOfAnotherTenant: a key of another tenant is refused before
// the store is asked, whatever step reads it.
func TestUnitTextOfAnotherTenant(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	ref, err := u.blob.PutContentString(t.Context(), "other", "summary", "secret")
	require.NoError(t, err)
	_, err = u.a.Merge(t.Context(), activities.MergeInput{Run: u.run, Step: "large/0/merge", Keys: []string{ref.Key}})
	require.ErrorContains(t, err, "another tenant")
}
