package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// expectSignal sets up the signal-with-start of session s1 of tenant
// acme on the mock, recording each run it is handed in *got.
func expectSignal(tc *mocks.Client, got *[]contract.CompactionInput) *mock.Call {
	wf := contract.SessionWorkflowID("acme", "s1")
	return tc.On("SignalWithStartWorkflow", mock.Anything, wf, contract.EventSignal, mock.Anything,
		mock.MatchedBy(func(o client.StartWorkflowOptions) bool { return o.ID == wf && o.TaskQueue == "q" }),
		contract.SessionWorkflow, contract.SessionInput{Tenant: "acme", Session: "s1"}).
		Run(func(args mock.Arguments) { *got = append(*got, args.Get(3).(contract.CompactionInput)) })
}

// archives lists the tenant's archive objects.
func archives(t *testing.T, g *Gateway, tenant string) []string {
	t.Helper()
	keys, err := g.Blob.List(context.Background(), "tenants/"+tenant+"/archive/")
	require.NoError(t, err)
	return keys
}

// TestSubmitWhileTemporalIsDown: when Temporal cannot be reached, Submit
// answers its error (a serviceerror.Unavailable, not the caller's fault)
// but the event is claimed: the run's row is pending and holds its
// input (key and SHA-256 of the stored original, which is in S3) and
// what the caller asked for, so that a retry can start it. The retry
// with the same event id, once Temporal answers, is the same run
// (Existing) and hands the workflow the recorded input; a retry whose
// body was re-encoded into other bytes joins it too, and its own copy of
// the conversation is deleted again.
func TestSubmitWhileTemporalIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, serviceerror.NewUnavailable("temporal is down")).Once()
	expectSignal(tc, &signalled).Return(nil, nil).Twice()

	conv := openAIConv(t, "call_2", "cat")
	sha := blob.SHA256Hex(conv)
	key := blob.ContentKey("acme", blob.KindArchive, sha)
	ev := Event{Tenant: "acme", Session: "s1", EventID: "e1", Kind: KindCheckpoint, Model: "gpt-4o", ContextLimit: 128000,
		Overrides: json.RawMessage(`{"history":{"attempts":2}}`), Conversation: conv}
	runID := RunID("acme", "s1", "e1")

	_, err := g.Submit(ctx, ev)
	require.Error(t, err)
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, err, &unavailable)
	var ie *InputError
	require.NotErrorAs(t, err, &ie, "an outage is not the caller's error")

	run, err := g.Store.GetRun(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, store.RunPending, run.Status)
	require.Equal(t, key, run.InputKey)
	require.Equal(t, sha, run.InputSHA256)
	require.Equal(t, "acme", run.Tenant)
	require.Equal(t, "s1", run.Session)
	require.Equal(t, "e1", run.EventID)
	require.Equal(t, KindCheckpoint, run.Trigger)
	require.Equal(t, policy.AutoSummarize, run.Preset, "the gateway's default preset")
	require.Equal(t, "gpt-4o", run.AgentModel)
	require.Equal(t, 128000, run.ContextLimit)
	require.JSONEq(t, `{"history":{"attempts":2}}`, string(run.Overrides))
	require.NotEmpty(t, run.ResolvedPreset)
	var resolved policy.Preset
	require.NoError(t, json.Unmarshal(run.ResolvedPreset, &resolved))
	require.Equal(t, policy.AutoSummarize, resolved.Name)
	require.Equal(t, 2, resolved.History.Attempts, "resolved under the caller's overrides")
	stored, err := g.Blob.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, conv, stored, "the caller's exact bytes")
	claimed, err := g.Store.EventRun(ctx, "acme", "s1", "e1")
	require.NoError(t, err)
	require.Equal(t, runID, claimed)
	require.Len(t, signalled, 1)
	require.Equal(t, runID, signalled[0].Run.ID)
	require.Equal(t, key, signalled[0].InputKey)
	require.Equal(t, sha, signalled[0].InputSHA256)

	// Temporal is back: the retry is the claimed run, started now.
	sub, err := g.Submit(ctx, ev)
	require.NoError(t, err)
	require.Equal(t, Submitted{RunID: runID, Existing: true, InputKey: key, Generation: 1}, sub)
	require.Len(t, signalled, 2)
	want, err := g.inputOf(run)
	require.NoError(t, err)
	got := signalled[1]
	require.JSONEq(t, string(want.Run.Overrides), string(got.Run.Overrides))
	want.Run.Overrides, got.Run.Overrides = nil, nil
	require.Equal(t, want, got, "the workflow gets the run's recorded input")

	// The same request re-encoded: the same run, with its original; the
	// retry's own bytes are not kept.
	ev.Conversation = bytes.ReplaceAll(conv, []byte(`,`), []byte(", "))
	require.NotEqual(t, conv, []byte(ev.Conversation))
	sub, err = g.Submit(ctx, ev)
	require.NoError(t, err)
	require.Equal(t, Submitted{RunID: runID, Existing: true, InputKey: key, Generation: 1}, sub)
	require.Equal(t, key, signalled[2].InputKey)
	require.Equal(t, []string{key}, archives(t, g, "acme"))

	runs, err := g.Store.ListRuns(ctx, store.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
}

// TestSubmitConflictKeepsOnlyTheFirstOriginal: the same event id with
// another request is ErrConflict, which writes nothing: the second
// conversation's archive object is deleted again while the first run's
// stays, and the run is unchanged. With the first request's very bytes
// (another model, or another session), the object is the run's and
// stays. Temporal is signalled for the first submission only.
func TestSubmitConflictKeepsOnlyTheFirstOriginal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, nil).Once()

	conv1 := openAIConv(t, "call_2", "cat")
	conv2 := openAIConv(t, "call_2", "head")
	key1 := blob.ContentKey("acme", blob.KindArchive, blob.SHA256Hex(conv1))
	ev := Event{Tenant: "acme", Session: "s1", EventID: "e1", Model: "gpt-4o", Conversation: conv1}
	first, err := g.Submit(ctx, ev)
	require.NoError(t, err)
	require.Equal(t, Submitted{RunID: RunID("acme", "s1", "e1"), InputKey: key1, Generation: 1}, first)
	require.Equal(t, []string{key1}, archives(t, g, "acme"))

	for _, c := range []struct {
		name string
		edit func(*Event)
	}{
		{"other conversation", func(e *Event) { e.Conversation = conv2 }},
		{"other model", func(e *Event) { e.Model = "gpt-4o-mini" }},
		{"other limit", func(e *Event) { e.ContextLimit = 1000 }},
		{"other kind", func(e *Event) { e.Kind = KindManual }},
		{"other preset", func(e *Event) { e.Preset = policy.Watermark }},
	} {
		other := ev
		c.edit(&other)
		_, err := g.Submit(ctx, other)
		require.ErrorIs(t, err, ErrConflict, c.name)
		var conflict *ConflictError
		require.ErrorAs(t, err, &conflict, c.name)
		require.Equal(t, first.RunID, conflict.RunID, "%s: the answer names the run holding the id", c.name)
		require.Equal(t, []string{key1}, archives(t, g, "acme"), "%s: only the first run's original stays", c.name)
	}

	run, err := g.Store.GetRun(ctx, first.RunID)
	require.NoError(t, err)
	require.Equal(t, key1, run.InputKey)
	require.Equal(t, "gpt-4o", run.AgentModel)
	require.Equal(t, store.RunPending, run.Status)
	runs, err := g.Store.ListRuns(ctx, store.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 1, "a conflict records no run")
	require.Len(t, signalled, 1)

	// Event ids are unique per session: another session's "e1" is its
	// own event.
	wf := contract.SessionWorkflowID("acme", "s2")
	tc.On("SignalWithStartWorkflow", mock.Anything, wf, contract.EventSignal, mock.Anything, mock.Anything,
		contract.SessionWorkflow, contract.SessionInput{Tenant: "acme", Session: "s2"}).
		Run(func(args mock.Arguments) { signalled = append(signalled, args.Get(3).(contract.CompactionInput)) }).
		Return(nil, nil).Once()
	other := ev
	other.Session = "s2"
	sub, err := g.Submit(ctx, other)
	require.NoError(t, err, "the same event id in another session")
	require.Equal(t, RunID("acme", "s2", "e1"), sub.RunID)
	require.NotEqual(t, first.RunID, sub.RunID)
	require.Len(t, signalled, 2)
}

// TestSubmitReusesAnArchiveKey: a conversation_key naming one of the
// tenant's archives is the run's original as it is (nothing is written
// again); the bytes it names are parsed and hashed like an inline
// conversation, so the same conversation sent inline under the same
// event id is a retry, not a conflict.
func TestSubmitReusesAnArchiveKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, nil).Twice()

	conv := anthropicConv(t, "toolu_1", "ls")
	ref, err := g.Blob.PutContentVerified(ctx, "acme", blob.KindArchive, conv)
	require.NoError(t, err)
	sub, err := g.Submit(ctx, Event{Tenant: "acme", Session: "s1", EventID: "e1", ConversationKey: ref.Key})
	require.NoError(t, err)
	require.Equal(t, Submitted{RunID: RunID("acme", "s1", "e1"), InputKey: ref.Key, Generation: 1}, sub)
	run, err := g.Store.GetRun(ctx, sub.RunID)
	require.NoError(t, err)
	require.Equal(t, ref.SHA256, run.InputSHA256)
	require.Equal(t, KindThreshold, run.Trigger, "the default kind")

	sub, err = g.Submit(ctx, Event{Tenant: "acme", Session: "s1", EventID: "e1", Conversation: conv})
	require.NoError(t, err)
	require.True(t, sub.Existing)
	require.Equal(t, ref.Key, sub.InputKey)
	require.Equal(t, []string{ref.Key}, archives(t, g, "acme"))
}

// TestSubmitStoresAnOutputKeyAsAnArchive: a conversation_key naming one
// of the tenant's outputs (what MCP's compress_to_checkpoint without
// messages sends: the session's latest output) is read and stored again
// as the run's archive; the run's input, which the plan step records as
// the archive and refuses when it is not one, is never the output key.
func TestSubmitStoresAnOutputKeyAsAnArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, nil).Once()

	conv := anthropicConv(t, "toolu_1", "ls")
	out, err := g.Blob.PutContent(ctx, "acme", blob.KindOutput, conv)
	require.NoError(t, err)
	sub, err := g.Submit(ctx, Event{Tenant: "acme", Session: "s1", EventID: "e1", ConversationKey: out.Key})
	require.NoError(t, err)
	archive := blob.ContentKey("acme", blob.KindArchive, out.SHA256)
	require.Equal(t, archive, sub.InputKey)
	require.Equal(t, []string{archive}, archives(t, g, "acme"))
	stored, err := g.Blob.Get(ctx, archive)
	require.NoError(t, err)
	require.Equal(t, conv, stored, "the output's exact bytes")
	_, err = g.Blob.Get(ctx, out.Key)
	require.NoError(t, err, "the output stays")
	require.Len(t, signalled, 1)
	require.Equal(t, archive, signalled[0].InputKey)
	require.Equal(t, out.SHA256, signalled[0].InputSHA256)
}

// TestSubmitFailsTheRunWhenTemporalRefusesTheStart: a start Temporal
// refuses (not an outage) would be refused on every retry, so the run
// is failed at once with the reason, never left pending (where it would
// hold its session's erasure forever); an outage leaves it pending, as
// TestSubmitWhileTemporalIsDown shows.
func TestSubmitFailsTheRunWhenTemporalRefusesTheStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc := mocks.NewClient(t)
	g := testGateway(t, tc)
	var signalled []contract.CompactionInput
	expectSignal(tc, &signalled).Return(nil, serviceerror.NewInvalidArgument("header key contains value with non-printable ASCII characters")).Once()

	ev := Event{Tenant: "acme", Session: "s1", EventID: "e1", Model: "gpt-4o", ContextLimit: 128000,
		Conversation: openAIConv(t, "call_2", "cat")}
	_, err := g.Submit(ctx, ev)
	require.Error(t, err)
	require.Contains(t, err.Error(), "non-printable")
	run, err := g.Store.GetRun(ctx, RunID("acme", "s1", "e1"))
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, run.Status, "a refused start is not left pending")
	require.Contains(t, run.Error, "the session workflow could not be started")
}

// TestTemporalTransient: which start errors leave the run pending.
func TestTemporalTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unavailable", serviceerror.NewUnavailable("down"), true},
		{"deadline", serviceerror.NewDeadlineExceeded("slow"), true},
		{"exhausted", &serviceerror.ResourceExhausted{Message: "busy"}, true},
		{"context deadline, wrapped", fmt.Errorf("start: %w", context.DeadlineExceeded), true},
		{"gRPC unavailable, wrapped", fmt.Errorf("start: %w", status.Error(codes.Unavailable, "conn refused")), true},
		{"invalid argument", serviceerror.NewInvalidArgument("bad id"), false},
		{"gRPC internal (a refused header)", status.Error(codes.Internal, "header key contains value with non-printable ASCII characters"), false},
		{"namespace not found", serviceerror.NewNamespaceNotFound("nope"), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, temporalTransient(tt.err), tt.name)
	}
}

// TestWaitAsksAgainAfterAFailedWorkflowTask: an outcome update refused
// because a workflow task failed under it (a worker lost mid-task,
// WorkflowNotReady) is not the run's failure: Temporal retries the task
// and the run goes on, so Wait asks again and answers the outcome.
func TestWaitAsksAgainAfterAFailedWorkflowTask(t *testing.T) {
	t.Parallel()
	tc := mocks.NewClient(t)
	g := &Gateway{Temporal: tc}
	tc.On("UpdateWorkflow", mock.Anything, mock.Anything).
		Return(nil, serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to unexpected workflow task failure.")).Once()
	tc.On("DescribeWorkflowExecution", mock.Anything, "run-1", "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil).Once()
	h := mocks.NewWorkflowUpdateHandle(t)
	h.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(1).(*contract.Outcome) = contract.Outcome{RunID: "run-1", Status: "succeeded"}
	}).Return(nil).Once()
	tc.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(h, nil).Once()

	o, err := g.Wait(t.Context(), "run-1")
	require.NoError(t, err, "a failed workflow task is not the run's failure")
	require.Equal(t, "succeeded", o.Status)
}
