package store_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

func TestCreateRunIsIdempotent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	in := store.Run{
		ID: uuid.NewString(), Tenant: "acme", Session: "s1", EventID: "ev-1", Trigger: "threshold",
		Preset: "adaptive", Model: "gpt-x", PromptVersion: "v3", TokensBefore: 1200, CharsBefore: 4800,
		InputKey: "acme/in/abc", Level: "YELLOW", Stats: json.RawMessage(`{"turns": 12}`),
	}
	first, created, err := s.CreateRun(ctx, in)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.RunPending, first.Status)
	require.Equal(t, in.TokensBefore, first.TokensBefore)
	require.Equal(t, in.InputKey, first.InputKey)
	require.JSONEq(t, string(in.Stats), string(first.Stats))
	require.False(t, first.StartedAt.IsZero())
	require.True(t, first.FinishedAt.IsZero())

	// A retry, even one carrying different figures, writes nothing.
	retry := in
	retry.TokensBefore = 999
	second, created, err := s.CreateRun(ctx, retry)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first, second)

	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, "select count(*) from runs where id = $1", in.ID).Scan(&n))
	require.Equal(t, 1, n)

	// The same id for another session is refused.
	other := in
	other.Session = "s2"
	_, _, err = s.CreateRun(ctx, other)
	require.ErrorContains(t, err, "already used")
}

func TestCreateRunValidation(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tests := []struct {
		name string
		run  store.Run
		want string
	}{
		{"no id", store.Run{Tenant: "a", Session: "b"}, "ID is empty"},
		{"no tenant", store.Run{ID: "r", Session: "b"}, "Tenant is empty"},
		{"no session", store.Run{ID: "r", Tenant: "a"}, "Session is empty"},
		{"bad status", store.Run{ID: "r", Tenant: "a", Session: "b", Status: "done"}, `unknown status "done"`},
		{"bad stats", store.Run{ID: "r", Tenant: "a", Session: "b", Stats: json.RawMessage(`{`)}, "stats is not valid JSON"},
		{"self replay", store.Run{ID: "r", Tenant: "a", Session: "b", ReplayOf: "r"}, "cannot replay itself"},
		{"replay of missing run", store.Run{ID: "r", Tenant: "a", Session: "b", ReplayOf: "nope"}, "foreign key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.CreateRun(t.Context(), tt.run)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCommitRunCommitsOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{}))
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{}), "retried StartRun")

	res := store.RunResult{TokensAfter: 300, CharsAfter: 1200, Ratio: 0.25, OutputKey: "acme/out/1",
		OutputSHA256: "ab", Level: "GREEN", Stats: json.RawMessage(`{"freed": 900}`)}
	c, err := s.CommitRun(ctx, r.ID, res)
	require.NoError(t, err)
	require.True(t, c.Committed)
	committed, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)

	// A retried commit with other figures changes nothing.
	res2 := res
	res2.TokensAfter = 1
	res2.OutputKey = "acme/out/2"
	c, err = s.CommitRun(ctx, r.ID, res2)
	require.NoError(t, err)
	require.False(t, c.Committed)
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, committed, got)
	require.Equal(t, store.RunSucceeded, got.Status)
	require.Equal(t, int64(300), got.TokensAfter)
	require.Equal(t, "acme/out/1", got.OutputKey)
	require.Equal(t, "GREEN", got.Level)
	require.False(t, got.FinishedAt.IsZero())

	// A final run stays final: no fail, no running, no plan, no archive.
	ok, err := s.FailRun(ctx, r.ID, store.Failure{Message: "late failure"})
	require.NoError(t, err)
	require.False(t, ok)
	require.ErrorIs(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{}), store.ErrRunFinal)
	require.ErrorIs(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{RunPlan: store.RunPlan{Preset: "x"}}), store.ErrRunFinal)
	require.ErrorIs(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{ArchiveKey: "k", ArchiveSHA256: "h"}), store.ErrRunFinal)
	got, err = s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, committed, got)
}

func TestCommitRunConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	r := newRun(t, s, "acme", "s1")
	const n = 8
	results := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := s.CommitRun(t.Context(), r.ID, store.RunResult{TokensAfter: int64(i + 1)})
			results[i], errs[i] = c.Committed, err
		})
	}
	wg.Wait()
	winners := 0
	winner := 0
	for i := range n {
		require.NoError(t, errs[i])
		if results[i] {
			winners++
			winner = i
		}
	}
	require.Equal(t, 1, winners)
	got, err := s.GetRun(t.Context(), r.ID)
	require.NoError(t, err)
	require.Equal(t, int64(winner+1), got.TokensAfter, "the stored figures are the winner's")
}

func TestFailRunThenCommit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	_, err := s.FailRun(ctx, r.ID, store.Failure{Message: ""})
	require.ErrorContains(t, err, "message is empty")

	ok, err := s.FailRun(ctx, r.ID, store.Failure{Class: store.ErrorSummarizer, Message: "llm: context length exceeded", Cause: "http 400"})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.FailRun(ctx, r.ID, store.Failure{Message: "llm: context length exceeded"})
	require.NoError(t, err)
	require.False(t, ok, "retried FailRun")
	c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 5})
	require.NoError(t, err)
	require.False(t, c.Committed, "commit after failure")

	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, got.Status)
	require.Equal(t, "llm: context length exceeded", got.Error)
	require.Equal(t, store.ErrorSummarizer, got.ErrorClass)
	require.Equal(t, "http 400", got.ErrorCause)
	require.Equal(t, "http 400", store.OutcomeOf(got, store.RunStats{}).ErrorCause, "the outcome says it too")
	require.Zero(t, got.TokensAfter)
}

// TestNoSkippedStatus: the final statuses are succeeded, over_limit and
// failed; the database refuses any other, "skipped" (which no code path
// ever wrote) included.
func TestNoSkippedStatus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	_, err := s.Pool().Exec(ctx, `update runs set status = 'skipped', error = 'below threshold', finished_at = now() where id = $1`, r.ID)
	require.ErrorContains(t, err, "violates check constraint")
	_, _, err = s.CreateRun(ctx, store.Run{ID: "run-skipped", Tenant: "acme", Session: "s1", Status: "skipped"})
	require.ErrorContains(t, err, `unknown status "skipped"`)
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunPending, got.Status)
}

func TestMissingRun(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	_, err := s.GetRun(ctx, "missing")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.CommitRun(ctx, "missing", store.RunResult{})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.FailRun(ctx, "missing", store.Failure{Message: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.StartRun(ctx, "missing", "acme", "s1", store.RunStart{}), store.ErrNotFound)
}

func TestStartRunPlanAndArchive(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")

	plan := store.RunPlan{Preset: "three-tier", Model: "m", PromptVersion: "p1", Level: "ORANGE",
		TokensBefore: 160000, CharsBefore: 640000}
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{RunPlan: plan}))
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{RunPlan: store.RunPlan{Level: "RED"}}), "zero fields keep values")
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, got.Status)
	require.Equal(t, "three-tier", got.Preset)
	require.Equal(t, "RED", got.Level)
	require.Equal(t, int64(160000), got.TokensBefore)
	require.Equal(t, int64(640000), got.CharsBefore)

	// A retried plan that archives sets the archive once.
	archived := store.RunStart{ArchiveKey: "acme/archive/h1", ArchiveSHA256: "h1"}
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, archived))
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, archived), "retry")
	require.ErrorContains(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{ArchiveKey: "acme/archive/h2", ArchiveSHA256: "h2"}), "already archived")

	c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	require.True(t, c.Committed)
	got, err = s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "acme/archive/h1", got.ArchiveKey)
	require.Equal(t, "h1", got.ArchiveSHA256)

	// A run finished without an archive cannot gain one.
	r2 := newRun(t, s, "acme", "s1")
	_, err = s.FailRun(ctx, r2.ID, store.Failure{Message: "boom"})
	require.NoError(t, err)
	require.ErrorIs(t, s.StartRun(ctx, r2.ID, r2.Tenant, r2.Session, archived), store.ErrRunFinal)
}

func TestReplayRun(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	orig := newRun(t, s, "acme", "s1")
	_, err := s.FailRun(ctx, orig.ID, store.Failure{Message: "boom"})
	require.NoError(t, err)
	replay, created, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: "acme", Session: "s1", ReplayOf: orig.ID})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, orig.ID, replay.ReplayOf)

	runs, err := s.ListRuns(ctx, store.RunFilter{ReplayOf: orig.ID})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, replay.ID, runs[0].ID)
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	// Runs one minute apart: index i started at base + i minutes.
	type spec struct {
		tenant, session string
		final           store.RunStatus
	}
	specs := []spec{
		{"acme", "s1", store.RunSucceeded},
		{"acme", "s1", store.RunFailed},
		{"acme", "s2", store.RunSucceeded},
		{"beta", "s1", store.RunSucceeded},
		{"acme", "s1", ""},
		{"acme", "s1", store.RunSucceeded},
	}
	ids := make([]string, len(specs))
	for i, sp := range specs {
		r, _, err := s.CreateRun(ctx, store.Run{ID: uuid.NewString(), Tenant: sp.tenant, Session: sp.session,
			StartedAt: base.Add(time.Duration(i) * time.Minute)})
		require.NoError(t, err)
		ids[i] = r.ID
		switch sp.final {
		case store.RunSucceeded:
			_, err = s.CommitRun(ctx, r.ID, store.RunResult{})
		case store.RunFailed:
			_, err = s.FailRun(ctx, r.ID, store.Failure{Message: "boom"})
		}
		require.NoError(t, err)
	}
	idsOf := func(runs []store.Run) []string {
		out := make([]string, len(runs))
		for i, r := range runs {
			out[i] = r.ID
		}
		return out
	}

	tests := []struct {
		name   string
		filter store.RunFilter
		want   []int // indexes into ids, newest first
	}{
		{"all", store.RunFilter{}, []int{5, 4, 3, 2, 1, 0}},
		{"tenant", store.RunFilter{Tenant: "acme"}, []int{5, 4, 2, 1, 0}},
		{"session", store.RunFilter{Tenant: "acme", Session: "s1"}, []int{5, 4, 1, 0}},
		{"status", store.RunFilter{Tenant: "acme", Status: store.RunSucceeded}, []int{5, 2, 0}},
		{"pending", store.RunFilter{Status: store.RunPending}, []int{4}},
		{"from", store.RunFilter{From: base.Add(3 * time.Minute)}, []int{5, 4, 3}},
		{"to", store.RunFilter{To: base.Add(2 * time.Minute)}, []int{1, 0}},
		{"window", store.RunFilter{From: base.Add(time.Minute), To: base.Add(4 * time.Minute)}, []int{3, 2, 1}},
		{"limit", store.RunFilter{Limit: 2}, []int{5, 4}},
		{"cursor", store.RunFilter{AfterID: ids[4], Limit: 2}, []int{3, 2}},
		{"cursor with filter", store.RunFilter{Tenant: "acme", Session: "s1", AfterID: ids[4]}, []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, err := s.ListRuns(t.Context(), tt.filter)
			require.NoError(t, err)
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = ids[w]
			}
			require.Equal(t, want, idsOf(runs))
		})
	}

	// Paging through everything two at a time visits each run once.
	var seen []string
	cursor := ""
	for {
		page, err := s.ListRuns(ctx, store.RunFilter{AfterID: cursor, Limit: 2})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		seen = append(seen, idsOf(page)...)
		cursor = page[len(page)-1].ID
	}
	require.Equal(t, []string{ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)

	_, err := s.ListRuns(ctx, store.RunFilter{AfterID: "nope"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.ListRuns(ctx, store.RunFilter{Session: "s1"})
	require.ErrorContains(t, err, "needs a tenant")
	_, err = s.ListRuns(ctx, store.RunFilter{Status: "weird"})
	require.ErrorContains(t, err, "unknown status")
}

// TestRunHoldsTheCallersSettings: what the caller asked for is recorded on
// the run at submit and read back as it was.
func TestRunHoldsTheCallersSettings(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r, created, err := s.CreateRun(ctx, store.Run{ID: "run-settings", Tenant: "acme", Session: "s1", Preset: "three-tier",
		AgentModel: "claude-sonnet-4", ContextLimit: 100000, Overrides: json.RawMessage(`{"history":{"keep_last":4}}`),
		InputSHA256: strings.Repeat("ab", 32)})
	require.NoError(t, err)
	require.True(t, created)
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "claude-sonnet-4", got.AgentModel)
	require.Equal(t, 100000, got.ContextLimit)
	require.JSONEq(t, `{"history":{"keep_last":4}}`, string(got.Overrides))
	require.Equal(t, strings.Repeat("ab", 32), got.InputSHA256)
	require.Empty(t, got.Model, "the summarizer model is recorded apart, by the run")
}

// TestFailRunWithUnstorableText: a failure whose message (and whose step
// errors) quote a NUL byte or invalid UTF-8, which Postgres text refuses,
// is written sanitized, never dropped: the run does not stay live.
func TestFailRunWithUnstorableText(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	msg := "record offload call_\x00x: bad byte \xff"
	step := store.Step{RunID: r.ID, Name: "deterministic", Attempt: 1, Kind: "deterministic", Error: msg}
	ok, err := s.FailRun(ctx, r.ID, store.Failure{Message: msg}, step)
	require.NoError(t, err)
	require.True(t, ok)
	again, err := s.FailRun(ctx, r.ID, store.Failure{Class: store.ErrorDependency, Message: "again"})
	require.NoError(t, err)
	require.False(t, again, "a final run keeps its first failure")
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, got.Status)
	require.Equal(t, `record offload call_\0x: bad byte `+"\uFFFD", got.Error)
	require.Equal(t, store.ErrorInternal, got.ErrorClass, "a failure without a class is internal")
	steps, err := s.ListSteps(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, got.Error, steps[0].Error)
}

// TestListRunsReadsOnlyTheTenantsRows: in a database shared by tenants, a
// small tenant's pages (the newest, and after a cursor) read a page of its
// own rows through runs_tenant_started_idx, neither the others' through
// the global index nor all of its own to sort them; the plan of ListRuns'
// own query is checked.
func TestListRunsReadsOnlyTheTenantsRows(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	// 20,000 runs, 1% of them tenant small's, interleaved in time.
	_, err := s.Pool().Exec(ctx, `
		insert into tenants (id) values ('big'), ('small');
		insert into sessions (tenant_id, id) values ('big', 's'), ('small', 's');
		insert into runs (id, tenant_id, session_id, started_at)
		select 'r-' || k, case when k % 100 = 0 then 'small' else 'big' end, 's', now() - k * interval '1 second'
		from generate_series(1, 20000) k;
		analyze runs`)
	require.NoError(t, err)

	for _, f := range []store.RunFilter{{Tenant: "small"}, {Tenant: "small", AfterID: "r-5000"}} {
		query, args := store.ListRunsQuery(f, store.DefaultListLimit)
		var plan string
		require.NoError(t, s.Pool().QueryRow(ctx, "explain (analyze, format json) "+query, args...).Scan(&plan))
		require.Contains(t, plan, "runs_tenant_started_idx", "%+v: %s", f, plan)
		require.NotContains(t, plan, `"Rows Removed by Filter"`, "%+v reads no other tenant's rows: %s", f, plan)
		require.NotContains(t, plan, `"Node Type": "Sort"`, "%+v reads a page, not all the tenant's runs to sort them: %s", f, plan)
	}
	page, err := s.ListRuns(ctx, store.RunFilter{Tenant: "small", AfterID: "r-5000"})
	require.NoError(t, err)
	require.Equal(t, store.DefaultListLimit, len(page), "a full page")
	require.Equal(t, []string{"r-5100", "r-5200"}, []string{page[0].ID, page[1].ID}, "the page after the cursor, newest first")
	for _, r := range page {
		require.Equal(t, "small", r.Tenant)
	}
}

// TestCommitRunReadsTheTenantsWebhooks: the commit's round trip also
// reads whether the run's tenant has a live endpoint (another tenant's
// or a deleted one does not count), on a retried commit too.
func TestCommitRunReadsTheTenantsWebhooks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	_, _, err := s.AddWebhook(ctx, "beta", "https://beta.example/hook", "", "secret-beta-0123456789")
	require.NoError(t, err)
	first := newRun(t, s, "acme", "s1")
	c, err := s.CommitRun(ctx, first.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	require.Equal(t, store.Commit{Committed: true, Webhooks: false}, c, "only another tenant has an endpoint")

	hook, _, err := s.AddWebhook(ctx, "acme", "https://acme.example/hook", "", "secret-acme-0123456789")
	require.NoError(t, err)
	c, err = s.CommitRun(ctx, first.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	require.Equal(t, store.Commit{Committed: false, Webhooks: true}, c, "a retried commit")

	require.NoError(t, s.DeleteWebhook(ctx, "acme", hook.ID))
	second := newRun(t, s, "acme", "s1")
	c, err = s.CommitRun(ctx, second.ID, store.RunResult{TokensAfter: 1})
	require.NoError(t, err)
	require.Equal(t, store.Commit{Committed: true, Webhooks: false}, c, "a deleted endpoint")
}

// TestRepeatedCommitRecordsNoStepTwice: a workflow task that timed out
// runs its local steps and the commit again, each step a new execution;
// the repeated commit changes nothing and records none of those steps a
// second time (the chaos soak's duplicate step rows).
func TestRepeatedCommitRecordsNoStepTwice(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	r := newRun(t, s, "acme", "s1")
	require.NoError(t, s.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{}))
	steps := func(execution string) []store.Step {
		return []store.Step{
			{RunID: r.ID, Name: "plan", Attempt: 1, Execution: execution},
			{RunID: r.ID, Name: "history/apply", Attempt: 1, Execution: execution},
		}
	}
	c, err := s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 10, OutputKey: "k", OutputSHA256: "ab", Steps: steps("first")})
	require.NoError(t, err)
	require.True(t, c.Committed)
	c, err = s.CommitRun(ctx, r.ID, store.RunResult{TokensAfter: 10, OutputKey: "k", OutputSHA256: "ab", Steps: steps("second")})
	require.NoError(t, err)
	require.False(t, c.Committed)
	got, err := s.ListSteps(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, got, 2, "one row per step, from the commit that counted")
	for _, st := range got {
		require.Equal(t, "first", st.Execution)
	}
}
