package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// TestAppendMessagesPreservesBytes: the rebuild of an incremental event
// is the base output's bytes with the delta's messages, as sent, spliced
// before the list's closing bracket: no key is reordered, no '<' becomes
// \u003c, and the document's other fields and whitespace stay as they
// were (json.Marshal of the list changed all three).
func TestAppendMessagesPreservesBytes(t *testing.T) {
	t.Parallel()
	delta := `[{"role":"user","content":"run <tests> & report"}, {"role":"assistant","content":"ok"}]`
	inner := `{"role":"user","content":"run <tests> & report"}, {"role":"assistant","content":"ok"}`
	tests := []struct {
		name, base, want string
	}{
		{"object, keys in the writer's order",
			`{"model":"gpt-4o","messages":[{"role":"user","content":"a <b>"}],"temperature":0}`,
			`{"model":"gpt-4o","messages":[{"role":"user","content":"a <b>"},` + inner + `],"temperature":0}`},
		{"pretty-printed object",
			"{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"x\"}\n  ],\n  \"z\": 1\n}\n",
			"{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"x\"}," + inner + "\n  ],\n  \"z\": 1\n}\n"},
		{"bare array", `[{"role":"user","content":"x"}]`, `[{"role":"user","content":"x"},` + inner + `]`},
		{"empty list", `{"messages":[],"system":"s"}`, `{"messages":[` + inner + `],"system":"s"}`},
		{"a key named messages inside a value", `{"meta":{"messages":1},"messages":[1]}`, `{"meta":{"messages":1},"messages":[1,` + inner + `]}`},
	}
	for _, tt := range tests {
		got, err := appendMessages([]byte(tt.base), []byte(delta))
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, string(got), tt.name)
		require.True(t, json.Valid(got), tt.name)
	}
	_, err := appendMessages([]byte(`{"trajectory":[]}`), []byte(delta))
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "base", ie.Field)
	_, err = appendMessages([]byte(`{"messages":[]}`), []byte(`{"role":"user"}`))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "messages", ie.Field)
}

// TestCheckContinuedCountsInTheMessagesSent: an error in an incremental
// event names the message by its index in the messages the caller sent,
// not in the conversation rebuilt from the base (4 messages here).
func TestCheckContinuedCountsInTheMessagesSent(t *testing.T) {
	t.Parallel()
	base := openAIConv(t, "call_2", "cat") // 4 messages, the last call pending
	index := func(err error) int {
		var ce *conversation.Error
		if errors.As(err, &ce) {
			return ce.Index
		}
		var pe *conversation.PairingError
		require.ErrorAs(t, err, &pe)
		return pe.Index
	}
	for _, delta := range []string{
		`[{"role":"tool","tool_call_id":"call_2","content":"meow"},{"role":"tool","tool_call_id":"call_nowhere","content":"?"}]`,
		`[{"role":"user","content":"ok"},{"role":7,"content":"?"}]`,
	} {
		data, err := appendMessages(base, []byte(delta))
		require.NoError(t, err)
		conv, perr := conversation.ParseAny(data)
		err = checkContinued(conv, perr, base)
		var ie *InputError
		require.ErrorAs(t, err, &ie, delta)
		require.Equal(t, "messages", ie.Field)
		require.Equal(t, 1, index(err), "the second message sent: %v", err)
		require.Contains(t, err.Error(), "message 1", "the message says the same index")
	}
}

// TestDeltaDuringAnErasureNamesTheSession: an incremental event for a
// session being erased is refused as every event is (ErrSessionErasing,
// the API's 409 naming session), not as a base that does not exist.
func TestDeltaDuringAnErasureNamesTheSession(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	ctx := t.Context()
	_, err := g.Store.SubmitRun(ctx, store.Run{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "threshold"}, "b", nil)
	require.NoError(t, err)
	_, _, err = g.Store.StartErasure(ctx, "acme", "s1", "test")
	require.NoError(t, err)
	_, err = g.Submit(ctx, Event{Tenant: "acme", Session: "s1", EventID: "e2", Model: "gpt-4o", ContextLimit: 128000,
		Base: &Base{RunID: "run-1", SHA256: strings.Repeat("a", 64)}, Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)})
	require.ErrorIs(t, err, ErrSessionErasing)
}

// TestAddWebhookOneEndpointPerReceiver: the spellings of one receiver's
// URL register one endpoint (the first answers created, the others find
// it), so that the receiver gets each run once.
func TestAddWebhookOneEndpointPerReceiver(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	g.WebhookPolicy = webhook.Policy{AllowHosts: []string{"localhost:19900", "127.0.0.1:19900"}}
	ctx := t.Context()
	first, created, err := g.AddWebhook(ctx, "acme", "http://localhost:19900/h", "")
	require.NoError(t, err)
	require.True(t, created)
	for _, u := range []string{"http://LOCALHOST:19900/h", "http://localhost.:19900/h", "http://localhost:019900/h"} {
		w, created, err := g.AddWebhook(ctx, "acme", u, "")
		require.NoError(t, err, u)
		require.False(t, created, u)
		require.Equal(t, first.ID, w.ID, u)
	}
	ip, created, err := g.AddWebhook(ctx, "acme", "http://127.0.0.1:019900/h", "")
	require.NoError(t, err)
	require.True(t, created, "another host name is another receiver, as far as the service can tell without DNS")
	again, created, err := g.AddWebhook(ctx, "acme", "http://[::ffff:127.0.0.1]:19900/h", "")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, ip.ID, again.ID)
	require.Equal(t, "http://127.0.0.1:19900/h", ip.URL, "stored normalized")
}

// TestBaseOfAnotherTenantNamesNoRun: a tenant naming another tenant's
// run as its base (which that tenant's own event already continues) is
// told its session has no such output: never the other tenant's run
// that holds the base.
func TestBaseOfAnotherTenantNamesNoRun(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	ctx := t.Context()
	for _, r := range []store.Run{
		{ID: "run-a1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "threshold"},
		{ID: "run-a2", Tenant: "acme", Session: "s1", EventID: "e2", Trigger: "threshold", BaseRunID: "run-a1"},
	} {
		_, err := g.Store.SubmitRun(ctx, r, "body-"+r.ID, nil)
		require.NoError(t, err)
	}
	_, err := g.Submit(ctx, Event{Tenant: "evil", Session: "s1", EventID: "x1", Model: "gpt-4o", ContextLimit: 128000,
		Base: &Base{RunID: "run-a1", SHA256: strings.Repeat("a", 64)}, Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)})
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "base.run_id", ie.Field)
	require.NotContains(t, err.Error(), "run-a2", "another tenant's run is never named")
	var held *BaseHeldError
	require.NotErrorAs(t, err, &held)
}

// TestBaseMustBeTheLatestOutputByRunAndDigest: an incremental event's base
// is checked against what the store recorded: an older output of the
// session is refused naming the latest, the latest run with another
// digest is refused naming base.sha256, and another session's output is
// no base.
func TestBaseMustBeTheLatestOutputByRunAndDigest(t *testing.T) {
	t.Parallel()
	g := testGateway(t, nil)
	ctx := t.Context()
	digest := func(i int) string { return fmt.Sprintf("%064x", i) }
	for i, r := range []store.Run{
		{ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "threshold"},
		{ID: "run-2", Tenant: "acme", Session: "s1", EventID: "e2", Trigger: "threshold"},
		{ID: "run-9", Tenant: "acme", Session: "s9", EventID: "e1", Trigger: "threshold"},
	} {
		_, err := g.Store.SubmitRun(ctx, r, "body-"+r.ID, nil)
		require.NoError(t, err)
		_, err = g.Store.CommitRun(ctx, r.ID, store.RunResult{OutputKey: "k-" + r.ID, OutputSHA256: digest(i + 1)})
		require.NoError(t, err)
	}
	delta := json.RawMessage(`[{"role":"user","content":"next"}]`)
	for _, tc := range []struct {
		name  string
		base  Base
		field string
		says  string
	}{
		{"an older output", Base{RunID: "run-1", SHA256: digest(1)}, "base.run_id", "run-2"},
		{"the latest run, another digest", Base{RunID: "run-2", SHA256: digest(1)}, "base.sha256", "run-2"},
		{"another session's output", Base{RunID: "run-9", SHA256: digest(3)}, "base.run_id", "latest"},
	} {
		_, err := g.Submit(ctx, Event{Tenant: "acme", Session: "s1", EventID: "d-" + tc.name, Model: "gpt-4o", ContextLimit: 128000,
			Base: &tc.base, Messages: delta})
		var ie *InputError
		require.ErrorAs(t, err, &ie, tc.name)
		require.Equal(t, tc.field, ie.Field, tc.name)
		require.Contains(t, err.Error(), tc.says, tc.name)
	}
}

// TestObservedTurnsCountsTheAgentsCalls: an incremental event's
// assistant messages (a ReAct turn, which has no role, counts as one)
// are the agent's calls since the previous compaction; a whole
// conversation shows none.
func TestObservedTurnsCountsTheAgentsCalls(t *testing.T) {
	t.Parallel()
	base := &Base{RunID: "run-1", SHA256: strings.Repeat("0", 64)}
	for _, tc := range []struct {
		name string
		ev   Event
		want int
	}{
		{"openai", Event{Base: base, Messages: json.RawMessage(`[{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"assistant","content":"x"},{"role":"user","content":"y"},{"role":"assistant","tool_calls":[]}]`)}, 2},
		{"anthropic", Event{Base: base, Messages: json.RawMessage(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]},{"role":"assistant","content":"x"}]`)}, 1},
		{"react turns", Event{Base: base, Messages: json.RawMessage(`[{"thought":"a","action":"ls"},{"thought":"b","action":"cat x"}]`)}, 2},
		{"only results", Event{Base: base, Messages: json.RawMessage(`[{"role":"user","content":"go on"}]`)}, 0},
		{"whole conversation", Event{Conversation: json.RawMessage(`{"messages":[{"role":"assistant","content":"x"}]}`)}, 0},
	} {
		require.Equal(t, tc.want, observedTurns(tc.ev), tc.name)
	}
}
