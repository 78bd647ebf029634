package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestOnlyTheCommitThatFinishesARunRecordsItsBlocks guards the live-run
// guard of the session log's insert: a run's log blocks land only with
// the commit that finishes it. A commit that arrives after the run was
// failed (a step retried past the reconciler), or after it was already
// committed (a stale attempt carrying other blocks), records nothing: a
// block in the log is read as the session's own history by every later
// run, so a block of an output nobody continues from would be trusted.
func TestOnlyTheCommitThatFinishesARunRecordsItsBlocks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	digest := func(i int) string { return fmt.Sprintf("%064x", i) }
	block := func(i int) []store.LogBlock {
		return []store.LogBlock{{SHA256: digest(i), Label: fmt.Sprint(i), Tokens: 10}}
	}

	failed := newRun(t, s, "acme", "late")
	_, err := s.FailRun(ctx, failed.ID, store.Failure{Message: "timed out"})
	require.NoError(t, err)
	c, err := s.CommitRun(ctx, failed.ID, store.RunResult{OutputKey: "k", OutputSHA256: digest(100), Log: block(1)})
	require.NoError(t, err)
	require.False(t, c.Committed)

	done := newRun(t, s, "acme", "late")
	c, err = s.CommitRun(ctx, done.ID, store.RunResult{OutputKey: "k", OutputSHA256: digest(101), Log: block(2)})
	require.NoError(t, err)
	require.True(t, c.Committed)
	c, err = s.CommitRun(ctx, done.ID, store.RunResult{OutputKey: "k", OutputSHA256: digest(102), Log: block(3)})
	require.NoError(t, err)
	require.False(t, c.Committed)

	over := newRun(t, s, "acme", "late")
	c, err = s.CommitRun(ctx, over.ID, store.RunResult{OverLimit: true, OverLimitReason: "still over", OutputKey: "k",
		OutputSHA256: digest(103), Log: block(4)})
	require.NoError(t, err)
	require.True(t, c.Committed)
	c, err = s.CommitRun(ctx, over.ID, store.RunResult{OutputKey: "k", OutputSHA256: digest(104), Log: block(5)})
	require.NoError(t, err)
	require.False(t, c.Committed)

	log, err := s.SessionLog(ctx, "acme", "late")
	require.NoError(t, err)
	var got []string
	for _, l := range log {
		got = append(got, l.SHA256)
	}
	require.Equal(t, []string{digest(2), digest(4)}, got, "the blocks of the commits that finished their runs, and no other")
}
