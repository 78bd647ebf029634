package gateway

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestRequestHashIgnoresEncoding: the same event encoded by another
// client (keys in another order, other white space, characters written
// as \u escapes, the overrides likewise) hashes the same, so that a
// retry joins its run; a change to what is asked for (the conversation's
// content, the model, the preset, the limit, the kind, the overrides,
// the run replayed) hashes differently, so that the event id's reuse is
// a conflict; and no two of those changes hash alike.
func TestRequestHashIgnoresEncoding(t *testing.T) {
	t.Parallel()
	conv := `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"héllo <b>&</b>","name":"ann"}]}`
	reencoded := "{\n  \"messages\" : [\n    {\"content\": \"be brief\", \"role\": \"system\"},\n" +
		"    {\"name\":\"ann\", \"role\":\"\\u0075ser\", \"content\":\"h\\u00e9llo \\u003cb>\\u0026</b>\"}\n  ],\n\t\"model\": \"gpt-4o\"\r\n}\n"
	base := Event{Tenant: "acme", Session: "s1", EventID: "e1", Kind: KindThreshold, Model: "gpt-4o", ContextLimit: 128000,
		Preset: policy.AutoSummarize, Overrides: json.RawMessage(`{"history":{"attempts":2,"keep_last":4}}`)}
	hash := func(ev Event, conv string) string {
		t.Helper()
		h, err := requestHash(ev, []byte(conv))
		require.NoError(t, err)
		require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), h)
		return h
	}
	want := hash(base, conv)
	require.Equal(t, want, hash(base, conv), "deterministic")
	require.Equal(t, want, hash(base, reencoded), "the conversation re-encoded")
	same := base
	same.Overrides = json.RawMessage(" {\"history\" : {\n\"keep_last\":4, \"\\u0061ttempts\" : 2 }} ")
	require.Equal(t, want, hash(same, reencoded), "the overrides re-encoded")
	// Who asks and under which event id is the claim's business, not
	// the body's: the hash is of what is asked for.
	other := base
	other.Tenant, other.Session, other.EventID = "umbrella", "s2", "e2"
	require.Equal(t, want, hash(other, conv))

	changes := []struct {
		name string
		edit func(*Event)
		conv string
	}{
		{"conversation content", nil, `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello","name":"ann"}]}`},
		{"conversation message order", nil, `{"model":"gpt-4o","messages":[{"role":"user","content":"héllo <b>&</b>","name":"ann"},{"role":"system","content":"be brief"}]}`},
		{"conversation extra field", nil, `{"model":"gpt-4o","n":1.0,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"héllo <b>&</b>","name":"ann"}]}`},
		{"model", func(e *Event) { e.Model = "gpt-4o-mini" }, ""},
		{"model empty", func(e *Event) { e.Model = "" }, ""},
		{"preset", func(e *Event) { e.Preset = policy.ThreeTier }, ""},
		{"context limit", func(e *Event) { e.ContextLimit = 128001 }, ""},
		{"context limit zero", func(e *Event) { e.ContextLimit = 0 }, ""},
		{"kind", func(e *Event) { e.Kind = KindManual }, ""},
		{"kind checkpoint", func(e *Event) { e.Kind = KindCheckpoint }, ""},
		{"overrides value", func(e *Event) { e.Overrides = json.RawMessage(`{"history":{"attempts":3,"keep_last":4}}`) }, ""},
		{"overrides field", func(e *Event) { e.Overrides = json.RawMessage(`{"history":{"attempts":2}}`) }, ""},
		{"overrides none", func(e *Event) { e.Overrides = nil }, ""},
		{"replay of", func(e *Event) { e.ReplayOf = "run-0123" }, ""},
	}
	seen := map[string]string{want: "base"}
	for _, c := range changes {
		ev := base
		if c.edit != nil {
			c.edit(&ev)
		}
		body := conv
		if c.conv != "" {
			body = c.conv
		}
		h := hash(ev, body)
		require.NotContains(t, seen, h, "%s hashes as %s", c.name, seen[h])
		seen[h] = c.name
	}
}

// TestRequestHashNamesBadJSON: a conversation or overrides that is not
// JSON is the caller's error, named by its field.
func TestRequestHashNamesBadJSON(t *testing.T) {
	t.Parallel()
	var ie *InputError
	_, err := requestHash(Event{}, []byte(`{"messages":`))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "conversation", ie.Field)
	_, err = requestHash(Event{Overrides: json.RawMessage(`{"a":`)}, []byte(`{}`))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "overrides", ie.Field)
}

// TestRunIDIsDeterministicAndDistinct: the same tenant, session and
// event always name the same run ("run-" and 24 hex digits, a valid
// workflow id), and changing any one of them, or moving characters from
// one to the next, names another.
func TestRunIDIsDeterministicAndDistinct(t *testing.T) {
	t.Parallel()
	id := RunID("acme", "s1", "e1")
	require.Equal(t, id, RunID("acme", "s1", "e1"))
	require.Regexp(t, regexp.MustCompile(`^run-[0-9a-f]{24}$`), id)
	seen := map[string][3]string{}
	for _, k := range [][3]string{
		{"acme", "s1", "e1"}, {"acme2", "s1", "e1"}, {"acme", "s2", "e1"}, {"acme", "s1", "e2"},
		{"acmes", "1", "e1"}, {"acme", "s1e", "1"}, {"acme", "s", "1e1"}, {"ACME", "s1", "e1"},
		{"acme", "e1", "s1"}, {"s1", "acme", "e1"}, {"acme", "s1", "e1 "}, {"a", "b", "c"},
	} {
		id := RunID(k[0], k[1], k[2])
		require.NotContains(t, seen, id, "%q and %q", k, seen[id])
		seen[id] = k
	}
}

// TestInputOfMapsEveryField: the workflow input of a claimed run is what
// its row recorded, field by field, and the gateway's own settings (LLM
// task queue, search attributes, judge); every field of the input is
// set from the row but Resolved, which the plan step fills. A field
// added to contract.Run or contract.CompactionInput that inputOf does not
// map fails here.
func TestInputOfMapsEveryField(t *testing.T) {
	t.Parallel()
	r := store.Run{
		ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: KindCheckpoint, Preset: policy.ThreeTier,
		Overrides: json.RawMessage(`{"history":{"attempts":2}}`), AgentModel: "gpt-4o", ContextLimit: 64000, ReplayOf: "run-0",
		InputKey: "tenants/acme/archive/ab/abcd", InputSHA256: "abcd", ObservedTurns: 7,
		// What the run learns later is not its input.
		Model: "summarizer-1", Status: store.RunRunning, ArchiveKey: "tenants/acme/archive/cd/cdef", Level: "L2",
	}
	preset, err := policy.Resolve(policy.ThreeTier, r.Overrides)
	require.NoError(t, err)
	r.ResolvedPreset, err = json.Marshal(preset)
	require.NoError(t, err)
	g := &Gateway{LLMTaskQueue: "llm", DeliveryTaskQueue: "deliveries", SearchAttributes: true, Judge: true, TaskQueue: "steps"}
	in, err := g.inputOf(r)
	require.NoError(t, err)
	require.Equal(t, contract.CompactionInput{
		Run: contract.Run{
			ID: "run-1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: KindCheckpoint, Preset: policy.ThreeTier,
			Overrides: json.RawMessage(`{"history":{"attempts":2}}`), Model: "gpt-4o", ContextLimit: 64000, ReplayOf: "run-0",
			ObservedTurns: 7, Resolved: &preset,
		},
		InputKey: "tenants/acme/archive/ab/abcd", InputSHA256: "abcd", LLMTaskQueue: "llm", DeliveryTaskQueue: "deliveries",
		Visibility: true, Judge: true,
	}, in)
	requireAllSet(t, reflect.ValueOf(in.Run))
	require.Equal(t, 2, in.Run.Resolved.History.Attempts, "the snapshot is the row's resolved preset")
	requireAllSet(t, reflect.ValueOf(in))

	// The gateway's settings off: so are the input's.
	in, err = (&Gateway{}).inputOf(r)
	require.NoError(t, err)
	require.Empty(t, in.LLMTaskQueue)
	require.Empty(t, in.DeliveryTaskQueue)
	require.False(t, in.Visibility)
	require.False(t, in.Judge)
	require.Equal(t, "gpt-4o", in.Run.Model, "the agent's model, not the summarizer's")

	// A row without its snapshot is not started with a preset resolved
	// now.
	r.ResolvedPreset = nil
	_, err = g.inputOf(r)
	require.ErrorContains(t, err, "no resolved preset")
}

// requireAllSet fails for each field of struct v that is zero, but those
// named in except.
func requireAllSet(t *testing.T, v reflect.Value, except ...string) {
	t.Helper()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !slices.Contains(except, name) {
			require.False(t, v.Field(i).IsZero(), "field %s.%s is not set", v.Type().Name(), name)
		}
	}
}
