package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// conversationWith is an OpenAI conversation whose task and tool result
// hold secret.
func conversationWith(secret string) []byte {
	return []byte(`{"messages":[{"role":"system","content":"You are a coding agent."},` +
		`{"role":"user","content":"Fix the build. ` + secret + `"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"build log: ` + secret + `"},` +
		`{"role":"assistant","content":"Done."}]}`)
}

// TestRecoveryRefusesAnotherTenantsArchive: a run row of tenant acme
// whose archive key names tenant other's archive (written straight into
// Postgres: no code path records such a row, so the store's own tenant
// filter lets it through) gives nothing of that archive back. A recover
// id for a range of its messages, the id of the whole archive, and an
// offload released from it are not found or refused, and Restore of the
// run refuses the key: the audit's own check that a key lies under the
// caller's tenant is what stops it. Acme's own archive in the same
// session reads back, so the refusals are not the session's.
func TestRecoveryRefusesAnotherTenantsArchive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	bs := blobtest.New(t)
	svc := &audit.Service{Store: st, Blob: bs}

	theirs, err := bs.PutContentVerified(ctx, "other", blob.KindArchive, conversationWith("OTHER-TENANT-SECRET"))
	require.NoError(t, err)
	ours, err := bs.PutContentVerified(ctx, "acme", blob.KindArchive, conversationWith("acme's own words"))
	require.NoError(t, err)

	_, _, err = st.CreateRun(ctx, store.Run{ID: "own", Tenant: "acme", Session: "s1", EventID: "own", Trigger: "manual",
		Preset: "adaptive", Status: store.RunRunning, InputKey: ours.Key, InputSHA256: ours.SHA256,
		ArchiveKey: ours.Key, ArchiveSHA256: ours.SHA256})
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the forged run is the session's latest
	_, _, err = st.CreateRun(ctx, store.Run{ID: "forged", Tenant: "acme", Session: "s1", EventID: "forged", Trigger: "manual",
		Preset: "adaptive", Status: store.RunRunning})
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `update runs set archive_key = $2, archive_sha256 = $3 where id = $1`,
		"forged", theirs.Key, theirs.SHA256)
	require.NoError(t, err)
	// An offload of the forged run, released by a summary: recovery
	// reads it back from the run's original.
	result := blob.SHA256Hex([]byte("build log: OTHER-TENANT-SECRET"))
	offload := blob.ContentKey("acme", blob.KindOffload, result)
	require.NoError(t, st.AddOffload(ctx, store.Offload{Tenant: "acme", Session: "s1", RunID: "forged", Key: offload, ToolID: "call_1"}))
	_, err = st.MarkOffloadsDeleted(ctx, "acme", "s1", []string{offload})
	require.NoError(t, err)

	got, err := svc.RecoverContext(ctx, "acme", "s1", ours.SHA256+".m1-1", "")
	require.NoError(t, err, "the tenant's own archive reads back")
	require.Contains(t, string(got.Data), "acme's own words")

	for _, tc := range []struct{ name, id string }{
		{"a range of its messages", theirs.SHA256 + ".m1-1"},
		{"one block of it", theirs.SHA256 + ".m3b0"},
		{"the whole archive", theirs.SHA256},
	} {
		got, err := svc.RecoverContext(ctx, "acme", "s1", tc.id, "")
		require.ErrorIs(t, err, store.ErrNotFound, tc.name)
		require.Empty(t, got.Data, tc.name)
	}
	got, err = svc.RecoverContext(ctx, "acme", "s1", result, "")
	require.Error(t, err, "an offload released from another tenant's archive")
	require.NotContains(t, err.Error(), "OTHER-TENANT-SECRET")
	require.Empty(t, got.Data)
	data, err := svc.Restore(ctx, "acme", "forged")
	require.ErrorContains(t, err, "outside the tenant's prefix")
	require.Empty(t, data)
}
