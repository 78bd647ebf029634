package activities_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/internal/drift"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// driftSource is a small transcript whose identifiers a summary must keep:
// a path, a command written through a heredoc in a JSON tool input, an
// error, a reservation code, and the product's own reference block and
// recovery id (which it need not).
const driftSource = "[user]\nFix the flight lookup; the reservation is ZFA04Y.\n\n" +
	"[assistant tool call bash]\n" + `{"command":"cd /testbed && cat > check.py << 'EOF'\nprint(\"looking up the reservation\")\nEOF\npython check.py"}` + "\n\n" +
	"[tool tool result bash]\nTraceback (most recent call last):\nKeyError: 'ZFA04Y'\n\n" +
	"[assistant tool call bash]\n" + `{"path":"src/flights/lookup.py","truncated_input":"## Tool Call: bash\n**Original Size:** 879 tokens\n**Path:** src/flights/lookup.py"}` + "\n\n" +
	"[tool tool result bash]\nedited src/flights/lookup.py\n[Recover the original result with the recover_context tool, id: " +
	"afdc04fac392c30720bd98e346e2306841f0e9769966021520328057854e17f2.m132b1]\n"

// driftKept is a summary of driftSource that keeps each of its identifiers,
// the command as a reader sees it (unescaped, its heredoc marker kept).
const driftKept = "The user asked to fix the flight lookup of reservation ZFA04Y.\n" +
	"- cd /testbed && cat > check.py << 'EOF' → KeyError: 'ZFA04Y'\n- python check.py\n" +
	"- src/flights/lookup.py: edited\n- Next: rerun check.py.\n"

// TestUnitCheckDriftVerdicts: a summary that keeps every identifier the
// source wrote passes, whatever the escapes and whatever the product wrote
// itself (its token counts and recovery ids are not asked for); one that
// keeps every identifier but invents a quote fails on the fabrication
// check's verdict alone; one that drops an identifier of the source fails
// on its identifiers'.
func TestUnitCheckDriftVerdicts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, summary string
		passed        bool
		fabricated    int
	}{
		{name: "every identifier kept", summary: driftKept, passed: true},
		{name: "a quote copied escaped from a tool input", summary: driftKept + `- ran: print(\"looking up the reservation\")` + "\n", passed: true},
		{name: "every identifier kept, one quote invented",
			summary: driftKept + "The user said: \"please rewrite the whole lookup in Rust\".\n", fabricated: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newUnit(t)
			res, err := u.a.CheckDrift(t.Context(), activities.DriftInput{Run: u.run, Step: "large/0/drift/0",
				SourceKey: u.put("text", driftSource), SummaryKey: u.put("summary", tt.summary)})
			require.NoError(t, err)
			require.Equal(t, tt.passed, res.Passed, "verdicts: %+v", u.store.drifts)
			require.Equal(t, tt.fabricated, res.Fabricated)
			require.Len(t, u.store.drifts, 2, "the identifiers' verdict and the fabrication check's")
			ident, fab := u.store.drifts[0], u.store.drifts[1]
			require.Equal(t, tt.passed, ident.Passed, "the run's verdict row: %s", ident.Verdict)
			require.Equal(t, tt.fabricated == 0, fab.Passed, fab.Verdict)
			for _, m := range ident.Missing {
				require.NotContains(t, m, "879 tokens", "a figure the product wrote is not asked for")
				require.NotContains(t, m, "m132b1", "a recovery id is not asked for")
			}
			if tt.fabricated > 0 {
				require.Equal(t, 1.0, ident.Score, "every identifier was kept")
				require.Contains(t, ident.Verdict, "invented")
				require.Contains(t, strings.Join(fab.Missing, "\n"), "rewrite the whole lookup in Rust")
			}
		})
	}
}

// TestUnitCheckDriftDroppedIdentifier: a summary that drops an
// identifier of its source fails when what it keeps is under the preset's
// share (two identifiers, one kept: 0.5 < 0.6), and names it for the
// repair pass.
func TestUnitCheckDriftDroppedIdentifier(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	source := "[user]\nThe reservation is ZFA04Y; the lookup is in src/flights/lookup.py.\n"
	res, err := u.a.CheckDrift(t.Context(), activities.DriftInput{Run: u.run, Step: "large/0/drift/0",
		SourceKey: u.put("text", source), SummaryKey: u.put("summary", "The lookup in src/flights/lookup.py was fixed.")})
	require.NoError(t, err)
	require.False(t, res.Passed)
	require.Zero(t, res.Fabricated)
	require.Equal(t, []string{"ZFA04Y"}, u.store.drifts[0].Missing)
	require.NotEmpty(t, res.MissingKey)
}

// TestUnitOwnRepairPassesItsCheck: on a real session (the sample run's
// history), a vague summary fails the drift check of a history summary;
// the product's own answers to that, the offline repair pass and the
// patch, each pass the same check.
func TestUnitOwnRepairPassesItsCheck(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, plan := u.planned()
	prep, err := u.a.PrepareHistory(t.Context(), activities.HistoryInput{Run: u.run, WorkKey: in.Key})
	require.NoError(t, err)
	require.False(t, prep.Skip)
	check := func(step, key string) activities.DriftResult {
		t.Helper()
		res, err := u.a.CheckDrift(t.Context(), activities.DriftInput{Run: u.run, Step: step, SourceKey: prep.TranscriptKey, SummaryKey: key})
		require.NoError(t, err)
		return res
	}
	vague := u.put("summary", "## Session summary\nThe agent looked into the issue and made progress.\n")
	failed := check("history/drift/0", vague)
	require.False(t, failed.Passed)
	require.NotEmpty(t, failed.MissingKey)

	repaired, err := u.a.Summarize(t.Context(), activities.SummarizeInput{Run: u.run, Step: "history/repair/1", Prompt: llm.PromptRepair,
		SourceKey: prep.TranscriptKey, ContextKey: vague, MissingKey: failed.MissingKey, ArchiveKey: plan.Archive.Key, TargetTokens: 4000})
	require.NoError(t, err)
	res := check("history/drift/1", repaired.Key)
	require.True(t, res.Passed, "the offline repair fails its own check: %+v", u.store.lastDrifts(6))
	require.Zero(t, res.Fabricated)

	patched, err := u.a.Patch(t.Context(), activities.PatchInput{Run: u.run, Step: "history/patch", SummaryKey: vague, MissingKey: failed.MissingKey})
	require.NoError(t, err)
	res = check("history/drift/2", patched.Key)
	require.True(t, res.Passed, "the patch fails its own check: %+v", u.store.lastDrifts(6))
}

// TestUnitDeterministicSummaryKeepsRecentIdentifiers: the offline
// summary of the sample run's history keeps what its drift check asks
// for, at the history preset's own target.
func TestUnitDeterministicSummaryKeepsRecentIdentifiers(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	in, _ := u.conversation()
	prep, err := u.a.PrepareHistory(t.Context(), activities.HistoryInput{Run: u.run, WorkKey: in.Key})
	require.NoError(t, err)
	source := u.get(prep.TranscriptKey)
	resp, err := offline.Summarizer{}.Summarize(t.Context(), llm.Request{Prompt: llm.PromptHistory, Text: source, TargetTokens: u.run.Resolved.History.TargetTokens})
	require.NoError(t, err)
	score, missing := activities.Retention(source, resp.Text, u.run.Resolved.Drift.MaxIdentifiers)
	require.GreaterOrEqual(t, score, u.run.Resolved.Drift.MinRetention, "missing: %v", missing)
	require.Empty(t, drift.FabricationCheck(source, resp.Text).Missing)
}

// lastDrifts are the last n verdicts recorded, for a failure's message.
func (m *memStore) lastDrifts(n int) []store.Drift {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.Drift(nil), m.drifts[max(0, len(m.drifts)-n):]...)
}

// TestUnitLastErrorsOfAModelSummary: a history summary by a model that
// keeps everything but the last error still open fails on that alone and
// says so (PatchOnly: the patch restores the line, no repair pass); the
// patched summary passes; the offline summary is not held to it.
func TestUnitLastErrorsOfAModelSummary(t *testing.T) {
	t.Parallel()
	source := "[user]\nFix the nightly build of the parser.\n\n" +
		"[assistant tool call bash]\nmake parser\n\n" +
		"[tool tool result bash]\n<returncode>2</returncode>\nfatal: linker cannot find -lyaml\n\n"
	summary := "The user asked to fix the nightly build of the parser. The agent ran make parser; the link step failed.\n"
	u := newUnit(t)
	src, sum := u.put("text", source), u.put("summary", summary)
	check := func(key string, offline bool) activities.DriftResult {
		t.Helper()
		res, err := u.a.CheckDrift(t.Context(), activities.DriftInput{Run: u.run, Step: "history/drift/0",
			SourceKey: src, SummaryKey: key, Offline: offline})
		require.NoError(t, err)
		return res
	}
	res := check(sum, false)
	require.False(t, res.Passed, "verdicts: %+v", u.store.lastDrifts(7))
	require.True(t, res.PatchOnly, "only the last error is missing: %+v", u.store.lastDrifts(7))
	last := u.store.lastDrifts(7)
	var lastErrors *store.Drift
	for i := range last {
		if strings.HasSuffix(last[i].Step, "/"+drift.CheckLastErrors) {
			lastErrors = &last[i]
		}
	}
	require.NotNil(t, lastErrors)
	require.Equal(t, []string{"last error: fatal: linker cannot find -lyaml"}, lastErrors.Missing)

	patched, err := u.a.Patch(t.Context(), activities.PatchInput{Run: u.run, Step: "history/patch", SummaryKey: sum, MissingKey: res.MissingKey})
	require.NoError(t, err)
	require.True(t, check(patched.Key, false).Passed)
	require.True(t, check(sum, true).Passed, "the offline summary keeps errors by its own order")
}
