package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestStatusFollowsPromotion runs `starter status` on a real schema: a
// run over its limit, a what-if replay of it and a replay that repaired
// it. Before the promotion both replays are audit only; after it the
// report follows the promoted replay (usage after it, one audit-only
// replay, the promotion named), its truncations are counted once, and
// the history table says which rows are what.
func TestStatusFollowsPromotion(t *testing.T) {
	// t.Setenv: not parallel.
	url := storetest.NewURL(t)
	st := storetest.Open(t, url)
	ctx := t.Context()
	truncated := []store.PassStat{{Name: "truncate-inputs", Applied: true, Count: 3, TokensSaved: 300},
		{Name: "history", Applied: true, Count: 8, TokensSaved: 400}}
	for _, r := range []struct {
		id, replayOf string
		over         bool
		after        int64
	}{{"orig", "", true, 1200}, {"what-if", "orig", false, 700}, {"repair", "orig", false, 600}} {
		_, _, err := st.CreateRun(ctx, store.Run{ID: r.id, Tenant: "acme", Session: "s1", EventID: r.id, Trigger: "manual",
			Preset: "adaptive", Status: store.RunPending, ReplayOf: r.replayOf})
		require.NoError(t, err)
		stats, err := json.Marshal(store.RunStats{Stats: contract.Stats{Passes: truncated, ContextLimit: 1000}, UsageAfter: float64(r.after) / 1000})
		require.NoError(t, err)
		res := store.RunResult{TokensAfter: r.after, Stats: stats}
		if r.over {
			res.OverLimit, res.OverLimitReason = true, "too big"
		}
		_, err = st.CommitRun(ctx, r.id, res)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // runs of a session start one after another
	}
	t.Setenv("DATABASE_URL", url)
	status := func() string {
		t.Helper()
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"status", "--tenant", "acme", "--session", "s1"})
		require.NoError(t, root.ExecuteContext(ctx), out.String())
		return out.String()
	}

	before := status()
	require.Contains(t, before, "**Estimated Usage:** 120.0% (1200 of 1000, after run orig)")
	require.Contains(t, before, "- **Replays:** 2 (audit only: not the session's state)")
	require.Contains(t, before, "- **Tool inputs truncated:** 3 (300 tokens saved)", "the replays' truncations are what-ifs")
	require.NotContains(t, before, "Promoted replay")
	require.Contains(t, before, "| repair (replay, audit only) | truncate-inputs | 3 | 300 |")

	_, _, err := st.Promote(ctx, "acme", "repair", "test")
	require.NoError(t, err)
	after := status()
	require.Contains(t, after, "**Estimated Usage:** 60.0% (600 of 1000, after promoted replay repair of run orig)")
	require.Contains(t, after, "- **Replays:** 1 (audit only: not the session's state)", "the promoted replay is the session's run")
	require.Contains(t, after, "- **Promoted replay:** repair repairs run orig (the session's state since ")
	require.Contains(t, after, "- **Tool inputs truncated:** 3 (300 tokens saved)", "counted once: the replay's, not the original's too")
	require.Contains(t, after, "- **Summarisations performed:** 1\n")
	require.Contains(t, after, "- **Runs:** 2 succeeded, 1 over_limit\n")
	for _, row := range []string{"| orig (replaced by its promoted replay) | truncate-inputs |", "| what-if (replay, audit only) | truncate-inputs |",
		"| repair (promoted replay) | truncate-inputs |"} {
		require.Contains(t, after, row)
	}
	require.Equal(t, 3, strings.Count(after, "audit only"), "the replay count and the what-if's two rows, nothing else")
}

func TestSessionArg(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flag    string
		args    []string
		session string
		rest    []string
		err     string
	}{
		{name: "argument", args: []string{"s1"}, session: "s1", rest: []string{}},
		{name: "flag", flag: "s1", session: "s1"},
		{name: "argument and query", args: []string{"s1", "needle"}, session: "s1", rest: []string{"needle"}},
		{name: "flag and query", flag: "s1", args: []string{"needle"}, session: "s1", rest: []string{"needle"}},
		{name: "both, agreeing", flag: "s1", args: []string{"s1"}, session: "s1", rest: []string{}},
		{name: "neither", err: "starter status SESSION"},
	} {
		session, rest, err := sessionArg("status", tc.flag, tc.args)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.session, session, tc.name)
		require.Equal(t, len(tc.rest), len(rest), tc.name)
	}
}

func TestWrapKeepsEveryWord(t *testing.T) {
	t.Parallel()
	msg := "llm unknown: call to http://127.0.0.1:43117/v1/chat/completions failed: dial tcp 127.0.0.1:43117: connect: connection refused"
	got := wrap(msg, 40, "    ")
	require.Equal(t, strings.Fields(msg), strings.Fields(got), "nothing cut")
	for _, line := range strings.Split(got, "\n") {
		require.LessOrEqual(t, len([]rune(line)), 40+len("127.0.0.1:43117/v1/chat/completions"), line)
	}
	require.Contains(t, got, "connection refused")
}
