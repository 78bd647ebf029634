package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/mocks"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestReplayReadsTheOriginalAndTheRow: a replay reads the conversation
// from the run's input, the archive the gateway stored, also for a run
// that failed before its plan step recorded it as the archive; its
// settings are the row's, recorded at submit, even where the caller left
// them empty: the figures a commit recorded in the stats (the model's
// resolved limit) are never taken for what the caller asked. A run with
// no stored original is the caller's 4xx, naming the run.
func TestReplayReadsTheOriginalAndTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, nil).Once()

	conv := openAIConv(t, "call_2", "cat")
	in, err := g.Blob.PutContentVerified(ctx, "acme", blob.KindArchive, conv)
	require.NoError(t, err)
	stats, err := json.Marshal(store.RunStats{AgentModel: "claude-sonnet-4", Stats: contract.Stats{ContextLimit: 50000}})
	require.NoError(t, err)
	// Failed before its plan step: an input, no archive recorded; the
	// caller named neither a model nor a limit.
	_, _, err = g.Store.CreateRun(ctx, store.Run{ID: "run-orig", Tenant: "acme", Session: "s1", EventID: "e0",
		Trigger: KindManual, Preset: "watermark", InputKey: in.Key, InputSHA256: in.SHA256,
		Status: store.RunFailed, Error: "worker lost", Stats: stats})
	require.NoError(t, err)

	sub, err := g.Replay(ctx, "acme", "run-orig", ReplayRequest{RequestID: "r1"})
	require.NoError(t, err)
	require.Equal(t, in.Key, sub.InputKey, "the original is the input, stored once")
	require.Equal(t, []string{in.Key}, archives(t, g, "acme"), "nothing is copied")
	rep, err := g.Store.GetRun(ctx, sub.RunID)
	require.NoError(t, err)
	require.Equal(t, "run-orig", rep.ReplayOf)
	require.Equal(t, "watermark", rep.Preset)
	require.Equal(t, KindManual, rep.Trigger)
	require.Empty(t, rep.AgentModel, "the caller named no model")
	require.Zero(t, rep.ContextLimit, "the caller named no limit")
	require.Len(t, signalled, 1)
	require.Equal(t, in.Key, signalled[0].InputKey)

	_, _, err = g.Store.CreateRun(ctx, store.Run{ID: "run-empty", Tenant: "acme", Session: "s1", EventID: "e9",
		Trigger: KindManual, Preset: "watermark", Status: store.RunFailed, Error: "worker lost"})
	require.NoError(t, err)
	_, err = g.Replay(ctx, "acme", "run-empty", ReplayRequest{RequestID: "r1"})
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "run", ie.Field)
	require.ErrorContains(t, err, "no stored original")
}
