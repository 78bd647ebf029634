package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// TestRuntimeRoleCannotRewriteHistory: the role GrantRuntime sets up can
// do a run's work, and cannot delete, truncate, drop, or switch off the
// triggers that keep history append-only. Even the owner cannot TRUNCATE.
func TestRuntimeRoleCannotRewriteHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schemaURL := storetest.NewURL(t)
	owner := storetest.Open(t, schemaURL)

	var b [6]byte
	_, _ = rand.Read(b[:])
	role := "r_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, storetest.BaseURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(c, "drop owned by "+pgx.Identifier{role}.Sanitize())
		_, _ = admin.Exec(c, "drop role "+pgx.Identifier{role}.Sanitize())
		_ = admin.Close(c)
	})
	_, err = admin.Exec(ctx, "create role "+pgx.Identifier{role}.Sanitize()+" login")
	require.NoError(t, err)
	require.NoError(t, owner.GrantRuntime(ctx, role))
	require.NoError(t, owner.GrantRuntime(ctx, role), "idempotent")

	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	u.User = url.User(role)
	app, err := store.Open(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(app.Close)

	// A run's work.
	r := store.Run{ID: "run-priv", Tenant: "acme", Session: "s1", EventID: "ev-priv"}
	sub, err := app.SubmitRun(ctx, r, "body", nil)
	require.NoError(t, err)
	require.Equal(t, store.Submission{RunID: r.ID, Generation: 1}, sub)
	require.NoError(t, app.StartRun(ctx, r.ID, r.Tenant, r.Session, store.RunStart{ArchiveKey: "tenants/acme/archive/k", ArchiveSHA256: "k"}))
	require.NoError(t, app.RecordStep(ctx, store.Step{RunID: r.ID, Name: "plan", Attempt: 1, Execution: "a"}))
	require.NoError(t, app.RecordStep(ctx, store.Step{RunID: r.ID, Name: "plan", Attempt: 1, Execution: "a"}), "a retried write adds nothing")
	require.NoError(t, app.RecordStep(ctx, store.Step{RunID: r.ID, Name: "plan", Attempt: 1, Execution: "b"}), "a re-run after a worker death")
	steps, err := app.ListSteps(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2, "the re-run is in the audit trail")
	require.NoError(t, app.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", Key: "k"}))
	_, _, err = app.ReleaseOffloads(ctx, "acme", "s1", []string{"k"}, func(context.Context, string) error { return nil })
	require.NoError(t, err)
	_, err = app.FailRun(ctx, r.ID, store.Failure{Message: "done"})
	require.NoError(t, err)

	// A revoked key and a live one: the rows the key statements below try.
	_, err = app.CreateAPIKey(ctx, "acme", "key-revoked-0123456789abcdef", time.Time{})
	require.NoError(t, err)
	ok, err := app.RevokeAPIKey(ctx, "key-revoked-0123456789abcdef")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = app.CreateAPIKey(ctx, "acme", "key-live-0123456789abcdef", time.Time{})
	require.NoError(t, err)
	_, ok, err = app.Authenticate(ctx, "key-live-0123456789abcdef")
	require.NoError(t, err)
	require.True(t, ok, "the runtime role still records a key's use")

	for _, q := range []string{
		"delete from run_steps",
		"truncate run_steps",
		"truncate runs cascade",
		"alter table run_steps disable trigger all",
		"drop table drift_verdicts",
		"create table sneaky (id int)",
		// Issue 20: the runtime role revived a revoked key, moved a key
		// to another tenant and rewrote the migrations' version.
		"update api_keys set revoked_at = null",
		"update api_keys set tenant_id = 'other'",
		"update api_keys set key_hash = 'forged'",
		"update schema_version set version = 1",
		"insert into schema_version values (99)",
		// Issue 23: the erasure's way past the append-only triggers is
		// erase_session_rows, never the runtime role's own.
		"insert into erase_guard values (txid_current())",
		"delete from runs",
		"delete from offloads",
		"delete from session_snapshots",
	} {
		_, err := app.Pool().Exec(ctx, q)
		require.Error(t, err, "the runtime role may not: %s", q)
	}
	// A proxy snapshot is the runtime role's to write; it goes under
	// retention through erase_expired_snapshots only, and with its
	// session through the erasure.
	for i, name := range []string{"old", "new"} {
		_, err = app.AddSnapshot(ctx, store.Snapshot{Tenant: "acme", Session: "s1", Wire: "openai-chat", From: 1, To: 2,
			Digest: "d" + name, Key: "tenants/acme/snapshot/" + name, SHA256: name, Bytes: int64(i)}, func(context.Context) error { return nil })
		require.NoError(t, err)
	}
	_, err = owner.Pool().Exec(ctx, `update session_snapshots set created_at = now() - interval '3 days' where key like '%/old'`)
	require.NoError(t, err)
	require.NoError(t, app.SetRetention(ctx, "acme", 1))
	rows, kept, err := app.ReleaseExpiredSnapshot(ctx, "acme", "tenants/acme/snapshot/old", func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.False(t, kept)
	require.NoError(t, app.UnsetRetention(ctx, "acme"))
	// The erasure path: one session, with its tombstone, through the
	// SECURITY DEFINER function only.
	_, err = app.EraseSessionRows(ctx, "erase_none", "acme", "s1")
	require.ErrorContains(t, err, "not an unfinished erasure", "no tombstone, no erasure")
	e, _, err := app.StartErasure(ctx, "acme", "s1", "privilege test")
	require.NoError(t, err)
	n, err := app.EraseSessionRows(ctx, e.ID, "acme", "s1")
	require.NoError(t, err)
	require.Positive(t, n)
	runs, err := app.ListRuns(ctx, store.RunFilter{Tenant: "acme"})
	require.NoError(t, err)
	require.Empty(t, runs, "the session's runs are gone")
	snaps, err := app.ListSnapshots(ctx, "acme", "s1")
	require.NoError(t, err)
	require.Empty(t, snaps, "the session's snapshots are gone with it")
	for _, table := range []string{"run_steps", "runs", "events", "drift_verdicts", "watermark_history", "offloads"} {
		_, err := owner.Pool().Exec(ctx, "truncate "+table+" cascade")
		require.ErrorContains(t, err, "append-only", "not even the owner truncates %s", table)
	}
}
