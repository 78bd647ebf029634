package activities_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
	"github.com/ctxcompact/orchestrator/workflows"
)

// driftConversation is one real conversation of the drift table test.
type driftConversation struct {
	name, model string
	data        []byte
}

// compactOffline runs the Compaction workflow as the worker runs it, in
// Temporal's test environment, with the real activities on the in-memory
// stores and the offline summarizer (as `make run` does), and returns its
// outcome and every drift verdict it recorded.
func compactOffline(t *testing.T, preset string, conv driftConversation, limit int) (contract.Outcome, []store.Drift) {
	t.Helper()
	u := newUnit(t)
	u.run.Preset, u.run.Resolved, u.run.Trigger, u.run.Model, u.run.ContextLimit = preset, resolve(t, preset), "threshold", conv.model, limit
	ref, err := u.blob.PutContent(t.Context(), u.run.Tenant, blob.KindArchive, conv.data)
	require.NoError(t, err)
	r := u.store.runs[u.run.ID]
	r.Preset, r.Trigger, r.InputKey, r.InputSHA256 = preset, u.run.Trigger, ref.Key, ref.SHA256
	u.store.runs[u.run.ID] = r

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet{})
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.Compaction, workflow.RegisterOptions{Name: contract.CompactionWorkflow})
	env.RegisterActivity(u.a)
	env.ExecuteWorkflow(contract.CompactionWorkflow, contract.CompactionInput{Run: u.run, InputKey: ref.Key, InputSHA256: ref.SHA256})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out contract.Outcome
	require.NoError(t, env.GetWorkflowResult(&out))
	return out, u.store.lastDrifts(len(u.store.drifts))
}

// quiet drops the workflow test environment's log lines (a run logs every
// activity result at DEBUG).
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// realConversations are the conversations of the drift table test: SWE-agent
// runs of both sources (OpenAI chat with tool calls; Gemini's holds a
// 151,582-character result, the map-reduce path), one in Anthropic form,
// and tau-bench customer-service chats (each a trajectory of the
// repository's slice, as an OpenAI conversation). All are in
// testdata/conversations (see its README for their provenance).
func realConversations(t *testing.T) []driftConversation {
	t.Helper()
	sample := convtest.Read(t, "django__django-11742.json")
	anthropic, err := convtest.Anthropic(sample)
	require.NoError(t, err)
	out := []driftConversation{
		{name: "deepseek-django-11742", model: "gpt-4o", data: sample},
		{name: "deepseek-django-12308", model: "gpt-4o", data: convtest.Read(t, "swe-agent-deepseek/django__django-12308.json")},
		{name: "deepseek-django-15388", model: "gpt-4o", data: convtest.Read(t, "swe-agent-deepseek/django__django-15388.json")},
		{name: "gemini-django-15957", model: "gpt-4o", data: convtest.Read(t, "swe-agent-gemini/django__django-15957.json")},
		{name: "gemini-django-15629", model: "gpt-4o", data: convtest.Read(t, "swe-agent-gemini/django__django-15629.json")},
		{name: "anthropic-django-11742", model: "claude-sonnet-4-5", data: anthropic},
	}
	var tau []struct {
		Traj json.RawMessage `json:"traj"`
	}
	require.NoError(t, json.Unmarshal(convtest.Read(t, "tau-bench/gpt-4o-airline.json"), &tau))
	for _, i := range []int{0, 7, 13, 19} {
		out = append(out, driftConversation{name: "tau-bench-" + strconv.Itoa(i), model: "gpt-4o",
			data: []byte(`{"model":"gpt-4o","messages":` + string(tau[i].Traj) + `}`)})
	}
	return out
}

// TestDeterministicSummaryPassesItsOwnDriftCheck: on real conversations,
// under every preset, at a limit the conversation is over (two thirds of
// it) and at one it is RED under (as `make run` compacts its sample), the
// offline summaries (history, session log block, handoff, map-reduced
// results) pass their own drift checks at the first pass: every verdict
// recorded passes, and no run ends repaired or patched. A check that
// fails the product's own summaries on every run is an alarm nobody
// reads.
func TestDeterministicSummaryPassesItsOwnDriftCheck(t *testing.T) {
	t.Parallel()
	limits := []struct {
		name  string
		share func(measured int) int
	}{
		{name: "over", share: func(n int) int { return n * 2 / 3 }},
		{name: "red", share: func(n int) int { return n * 100 / 78 }},
	}
	for _, conv := range realConversations(t) {
		parsed, err := conversation.ParseAny(conv.data)
		require.NoError(t, err)
		for _, preset := range policy.Names() {
			p, err := policy.Builtin(preset)
			require.NoError(t, err)
			b, err := plan.NewBudget(p, conv.model, 1, tokens.DefaultLimits())
			require.NoError(t, err)
			measured := b.Measure(parsed)
			for _, limit := range limits {
				t.Run(conv.name+"/"+preset+"/"+limit.name, func(t *testing.T) {
					t.Parallel()
					out, drifts := compactOffline(t, preset, conv, limit.share(measured))
					require.Empty(t, failedVerdicts(drifts))
					require.Contains(t, []string{"", "passed"}, out.Drift)
				})
			}
		}
	}
	t.Run("make-run", func(t *testing.T) {
		t.Parallel()
		// cmd/dev's defaults: the sample, adaptive, gpt-4o, 40,000 tokens.
		conv := realConversations(t)[0]
		out, drifts := compactOffline(t, policy.Adaptive, conv, 40000)
		require.NotEmpty(t, drifts, "the sample's history summary is checked")
		require.Empty(t, failedVerdicts(drifts))
		require.Equal(t, "passed", out.Drift)
	})
}

// failedVerdicts are the failed verdicts of drifts, each with what it
// misses (at most five items).
func failedVerdicts(drifts []store.Drift) []string {
	var out []string
	for _, d := range drifts {
		if !d.Passed {
			out = append(out, fmt.Sprintf("%s: %s; missing: %q", d.Step, d.Verdict, d.Missing[:min(5, len(d.Missing))]))
		}
	}
	return out
}
