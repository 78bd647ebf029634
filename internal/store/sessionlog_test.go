package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestSessionLogIsRecordedWithTheCommit: the blocks a run appended land
// with its commit, once (a retried commit adds nothing), in order, per
// tenant and session; a replay's too (its output may be promoted); a bad
// digest is refused with the field named; an erasure deletes the
// session's log.
func TestSessionLogIsRecordedWithTheCommit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	digest := func(i int) string { return fmt.Sprintf("%064x", i) }

	first := newRun(t, s, "acme", "s1")
	res := store.RunResult{OutputKey: "k", OutputSHA256: digest(900), Log: []store.LogBlock{{SHA256: digest(1), Label: "1", Tokens: 120}}}
	_, err := s.CommitRun(ctx, first.ID, res)
	require.NoError(t, err)
	c, err := s.CommitRun(ctx, first.ID, res)
	require.NoError(t, err)
	require.False(t, c.Committed)

	second := newRun(t, s, "acme", "s1")
	_, err = s.CommitRun(ctx, second.ID, store.RunResult{OutputKey: "k", OutputSHA256: digest(901), Log: []store.LogBlock{
		{SHA256: digest(2), Label: "1-1", Tokens: 80, Reflection: true, Condensed: []string{digest(1)}},
		{SHA256: digest(3), Label: "2", Tokens: 100},
	}})
	require.NoError(t, err)

	other := newRun(t, s, "other", "s1")
	_, err = s.CommitRun(ctx, other.ID, store.RunResult{OutputKey: "k", Log: []store.LogBlock{{SHA256: digest(7), Label: "1"}}})
	require.NoError(t, err)

	replay, created, err := s.CreateRun(ctx, store.Run{ID: "replay-" + first.ID, Tenant: "acme", Session: "s1", ReplayOf: first.ID})
	require.NoError(t, err)
	require.True(t, created)
	_, err = s.CommitRun(ctx, replay.ID, store.RunResult{OutputKey: "k", Log: []store.LogBlock{{SHA256: digest(8), Label: "9"}}})
	require.NoError(t, err)

	log, err := s.SessionLog(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Len(t, log, 4, "one row per block, the replay's included, none of another tenant")
	require.Equal(t, []string{digest(1), digest(2), digest(3), digest(8)}, []string{log[0].SHA256, log[1].SHA256, log[2].SHA256, log[3].SHA256})
	require.True(t, log[1].Reflection)
	require.Equal(t, []string{digest(1)}, log[1].Condensed)
	require.Equal(t, second.ID, log[2].RunID)

	bad := newRun(t, s, "acme", "s1")
	_, err = s.CommitRun(ctx, bad.ID, store.RunResult{OutputKey: "k", Log: []store.LogBlock{{SHA256: "not-hex"}}})
	require.ErrorContains(t, err, "sha256")

	e, _, err := s.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	_, err = s.FailRun(ctx, bad.ID, store.Failure{Message: "x"})
	require.NoError(t, err)
	_, err = s.EraseSessionRows(ctx, e.ID, "acme", "s1")
	require.NoError(t, err)
	log, err = s.SessionLog(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Empty(t, log)
	log, err = s.SessionLog(ctx, "other", "s1")
	require.NoError(t, err)
	require.Len(t, log, 1, "another tenant's log stays")
}

// TestAFailedRunRecordsNoBlocks: a commit that comes after the run was
// failed (a step retried past the reconciler) changes nothing, its log
// blocks included.
func TestAFailedRunRecordsNoBlocks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	run := newRun(t, s, "acme", "late")
	_, err := s.FailRun(ctx, run.ID, store.Failure{Message: "timed out"})
	require.NoError(t, err)
	c, err := s.CommitRun(ctx, run.ID, store.RunResult{OutputKey: "k", OutputSHA256: fmt.Sprintf("%064x", 5),
		Log: []store.LogBlock{{SHA256: fmt.Sprintf("%064x", 6), Label: "1", Tokens: 10}}})
	require.NoError(t, err)
	require.False(t, c.Committed)
	log, err := s.SessionLog(ctx, "acme", "late")
	require.NoError(t, err)
	require.Empty(t, log, "a failed run's late commit records no block")
}
