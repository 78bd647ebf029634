package activities_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/activities"
	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/offline"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// unit is one test's activities over the in-memory stores, with a run of
// the tenant "acme" the store knows as submitted.
type unit struct {
	t     *testing.T
	a     *activities.Activities
	blob  *memBlob
	store *memStore
	run   contract.Run
}

func newUnit(t *testing.T) *unit {
	t.Helper()
	u := &unit{t: t, blob: newMemBlob(), store: newMemStore()}
	u.a = &activities.Activities{Store: u.store, Blob: u.blob, Summarizer: offline.Summarizer{},
		Limits: tokens.DefaultLimits(), LLMSlots: make(chan struct{}, 1)}
	u.run = contract.Run{ID: testRunID(t), Tenant: "acme", Session: "s1", EventID: "ev-1", Trigger: "manual",
		Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 4000}
	u.run.Resolved = resolve(t, u.run.Preset)
	u.store.runs[u.run.ID] = store.Run{ID: u.run.ID, Tenant: "acme", Session: "s1", Preset: u.run.Preset, Status: store.RunPending}
	return u
}

// resolve is the built-in preset name as the gateway resolves it at
// submit: the snapshot a run carries.
func resolve(t *testing.T, name string) *policy.Preset {
	t.Helper()
	p, err := policy.Resolve(name, nil)
	require.NoError(t, err)
	return &p
}

// put stores text under kind for the run's tenant and returns its key.
func (u *unit) put(kind, text string) string {
	u.t.Helper()
	ref, err := u.blob.PutContentString(u.t.Context(), u.run.Tenant, kind, text)
	require.NoError(u.t, err)
	return ref.Key
}

// get is the text at key.
func (u *unit) get(key string) string {
	u.t.Helper()
	text, err := u.blob.GetString(u.t.Context(), key)
	require.NoError(u.t, err)
	return text
}

// conversation stores the test conversation (a real SWE-agent run) as
// the gateway stores a run's input, as its archive, and returns its ref
// and bytes.
func (u *unit) conversation() (blob.Ref, []byte) {
	u.t.Helper()
	data, err := os.ReadFile("../testdata/conversations/django__django-11742.json")
	require.NoError(u.t, err, "the test conversation must be in testdata")
	ref, err := u.blob.PutContent(u.t.Context(), u.run.Tenant, blob.KindArchive, data)
	require.NoError(u.t, err)
	return ref, data
}

// testRunID is a run id for test t: its name with what a run id may not
// hold (blob.ValidateRunID) replaced by '-'.
func testRunID(t *testing.T) string {
	return "run-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
}
