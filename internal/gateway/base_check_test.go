package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// committedOutput records a committed run of tenant's session whose
// output is a real object in the gateway's S3 (an OpenAI conversation
// saying mark), so that reading it back succeeds: a base that is
// refused is refused by the check, never by a missing object.
func committedOutput(t *testing.T, g *Gateway, id, tenant, session, mark string) blob.Ref {
	t.Helper()
	ctx := t.Context()
	data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "user", "content": "the task of " + mark},
		map[string]any{"role": "assistant", "content": "done: " + mark},
	}})
	require.NoError(t, err)
	ref, err := g.Blob.PutContent(ctx, tenant, blob.KindOutput, data)
	require.NoError(t, err)
	_, err = g.Store.SubmitRun(ctx, store.Run{ID: id, Tenant: tenant, Session: session, EventID: "e-" + id, Trigger: "threshold"}, "body-"+id, nil)
	require.NoError(t, err)
	_, err = g.Store.CommitRun(ctx, id, store.RunResult{OutputKey: ref.Key, OutputSHA256: ref.SHA256})
	require.NoError(t, err)
	return ref
}

// TestRetriedDeltaBaseIsCheckedByRunAndDigest guards baseOutput's check
// of a claimed event's base (a caller retrying an incremental event the
// gateway already accepted): the base must still be an output of this
// tenant's session, with the digest the caller names. Another tenant's
// run (a session of the same name), another session's run, or the right
// run with another digest is refused naming base.run_id, and nothing of
// another tenant's output is read into the conversation. Without the
// check a retry would continue whatever run id it names.
func TestRetriedDeltaBaseIsCheckedByRunAndDigest(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	ctx := t.Context()
	own := committedOutput(t, g, "run-own", "acme", "s1", "OWN-MARK")
	other := committedOutput(t, g, "run-other-session", "acme", "s2", "OTHER-SESSION-MARK")
	theirs := committedOutput(t, g, "run-theirs", "evil", "s1", "OTHER-TENANT-MARK")
	// The event d1 was accepted once, on run-own's output: a retry of it
	// takes the claimed branch.
	_, err := g.Store.SubmitRun(ctx, store.Run{ID: RunID("acme", "s1", "d1"), Tenant: "acme", Session: "s1", EventID: "d1",
		Trigger: "threshold", BaseRunID: "run-own"}, "body-d1", nil)
	require.NoError(t, err)
	claimed, err := g.Store.EventRun(ctx, "acme", "s1", "d1")
	require.NoError(t, err)
	require.NotEmpty(t, claimed)
	delta := json.RawMessage(`[{"role":"user","content":"next step"}]`)
	retry := func(base Base) Event {
		return Event{Tenant: "acme", Session: "s1", EventID: "d1", Model: "gpt-4o", ContextLimit: 128000, Base: &base, Messages: delta}
	}

	// The retry on its own base is rebuilt from that output.
	data, base, err := g.continued(ctx, retry(Base{RunID: "run-own", SHA256: own.SHA256}))
	require.NoError(t, err)
	require.Contains(t, string(base), "OWN-MARK")
	require.Contains(t, string(data), "next step")

	for _, tc := range []struct {
		name string
		base Base
	}{
		{"another tenant's output, a session of the same name", Base{RunID: "run-theirs", SHA256: theirs.SHA256}},
		{"another session's output", Base{RunID: "run-other-session", SHA256: other.SHA256}},
		{"its own base with another digest", Base{RunID: "run-own", SHA256: other.SHA256}},
		{"no such run", Base{RunID: "run-nowhere", SHA256: own.SHA256}},
	} {
		data, _, err := g.continued(ctx, retry(tc.base))
		var ie *InputError
		require.ErrorAs(t, err, &ie, "%s: the base is refused (got %q)", tc.name, data)
		require.Equal(t, "base.run_id", ie.Field, tc.name)
		require.NotContains(t, string(data), "OTHER-TENANT-MARK", tc.name)
		require.NotContains(t, err.Error(), theirs.Key, tc.name)
	}
	again, err := g.Store.EventRun(ctx, "acme", "s1", "d1")
	require.NoError(t, err)
	require.Equal(t, claimed, again, "the claim is the first one's")
}

// TestDeltaBaseDigestIsCheckedWhenTheOutputExists guards the digest half
// of an incremental event's base check: the session's latest run named
// with a digest that is not its output's is refused naming base.sha256
// (and the run), even though the output object is there and reads back
// fine. The gateway reads the output by the digest the store recorded,
// so without the check a caller's wrong digest would pass unnoticed.
func TestDeltaBaseDigestIsCheckedWhenTheOutputExists(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	ctx := t.Context()
	committedOutput(t, g, "run-old", "acme", "s1", "OLD-MARK")
	latest := committedOutput(t, g, "run-latest", "acme", "s1", "LATEST-MARK")
	delta := json.RawMessage(`[{"role":"user","content":"next step"}]`)
	ev := func(base Base) Event {
		return Event{Tenant: "acme", Session: "s1", EventID: "d2", Model: "gpt-4o", ContextLimit: 128000, Base: &base, Messages: delta}
	}

	data, _, err := g.continued(ctx, ev(Base{RunID: "run-latest", SHA256: latest.SHA256}))
	require.NoError(t, err, "the latest output with its digest is a base")
	require.Contains(t, string(data), "LATEST-MARK")

	wrong := fmt.Sprintf("%064x", 7)
	data, _, err = g.continued(ctx, ev(Base{RunID: "run-latest", SHA256: wrong}))
	var ie *InputError
	require.ErrorAs(t, err, &ie, "a digest that is not the output's is refused (got %q)", data)
	require.Equal(t, "base.sha256", ie.Field)
	require.Contains(t, err.Error(), "run-latest")

	_, _, err = g.continued(ctx, ev(Base{RunID: "run-old", SHA256: latest.SHA256}))
	require.ErrorAs(t, err, &ie, "an older run is refused even with the latest digest")
	require.Equal(t, "base.run_id", ie.Field)
	require.Contains(t, err.Error(), "run-latest", "naming the latest")

	run, err := g.Store.EventRun(ctx, "acme", "s1", "d2")
	require.NoError(t, err)
	require.Empty(t, run, "nothing was claimed")
}
