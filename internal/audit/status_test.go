package audit_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// statusSession stores a session of four runs: n1, a run with a history
// summary, the budget ladder's and a handoff's; o, a run over its limit;
// w, a what-if replay of o; and r, a replay of o that is promoted when
// promote is set (its handoff reuses its history summary). Every
// committed run truncated tool inputs.
func statusSession(t *testing.T, st *store.Store, promote bool) {
	t.Helper()
	ctx := t.Context()
	pass := func(name string, count, saved int, note string) store.PassStat {
		return store.PassStat{Name: name, Applied: true, Count: count, TokensSaved: saved, Note: note}
	}
	type seeded struct {
		id, replayOf string
		over         bool
		passes       []store.PassStat
	}
	for _, r := range []seeded{
		{id: "n1", passes: []store.PassStat{pass("truncate-inputs", 2, 100, ""), pass("history", 10, 500, ""),
			pass("budget/history", 4, 200, ""), pass("handoff/summary", 1, 0, "summary by gpt-4o-mini"),
			{Name: "map-reduce", Note: "skipped"}, pass("history/reflect", 3, 0, "")}},
		{id: "o", over: true, passes: []store.PassStat{pass("truncate-inputs", 3, 300, ""), pass("history", 8, 400, "")}},
		{id: "w", replayOf: "o", passes: []store.PassStat{pass("truncate-inputs", 3, 300, ""), pass("history", 8, 450, "")}},
		{id: "r", replayOf: "o", passes: []store.PassStat{pass("truncate-inputs", 3, 300, ""), pass("history", 9, 600, ""),
			pass("handoff/summary", 1, 0, "the run's history summary")}},
	} {
		_, _, err := st.CreateRun(ctx, store.Run{ID: r.id, Tenant: "acme", Session: "s1", EventID: r.id, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending, ReplayOf: r.replayOf})
		require.NoError(t, err)
		stats, err := json.Marshal(store.RunStats{Stats: contract.Stats{Passes: r.passes, ContextLimit: 1000, Unit: "tokens"}, UsageAfter: 0.5})
		require.NoError(t, err)
		res := store.RunResult{TokensAfter: 500, Stats: stats}
		if r.over {
			res.OverLimit, res.OverLimitReason = true, "too big"
		}
		_, err = st.CommitRun(ctx, r.id, res)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // runs of a session start one after another
	}
	if promote {
		_, _, err := st.Promote(ctx, "acme", "r", "test")
		require.NoError(t, err)
	}
}

// TestStatusCountsTheSessionsState: the report adds up the runs that are
// the session's state. Before the promotion, that is n1 and o: both
// replays are what-ifs. After it, the promoted replay r counts in place
// of the run it repaired, once (no truncation or summary of o and r
// counted twice), and is the session's last run. Every summary counts
// (history, ladder, handoff), but a handoff reusing the run's history
// summary is not a second one, nor is a log's reflection.
func TestStatusCountsTheSessionsState(t *testing.T) {
	t.Parallel()
	for _, promote := range []bool{false, true} {
		st := storetest.New(t)
		statusSession(t, st, promote)
		s, err := (&audit.Service{Store: st}).Status(t.Context(), "acme", "s1")
		require.NoError(t, err)
		require.Equal(t, map[string]int{"succeeded": 3, "over_limit": 1}, s.Runs, "every run, by status")
		if !promote {
			require.Equal(t, "o", s.LastRunID, "the run over its limit is what the agent has")
			require.Equal(t, 2, s.Replays)
			require.Zero(t, s.PromotedReplays)
			require.Equal(t, 5, s.Truncations, "n1 and o")
			require.Equal(t, 400, s.TruncatedTokens)
			require.Equal(t, 4, s.Summarisations, "n1's history, ladder and handoff summaries, o's history")
			continue
		}
		require.Equal(t, "r", s.LastRunID, "the promoted replay is the session's state")
		require.Equal(t, 1, s.Replays, "only the what-if replay is audit only")
		require.Equal(t, 1, s.PromotedReplays)
		require.Len(t, s.Promotions, 1)
		require.Equal(t, 5, s.Truncations, "n1 and r, the repaired o no longer")
		require.Equal(t, 400, s.TruncatedTokens)
		require.Equal(t, 4, s.Summarisations, "n1's three, r's history (its handoff reused it)")
		marks := map[string][3]bool{}
		for _, h := range s.History {
			marks[h.RunID] = [3]bool{h.Replay, h.Promoted, h.Superseded}
		}
		require.Equal(t, map[string][3]bool{"n1": {}, "o": {false, false, true}, "w": {true, false, false}, "r": {false, true, false}}, marks)
	}
}

// TestExportMarksTheSessionsState: each exported run says whether it is
// its session's state, as the status report counts it: the promoted
// replay is, the run it repaired is not (and names the replay), the
// what-if replay is not; in JSON lines and in CSV alike.
func TestExportMarksTheSessionsState(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	statusSession(t, st, true)
	svc := &audit.Service{Store: st}
	var buf bytes.Buffer
	require.NoError(t, svc.Export(t.Context(), "acme", store.RunFilter{}, audit.FormatJSONL, false, &buf))
	type mark struct {
		State      bool   `json:"session_state"`
		Promoted   bool   `json:"promoted"`
		RepairedBy string `json:"repaired_by"`
		ReplayOf   string `json:"replay_of"`
	}
	got := map[string]mark{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var line struct {
			ID string `json:"id"`
			mark
		}
		require.NoError(t, dec.Decode(&line))
		got[line.ID] = line.mark
	}
	require.Equal(t, map[string]mark{
		"n1": {State: true}, "o": {RepairedBy: "r"}, "w": {ReplayOf: "o"}, "r": {State: true, Promoted: true, ReplayOf: "o"},
	}, got)

	buf.Reset()
	require.NoError(t, svc.Export(t.Context(), "acme", store.RunFilter{}, audit.FormatCSV, false, &buf))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Equal(t, audit.CSVHeader, rows[0])
	k := slices.Index(audit.CSVHeader, "session_state")
	require.Equal(t, []string{"session_state", "promoted", "repaired_by"}, rows[0][k:k+3])
	csvMarks := map[string][]string{}
	for _, row := range rows[1:] {
		csvMarks[row[0]] = row[k : k+3]
	}
	require.Equal(t, map[string][]string{"n1": {"true", "false", ""}, "o": {"false", "false", "r"}, "w": {"false", "false", ""},
		"r": {"true", "true", ""}}, csvMarks)
}

// TestExportSaysDegradedAndFigures: a run that went through a fallback is
// marked degraded, with its reasons, beside its stats in JSON lines and
// in the CSV's appended columns, with its cost, cache and summary log
// figures; a run without figures has empty cells, not zeros; the
// degraded filter keeps it alone.
func TestExportSaysDegradedAndFigures(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := t.Context()
	for _, r := range []struct {
		id    string
		stats store.RunStats
	}{
		{"plain", store.RunStats{}},
		{"fell-back", store.RunStats{Stats: contract.Stats{DegradedReasons: []string{"the summarizer failed: the extractive fallback wrote a summary instead"},
			Cost:       &contract.CostFigures{SummarizerUSD: 0.002, CacheRewriteTokens: 900, TokensShed: 4000, NetSavingUSD: 0.01, Turns: 7},
			Cache:      &contract.CacheFigures{PrefixTokens: 1200, RewriteTokens: 900, PrefixShare: 0.57},
			SessionLog: &contract.LogFigures{Blocks: 2, Tokens: 640, Appended: 1}}}},
	} {
		_, err := st.SubmitRun(ctx, store.Run{ID: r.id, Tenant: "acme", Session: "s1", EventID: r.id, Trigger: "threshold"}, "b", nil)
		require.NoError(t, err)
		raw, err := json.Marshal(r.stats)
		require.NoError(t, err)
		_, err = st.CommitRun(ctx, r.id, store.RunResult{OutputKey: "k", OutputSHA256: strings.Repeat("a", 64), Stats: raw})
		require.NoError(t, err)
	}
	svc := &audit.Service{Store: st}

	var buf bytes.Buffer
	require.NoError(t, svc.Export(ctx, "acme", store.RunFilter{}, audit.FormatJSONL, false, &buf))
	lines := map[string]audit.ExportRun{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var l audit.ExportRun
		require.NoError(t, dec.Decode(&l))
		lines[l.ID] = l
	}
	require.True(t, lines["fell-back"].Degraded)
	require.Equal(t, []string{"the summarizer failed: the extractive fallback wrote a summary instead"}, lines["fell-back"].DegradedReasons)
	require.False(t, lines["plain"].Degraded)

	buf.Reset()
	require.NoError(t, svc.Export(ctx, "acme", store.RunFilter{}, audit.FormatCSV, false, &buf))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	col := func(row []string, name string) string { return row[slices.Index(rows[0], name)] }
	byID := map[string][]string{}
	for _, row := range rows[1:] {
		byID[row[0]] = row
	}
	require.Equal(t, "true", col(byID["fell-back"], "degraded"))
	require.Contains(t, col(byID["fell-back"], "degraded_reasons"), "extractive fallback")
	require.Equal(t, "0.01", col(byID["fell-back"], "cost.net_saving_usd"))
	require.Equal(t, "900", col(byID["fell-back"], "cache.rewrite_tokens"))
	require.Equal(t, "2", col(byID["fell-back"], "session_log.blocks"))
	require.Equal(t, "false", col(byID["plain"], "degraded"))
	require.Equal(t, "", col(byID["plain"], "cost.net_saving_usd"), "a figure not recorded is empty")

	runs, err := st.ListRuns(ctx, store.RunFilter{Tenant: "acme", Degraded: true})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "fell-back", runs[0].ID)
}
