package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// TestDegradedRunSaysSo: with the summarizer's endpoint down, a run that
// needs a history summary still succeeds through the offline fallback,
// and says so in a field a machine reads; no step error a tenant can read
// names the operator's endpoint. With the endpoint up, the summarizer
// did not fail (a summary the drift check replaced is still said).
func TestDegradedRunSaysSo(t *testing.T) {
	t.Parallel()
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	for _, down := range []bool{true, false} {
		e := newEnv(t)
		e.llm.SetDown(down)
		sub, res := e.compact(gateway.Event{Preset: "auto-summarize", Model: "gpt-4o", ContextLimit: 30000, Conversation: input,
			Overrides: []byte(`{"history":{"attempts":1}}`)})
		checkRun(t, e, input, sub, res)
		require.Equal(t, "succeeded", res.Status)
		reasons := strings.Join(res.DegradedReasons, "; ")
		require.Equal(t, len(res.DegradedReasons) > 0, res.Degraded)
		if !down {
			require.NotContains(t, reasons, "summarizer failed")
			continue
		}
		require.True(t, res.Degraded)
		require.Contains(t, reasons, "the summarizer failed (http 503)", "the reason says why the call failed, in the words webhooks use")
		steps, err := e.store.ListSteps(t.Context(), sub.RunID)
		require.NoError(t, err)
		for _, st := range steps {
			require.NotContains(t, st.Error, e.llm.URL(), "step %s names the endpoint", st.Name)
			require.NotContains(t, st.Error, "127.0.0.1", "step %s names the endpoint's host", st.Name)
		}
	}
}
