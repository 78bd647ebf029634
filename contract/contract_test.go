package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/idcheck"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// TestCompactionInputWireFormat pins the JSON of a workflow input: the
// field names are in every recorded history and every queued session
// state, so a rename would make them undecodable. A new field must be
// added with omitempty, which this golden keeps out when it is unset.
func TestCompactionInputWireFormat(t *testing.T) {
	t.Parallel()
	in := CompactionInput{
		Run: Run{ID: "r1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "threshold", Preset: "watermark",
			Overrides: json.RawMessage(`{"history":{"keep_last":3}}`), Model: "gpt-4o", ContextLimit: 1000, ReplayOf: "r0"},
		InputKey: "tenants/acme/archive/ab/abc", InputSHA256: "abc", LLMTaskQueue: "q-llm",
		Visibility: true, Judge: true,
	}
	const golden = `{"run":{"id":"r1","tenant":"acme","session":"s1","event_id":"e1","trigger":"threshold","preset":"watermark",` +
		`"overrides":{"history":{"keep_last":3}},"model":"gpt-4o","context_limit":1000,"replay_of":"r0"},` +
		`"input_key":"tenants/acme/archive/ab/abc","input_sha256":"abc","llm_task_queue":"q-llm",` +
		`"visibility":true,"judge":true}`
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, golden, string(data))

	// An input with only the required fields decodes, with every option
	// off.
	var old CompactionInput
	require.NoError(t, json.Unmarshal([]byte(`{"run":{"id":"r1","tenant":"acme","session":"s1","event_id":"e1","trigger":"manual",`+
		`"preset":"watermark","model":"gpt-4o","context_limit":0},"input_key":"k","input_sha256":"abc"}`), &old))
	require.Equal(t, CompactionInput{Run: Run{ID: "r1", Tenant: "acme", Session: "s1", EventID: "e1", Trigger: "manual",
		Preset: "watermark", Model: "gpt-4o"}, InputKey: "k", InputSHA256: "abc"}, old)
}

// TestRunResolvedRoundTrips: the resolved preset a step receives decodes
// to the preset the plan resolved, and an unset one stays out of the JSON.
func TestRunResolvedRoundTrips(t *testing.T) {
	t.Parallel()
	p, err := policy.Resolve(policy.OffloadCompact, json.RawMessage(`{"history":{"keep_last":7}}`))
	require.NoError(t, err)
	data, err := json.Marshal(Run{ID: "r1", Resolved: &p})
	require.NoError(t, err)
	var back Run
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, &p, back.Resolved)

	data, err = json.Marshal(Run{ID: "r1"})
	require.NoError(t, err)
	require.NotContains(t, string(data), "resolved")
}

func TestSessionWorkflowID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "session/acme/s1", SessionWorkflowID("acme", "s1"))
}

func TestSearchAttributesListsEveryKey(t *testing.T) {
	t.Parallel()
	names := SearchAttributes()
	for _, key := range []string{SATenant.GetName(), SASession.GetName(), SAPreset.GetName(), SAOutcome.GetName()} {
		require.Contains(t, names, key)
	}
	require.Len(t, names, 4)
}

// TestSessionWorkflowIDCarriesEveryValidName: every name the API accepts
// (idcheck.Session), from every Unicode category it lets through, gives a
// workflow id Temporal's gRPC headers can carry (printable ASCII), no two
// names share an id, and a name of printable ASCII keeps the id it had
// before non-ASCII names were encoded (running sessions must not fork).
func TestSessionWorkflowIDCarriesEveryValidName(t *testing.T) {
	t.Parallel()
	names := []string{"s1", "my session", "a%C3%A9", "100%", "x:y@z", "~tilde~", "été", "a%20b", "a b"}
	for _, table := range unicode.Categories {
		var runes []rune
		for _, r := range table.R16 {
			runes = append(runes, rune(r.Lo), rune(r.Hi))
		}
		for _, r := range table.R32 {
			runes = append(runes, rune(r.Lo), rune(r.Hi))
		}
		for _, r := range runes {
			names = append(names, "s"+string(r)+"x", string(r)+"-name")
		}
	}
	ids := map[string]string{}
	for _, name := range names {
		if idcheck.Session(name) != nil {
			continue
		}
		id := SessionWorkflowID("acme", name)
		for i := 0; i < len(id); i++ {
			require.Truef(t, id[i] >= 0x20 && id[i] <= 0x7e, "name %q: id %q has byte %#x at %d", name, id, id[i], i)
		}
		if other, dup := ids[id]; dup {
			require.Equalf(t, other, name, "names %q and %q share id %q", other, name, id)
		}
		ids[id] = name
		ascii := true
		for _, r := range name {
			ascii = ascii && r >= 0x20 && r <= 0x7e
		}
		if ascii {
			require.Equal(t, "session/acme/"+name, id, "a plain name keeps its id")
		} else {
			require.True(t, strings.HasPrefix(id, "session-u/acme/"), id)
		}
	}
	require.Greater(t, len(ids), 100, "names from every accepted category were checked")
}
