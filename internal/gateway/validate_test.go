package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// testGateway is a gateway on a schema and a bucket of its own, whose
// Temporal client is tc.
func testGateway(t *testing.T, tc client.Client) *Gateway {
	t.Helper()
	return &Gateway{Store: storetest.New(t), Blob: blobtest.New(t), Temporal: tc, TaskQueue: "q",
		DefaultPreset: policy.AutoSummarize}
}

// openAIConv is an OpenAI conversation whose messages[3] is an assistant
// message calling tool name with id id (left unanswered: the agent is
// waiting for it); messages[1..2] are a complete call and its result.
func openAIConv(t *testing.T, id, name string) []byte {
	t.Helper()
	call := func(id, name string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": "{}"}}
	}
	data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "user", "content": "list the files"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call("call_1", "ls")}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.go\nb.go"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call(id, name)}},
	}})
	require.NoError(t, err)
	return data
}

// anthropicConv is an Anthropic conversation with a top-level system
// field (which the parsed conversation holds as its message 0, so the
// caller's messages[i] is message i+1 there) whose messages[1] calls tool
// name with id id and messages[2] answers it.
func anthropicConv(t *testing.T, id, name string) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "system": "you are an agent", "messages": []any{
		map[string]any{"role": "user", "content": "list the files"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "a.go"}}},
	}})
	require.NoError(t, err)
	return data
}

// TestSubmitRefusesInvalidEvents: every rule of validate, and every
// check Submit makes before storing (overrides, conversation_key,
// parsing, tool call ids and names), refuses the event with an
// *InputError naming the field the caller must fix; and a refused event
// leaves nothing behind: no run, no claimed event, no object in S3, no
// call to Temporal (the mock has no expectation, so any call fails the
// test).
func TestSubmitRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	g := testGateway(t, mocks.NewClient(t))
	conv := openAIConv(t, "call_2", "cat")
	sha := strings.Repeat("ab", 32)
	long := strings.Repeat("m", 201)

	tests := []struct {
		name  string
		edit  func(*Event)
		field string
	}{
		{"tenant empty", func(e *Event) { e.Tenant = "" }, "tenant"},
		{"tenant with slash", func(e *Event) { e.Tenant = "a/b" }, "tenant"},
		{"tenant dot dot", func(e *Event) { e.Tenant = "a..b" }, "tenant"},
		{"session empty", func(e *Event) { e.Session = "" }, "session"},
		{"session with slash", func(e *Event) { e.Session = "a/b" }, "session"},
		{"session NUL", func(e *Event) { e.Session = "s\x001" }, "session"},
		{"session too long", func(e *Event) { e.Session = strings.Repeat("s", 201) }, "session"},
		{"event_id empty", func(e *Event) { e.EventID = "" }, "event_id"},
		{"event_id ESC", func(e *Event) { e.EventID = "e\x1b[31m" }, "event_id"},
		{"event_id dot dot", func(e *Event) { e.EventID = ".." }, "event_id"},
		{"event_id too long", func(e *Event) { e.EventID = strings.Repeat("e", 201) }, "event_id"},
		{"kind unknown", func(e *Event) { e.Kind = "urgent" }, "kind"},
		{"kind wrong case", func(e *Event) { e.Kind = "Manual" }, "kind"},
		{"preset unknown", func(e *Event) { e.Preset = "nope" }, "preset"},
		{"model NUL", func(e *Event) { e.Model = "gpt\x00-4o" }, "model"},
		{"model ESC", func(e *Event) { e.Model = "\x1b[2Jgpt-4o" }, "model"},
		{"model newline", func(e *Event) { e.Model = "gpt-4o\nINFO forged" }, "model"},
		{"model bidi override", func(e *Event) { e.Model = "gpt\u202e-4o" }, "model"},
		{"model invalid UTF-8", func(e *Event) { e.Model = "gpt\xff" }, "model"},
		{"model over 200 bytes", func(e *Event) { e.Model = long }, "model"},
		{"model surrounding space", func(e *Event) { e.Model = " gpt-4o" }, "model"},
		{"context_limit negative", func(e *Event) { e.ContextLimit = -1 }, "context_limit"},
		{"context_limit above max", func(e *Event) { e.ContextLimit = MaxContextLimit + 1 }, "context_limit"},
		{"conversation and key", func(e *Event) { e.ConversationKey = blob.ContentKey("acme", blob.KindArchive, sha) }, "conversation"},
		{"neither conversation nor key", func(e *Event) { e.Conversation = nil }, "conversation"},
		{"conversation_key of another tenant", func(e *Event) {
			e.Conversation, e.ConversationKey = nil, blob.ContentKey("other", blob.KindArchive, sha)
		}, "conversation_key"},
		{"conversation_key escaping the tenant", func(e *Event) {
			e.Conversation, e.ConversationKey = nil, "tenants/acme/../other/archive/ab/"+sha
		}, "conversation_key"},
		{"conversation_key not a content key", func(e *Event) { e.Conversation, e.ConversationKey = nil, "tenants/acme/notes.txt" }, "conversation_key"},
		{"conversation_key missing", func(e *Event) {
			e.Conversation, e.ConversationKey = nil, blob.ContentKey("acme", blob.KindArchive, sha)
		}, "conversation_key"},
		{"overrides above a cap", func(e *Event) { e.Overrides = json.RawMessage(`{"history":{"attempts":99}}`) }, "overrides.history.attempts"},
		{"overrides parallelism above cap", func(e *Event) { e.Overrides = json.RawMessage(`{"large_result":{"parallelism":1000}}`) }, "overrides.large_result.parallelism"},
		{"overrides chunk below minimum", func(e *Event) { e.Overrides = json.RawMessage(`{"large_result":{"chunk_chars":10}}`) }, "overrides.large_result.chunk_chars"},
		{"overrides operator field", func(e *Event) { e.Overrides = json.RawMessage(`{"encoding":"chars"}`) }, "overrides.encoding"},
		{"overrides unknown field", func(e *Event) { e.Overrides = json.RawMessage(`{"histroy":{}}`) }, "overrides.histroy"},
		{"overrides summarizer model", func(e *Event) { e.Overrides = json.RawMessage(`{"summarizer_model":"gpt-5-pro"}`) }, "overrides.summarizer_model"},
		{"overrides budget opt-out", func(e *Event) { e.Overrides = json.RawMessage(`{"budget":{"enabled":false}}`) }, "overrides.budget.enabled"},
		{"overrides too large", func(e *Event) {
			e.Overrides = json.RawMessage(`{"protection":{"pin_markers":["` + strings.Repeat("x", 17<<10) + `"]}}`)
		}, "overrides"},
		{"overrides not an object", func(e *Event) { e.Overrides = json.RawMessage(`[1]`) }, "overrides"},
		{"overrides preset invalid", func(e *Event) { e.Overrides = json.RawMessage(`{"target_usage":2}`) }, "overrides"},
		{"conversation not JSON", func(e *Event) { e.Conversation = json.RawMessage(`not json`) }, "conversation"},
		{"conversation of no format", func(e *Event) { e.Conversation = json.RawMessage(`{"foo":1}`) }, "conversation"},
		{"tool_call_id NUL", func(e *Event) { e.Conversation = openAIConv(t, "call\x002", "cat") }, "conversation.messages[3].tool_call_id"},
		{"tool_call_id ESC", func(e *Event) { e.Conversation = openAIConv(t, "call\x1b[2", "cat") }, "conversation.messages[3].tool_call_id"},
		{"tool_call_id too long", func(e *Event) { e.Conversation = openAIConv(t, strings.Repeat("c", 201), "cat") }, "conversation.messages[3].tool_call_id"},
		{"tool_name NUL", func(e *Event) { e.Conversation = openAIConv(t, "call_2", "c\x00at") }, "conversation.messages[3].tool_name"},
		{"tool_name ESC", func(e *Event) { e.Conversation = openAIConv(t, "call_2", "\x1b]0;pwned\x07") }, "conversation.messages[3].tool_name"},
		// The top-level system field is the parsed conversation's message
		// 0: the field still names the caller's messages[1].
		{"anthropic tool_use id ESC", func(e *Event) { e.Conversation = anthropicConv(t, "toolu\x1b1", "ls") }, "conversation.messages[1].tool_call_id"},
		{"anthropic tool name NUL", func(e *Event) { e.Conversation = anthropicConv(t, "toolu_1", "l\x00s") }, "conversation.messages[1].tool_name"},
	}
	var events []Event
	t.Run("refused", func(t *testing.T) {
		for i, tt := range tests {
			ev := Event{Tenant: "acme", Session: "s1", EventID: "e" + strings.Repeat("x", i), Model: "gpt-4o", ContextLimit: 128000,
				Conversation: conv}
			tt.edit(&ev)
			events = append(events, ev)
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, err := g.Submit(context.Background(), ev)
				var ie *InputError
				require.ErrorAs(t, err, &ie, "%v", err)
				require.Equal(t, tt.field, ie.Field, "%v", err)
				require.NotEmpty(t, ie.Err.Error())
				require.True(t, strings.HasPrefix(err.Error(), tt.field+": "), "%v", err)
			})
		}
	})

	ctx := context.Background()
	runs, err := g.Store.ListRuns(ctx, store.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs, "a refused event recorded a run")
	for _, ev := range events {
		if blob.ValidateTenant(ev.Tenant) != nil || ev.EventID == "" || !utf8.ValidString(ev.Session) || strings.ContainsRune(ev.Session, 0) {
			continue // nothing could have been claimed under it
		}
		run, err := g.Store.EventRun(ctx, ev.Tenant, ev.Session, ev.EventID)
		require.NoError(t, err)
		require.Empty(t, run, "event %q was claimed", ev.EventID)
	}
	keys, err := g.Blob.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, keys, "a refused event stored an object")
}

// TestValidateDefaults: an event that gives no kind is a threshold event,
// one that gives no preset takes the gateway's default, and values at
// the bounds (a 200-byte model, MaxContextLimit, a zero limit, caller
// overrides within the caps) are accepted.
func TestValidateDefaults(t *testing.T) {
	t.Parallel()
	g := &Gateway{DefaultPreset: policy.Watermark}
	ev := Event{Tenant: "acme", Session: "s1", EventID: "e1", Conversation: []byte(`{}`)}
	set, err := g.validate(&ev)
	require.NoError(t, err)
	require.Equal(t, KindThreshold, ev.Kind)
	require.Equal(t, policy.Watermark, ev.Preset)
	require.Equal(t, policy.Watermark, set.preset.Name, "the default preset is resolved")

	for _, edit := range []func(*Event){
		func(e *Event) { e.Model = strings.Repeat("m", 200) },
		func(e *Event) { e.ContextLimit = MaxContextLimit },
		func(e *Event) { e.Kind, e.Preset = KindManual, policy.Adaptive },
		func(e *Event) { e.Kind = KindCheckpoint },
		func(e *Event) { e.Overrides = json.RawMessage(`{"history":{"attempts":5}}`) },
		func(e *Event) {
			e.Conversation, e.ConversationKey = nil, "tenants/acme/archive/ab/"+strings.Repeat("ab", 32)
		},
	} {
		ev := Event{Tenant: "acme", Session: "s1", EventID: "e1", Conversation: []byte(`{}`)}
		edit(&ev)
		_, err := g.validate(&ev)
		require.NoError(t, err, "%+v", ev)
	}

	// A replay's recorded overrides were capped when first submitted;
	// the caps in force now do not apply to them again.
	ev = Event{Tenant: "acme", Session: "s1", EventID: "e1", Conversation: []byte(`{}`),
		Overrides: json.RawMessage(`{"history":{"attempts":9}}`)}
	var ie *InputError
	_, err = g.validate(&ev)
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "overrides.history.attempts", ie.Field)
	ev.recordedOverrides = true
	set, err = g.validate(&ev)
	require.NoError(t, err)
	require.Equal(t, 9, set.preset.History.Attempts, "the recorded overrides are resolved into the snapshot")
}
