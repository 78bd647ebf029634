package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// addSnapshot records a snapshot of acme's session holding messages
// from..to, its object named name, and says whether its put ran.
func addSnapshot(t *testing.T, s *store.Store, session string, from, to int, base, digest, name string) (int64, bool) {
	t.Helper()
	put := false
	seq, err := s.AddSnapshot(t.Context(), store.Snapshot{Tenant: "acme", Session: session, Wire: "anthropic-messages",
		From: from, To: to, Base: base, Digest: digest, Key: "tenants/acme/snapshot/" + name, SHA256: fmt.Sprintf("%064x", from), Bytes: 10},
		func(context.Context) error { put = true; return nil })
	require.NoError(t, err)
	return seq, put
}

// TestSnapshotChains: a session's snapshots chain by digest; the chain of
// a snapshot is the records it extends back to the one that starts at
// message 1, whatever other chains (a rewind) were recorded between; the
// latest is the newest record; the session's objects name every
// snapshot's key; and a chain whose first record went under retention is
// said to be incomplete.
func TestSnapshotChains(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	first, put := addSnapshot(t, s, "s1", 1, 4, "", "d4", "a")
	require.True(t, put, "the object is written in the record's transaction")
	second, _ := addSnapshot(t, s, "s1", 5, 6, "d4", "d6", "b")
	addSnapshot(t, s, "s1", 1, 2, "", "r2", "c") // a rewind: a new chain
	last, _ := addSnapshot(t, s, "s1", 7, 9, "d6", "d9", "d")
	addSnapshot(t, s, "s2", 1, 3, "", "x3", "e") // another session

	list, err := s.ListSnapshots(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Len(t, list, 4)
	chain, err := s.SnapshotChain(ctx, "acme", "s1", last)
	require.NoError(t, err)
	var seqs []int64
	for _, c := range chain {
		seqs = append(seqs, c.Seq)
	}
	require.Equal(t, []int64{first, second, last}, seqs, "the rewind's record is not part of the chain")
	to, digest, err := s.LatestSnapshot(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Equal(t, 9, to)
	require.Equal(t, "d9", digest)
	to, digest, err = s.LatestSnapshot(ctx, "acme", "none")
	require.NoError(t, err)
	require.Equal(t, 0, to)
	require.Empty(t, digest)

	_, err = s.SnapshotChain(ctx, "other", "s1", last)
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant's session of the name")
	_, err = s.SnapshotChain(ctx, "acme", "s2", last)
	require.ErrorIs(t, err, store.ErrNotFound, "a seq of another session")

	keys, _, err := s.SessionObjects(ctx, "acme", "s1")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"tenants/acme/snapshot/a", "tenants/acme/snapshot/b", "tenants/acme/snapshot/c", "tenants/acme/snapshot/d"}, keys)

	// The first record goes under retention: the chain says so.
	_, err = s.Pool().Exec(ctx, `update session_snapshots set created_at = now() - interval '3 days' where seq = $1`, first)
	require.NoError(t, err)
	require.NoError(t, s.SetRetention(ctx, "acme", 1))
	rows, kept, err := s.ReleaseExpiredSnapshot(ctx, "acme", "tenants/acme/snapshot/a", func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.False(t, kept)
	chain, err = s.SnapshotChain(ctx, "acme", "s1", last)
	require.ErrorIs(t, err, store.ErrSnapshotIncomplete)
	require.Len(t, chain, 2, "what is left of the chain")
	require.Equal(t, 5, chain[0].From)
}

// TestSnapshotRetention: only snapshots of a tenant with a retention,
// older than it, are listed; an object a newer snapshot (or a run) still
// names stays while the expired rows go; a delete that fails leaves the
// rows for the next sweep.
func TestSnapshotRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	old, _ := addSnapshot(t, s, "s1", 1, 2, "", "d2", "shared")
	addSnapshot(t, s, "s1", 3, 4, "d2", "d4", "alone")
	addSnapshot(t, s, "s2", 1, 2, "", "e2", "shared") // the same bytes, newer, in another session
	_, err := s.Pool().Exec(ctx, `update session_snapshots set created_at = now() - interval '3 days' where session_id = 's1'`)
	require.NoError(t, err)

	expired, err := s.ExpiredSnapshots(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, expired, "no retention set: kept for ever")
	require.NoError(t, s.SetRetention(ctx, "acme", 1))
	expired, err = s.ExpiredSnapshots(ctx, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []store.ExpiredSnapshot{{Tenant: "acme", Key: "tenants/acme/snapshot/shared"},
		{Tenant: "acme", Key: "tenants/acme/snapshot/alone"}}, expired)

	deleted := false
	rows, kept, err := s.ReleaseExpiredSnapshot(ctx, "acme", "tenants/acme/snapshot/shared", func(context.Context) error { deleted = true; return nil })
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.True(t, kept, "s2's newer snapshot names the same object")
	require.False(t, deleted)

	_, _, err = s.ReleaseExpiredSnapshot(ctx, "acme", "tenants/acme/snapshot/alone", func(context.Context) error { return errors.New("s3 is down") })
	require.ErrorContains(t, err, "s3 is down")
	expired, err = s.ExpiredSnapshots(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []store.ExpiredSnapshot{{Tenant: "acme", Key: "tenants/acme/snapshot/alone"}}, expired, "the rows stay for the next sweep")
	rows, kept, err = s.ReleaseExpiredSnapshot(ctx, "acme", "tenants/acme/snapshot/alone", func(context.Context) error { deleted = true; return nil })
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.False(t, kept)
	require.True(t, deleted)
	list, err := s.ListSnapshots(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = s.SnapshotChain(ctx, "acme", "s1", old)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestSnapshotsGoWithTheirSession: a session whose erasure was asked for
// takes no snapshot (nor writes its object), and its erasure deletes its
// snapshots with its other rows; another session's stay.
func TestSnapshotsGoWithTheirSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	addSnapshot(t, s, "s1", 1, 2, "", "d2", "a")
	addSnapshot(t, s, "s2", 1, 2, "", "e2", "b")
	e, _, err := s.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	put := false
	_, err = s.AddSnapshot(ctx, store.Snapshot{Tenant: "acme", Session: "s2", Wire: "openai-chat", From: 3, To: 4, Base: "not-recorded",
		Digest: "d4", Key: "tenants/acme/snapshot/x", SHA256: "x", Bytes: 1}, func(context.Context) error { put = true; return nil })
	require.ErrorIs(t, err, store.ErrSnapshotBase, "a base the session does not hold")
	require.False(t, put, "no object written for a refused snapshot")
	_, err = s.AddSnapshot(ctx, store.Snapshot{Tenant: "acme", Session: "s1", Wire: "openai-chat", From: 3, To: 4, Base: "d2",
		Digest: "d4", Key: "tenants/acme/snapshot/c", SHA256: "c", Bytes: 1}, func(context.Context) error { put = true; return nil })
	require.ErrorIs(t, err, store.ErrSessionErasing)
	require.False(t, put, "no object written for a refused snapshot")
	n, err := s.EraseSessionRows(ctx, e.ID, "acme", "s1")
	require.NoError(t, err)
	require.Positive(t, n)
	list, err := s.ListSnapshots(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Empty(t, list)
	list, err = s.ListSnapshots(ctx, "acme", "s2")
	require.NoError(t, err)
	require.Len(t, list, 1)
}
