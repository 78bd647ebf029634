package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
)

// TestIntermediatesGoWhenTheRunIsFinal: a run that made working copies,
// a transcript, summaries and drift files leaves only its archived
// original, its output, its handoff and its live offloads in S3; the
// tenant's bucket holds nothing under any run's prefix.
func TestIntermediatesGoWhenTheRunIsFinal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
	checkRun(t, e, input, sub, res)
	require.NotEmpty(t, res.Drift, "the run made a checked history summary: it had intermediates")

	prefix, err := blob.TenantPrefix(e.tenant)
	require.NoError(t, err)
	keys, err := e.blob.List(context.Background(), prefix)
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, k := range keys {
		require.NotContains(t, k, "/runs/", "an intermediate is left: %s", k)
		_, kind, _, err := blob.ParseContentKey(k)
		require.NoError(t, err)
		kinds[kind]++
	}
	for kind := range kinds {
		require.Contains(t, []string{blob.KindArchive, blob.KindOutput, blob.KindOffload, "handoff"}, kind)
	}
	require.Equal(t, 1, kinds[blob.KindArchive])
	require.Equal(t, 1, kinds[blob.KindOutput])
	t.Logf("S3 objects after the run: %d (%v)", len(keys), kinds)
	require.LessOrEqual(t, len(keys), 2+kinds[blob.KindOffload]+kinds["handoff"], strings.Join(keys, "\n"))
}
