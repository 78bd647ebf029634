package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/strategy"
)

// withPointers replaces the content of the first tool results of an OpenAI
// conversation with references to keys, in both forms a reference takes:
// offload-compact's bare pointer line and the three-tier design's block.
func withPointers(t *testing.T, data []byte, keys []string) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	n := 0
	for _, m := range doc["messages"].([]any) {
		msg := m.(map[string]any)
		if msg["role"] != "tool" || n >= 2*len(keys) {
			continue
		}
		key := keys[n%len(keys)]
		if n < len(keys) {
			msg["content"] = "Tool result is at: " + key
		} else {
			msg["content"] = strategy.Reference(strategy.OffloadRef{Key: key, ToolName: "bash", TokensSaved: 9000, Preview: "…"})
		}
		n++
	}
	require.Equal(t, 2*len(keys), n, "enough tool results to point from")
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	return out
}

// TestPointersToAnotherTenantAreText is issue 10's critical case: tenant A
// names tenant B's archive, output and offload keys as offload pointers in
// its conversation, under every preset and a manual (forced) compaction.
// None of B's content reaches A's output, and B's objects and rows stay.
func TestPointersToAnotherTenantAreText(t *testing.T) {
	t.Parallel()
	// The runs' transcripts are read after them: kept.
	e := newEnv(t, withoutLLM(), keepIntermediates())
	ctx := context.Background()
	tenantB := e.tenant + "-b"
	bInput := withHugeResult(t, readData(t, "swe-agent-deepseek/django__django-12308.json"), 20, hugeText(t)[:151582])
	bSub, bRes := e.compact(gateway.Event{Tenant: tenantB, Session: "b", Preset: policy.ThreeTier, Model: "gpt-4o", ContextLimit: 28000, Conversation: bInput})
	checkRun(t, e, bInput, bSub, bRes)
	bOffs, err := e.store.ListOffloads(ctx, tenantB, "b", false)
	require.NoError(t, err)
	require.NotEmpty(t, bOffs, "B has a live offload")
	bKeys := []string{bRes.ArchiveKey, bRes.OutputKey, bOffs[0].Key}
	// What only B's conversation holds: its huge result and its task.
	bSecrets := []string{hugeText(t)[50000:50080], hugeText(t)[120000:120080]}

	aBase := readData(t, "swe-agent-deepseek/django__django-11742.json")
	aInput := withPointers(t, aBase, bKeys)
	for _, preset := range policy.Names() {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			sub, res := e.compact(gateway.Event{Session: "a-" + preset, Kind: gateway.KindManual, Preset: preset, Model: "gpt-4o", ContextLimit: 20000, Conversation: aInput})
			run := mustRun(t, e, sub.RunID)
			require.Contains(t, []string{"succeeded", "over_limit"}, string(run.Status), run.Error)
			_, data := e.output(res)
			for _, s := range bSecrets {
				require.NotContains(t, string(data), s, "B's content is not in A's output")
			}
		})
	}
	t.Cleanup(func() {
		// After every A run: B's data is intact and B's offload still live.
		for _, k := range bKeys {
			ok, err := e.blob.Exists(ctx, k)
			require.NoError(t, err)
			require.True(t, ok, "B's %s is intact", k)
		}
		_, err := e.blob.GetVerified(ctx, bRes.ArchiveKey, mustRun(t, e, bSub.RunID).ArchiveSHA256)
		require.NoError(t, err, "B's original restores")
		live, err := e.store.ListOffloads(ctx, tenantB, "b", false)
		require.NoError(t, err)
		require.Len(t, live, len(bOffs))
		// Nothing of B was read into what A's summaries were made from.
		objects, err := e.blob.List(ctx, "tenants/"+e.tenant+"/runs/")
		require.NoError(t, err)
		var transcripts []string
		for _, k := range objects {
			if strings.Contains(k, "/transcript/") {
				transcripts = append(transcripts, k)
			}
		}
		require.NotEmpty(t, transcripts, "A's history summaries ran")
		for _, k := range transcripts {
			data, err := e.blob.Get(ctx, k)
			require.NoError(t, err)
			for _, s := range bSecrets {
				escaped, _ := json.Marshal(s)
				require.NotContains(t, string(data), s, "transcript %s", k)
				require.NotContains(t, string(data), strings.Trim(string(escaped), `"`), "transcript %s", k)
			}
		}
	})
}

// TestSharedOffloadIsNotDeleted: offload-compact's cleanup deletes an offloaded
// object only when nothing live refers to it: not while another session
// of the tenant has it, nor while a kept message of the same conversation
// still points at it.
func TestSharedOffloadIsNotDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	ctx := context.Background()
	huge := hugeText(t)[:151582]
	base := readData(t, "swe-agent-deepseek/django__django-11742.json")

	t.Run("another session", func(t *testing.T) {
		t.Parallel()
		input := withHugeResult(t, base, 20, huge)
		// Both sessions offload the same result: one object, two rows.
		_, r1 := e.compact(gateway.Event{Session: "one", Preset: policy.OffloadCompact, Model: "gpt-4o", ContextLimit: 200000, Overrides: json.RawMessage(`{"offload":{"trigger_usage":0}}`), Conversation: input})
		e.compact(gateway.Event{Session: "two", Preset: policy.OffloadCompact, Model: "gpt-4o", ContextLimit: 200000, Overrides: json.RawMessage(`{"offload":{"trigger_usage":0}}`), Conversation: input})
		one, err := e.store.ListOffloads(ctx, e.tenant, "one", false)
		require.NoError(t, err)
		require.Len(t, one, 1)
		key := one[0].Key

		// Session one compacts its history: the offload is restored into
		// the summary and released.
		_, data := e.output(r1)
		require.Contains(t, string(data), "Tool result is at: "+one[0].SHA256, "the output refers to the offload by its id")
		require.NotContains(t, string(data), key, "never by its storage key")
		sub, res := e.compact(gateway.Event{Session: "one", Kind: gateway.KindManual, Preset: policy.OffloadCompact, Model: "gpt-4o", ContextLimit: 200000, Conversation: data})
		checkRun(t, e, data, sub, res)
		left, err := e.store.ListOffloads(ctx, e.tenant, "one", false)
		require.NoError(t, err)
		require.Empty(t, left, "session one released its offload")

		ok, err := e.blob.Exists(ctx, key)
		require.NoError(t, err)
		require.True(t, ok, "session two still refers to the object: it is not deleted")
		two, err := e.store.ListOffloads(ctx, e.tenant, "two", false)
		require.NoError(t, err)
		require.Len(t, two, 1)
		got, err := e.blob.GetVerified(ctx, key, two[0].SHA256)
		require.NoError(t, err)
		require.Equal(t, huge, string(got), "session two restores it")
	})

	t.Run("same conversation", func(t *testing.T) {
		t.Parallel()
		// The same result early (summarized) and in the kept tail.
		input := withHugeResult(t, base, 20, huge)
		n := len(parse(t, input).Messages)
		input = withHugeResult(t, input, n-4, huge)
		input = []byte(strings.Replace(string(input), `"call_huge"`, `"call_huge_2"`, 2))
		sub, res := e.compact(gateway.Event{Session: "same", Kind: gateway.KindManual, Preset: policy.OffloadCompact, Model: "gpt-4o", ContextLimit: 200000, Overrides: json.RawMessage(`{"offload":{"trigger_usage":0}}`), Conversation: input})
		out := checkRun(t, e, input, sub, res)
		live, err := e.store.ListOffloads(ctx, e.tenant, "same", false)
		require.NoError(t, err)
		require.Len(t, live, 1, "the kept message's offload stays live")
		ok, err := e.blob.Exists(ctx, live[0].Key)
		require.NoError(t, err)
		require.True(t, ok, "the object the kept message points at is not deleted")
		var refs int
		for _, k := range strategy.References(out, func(int) bool { return true }) {
			if k == live[0].SHA256 { // a reference names the offload's id
				refs++
			}
		}
		require.Equal(t, 1, refs, "one reference left, in the kept tail")
	})
}
