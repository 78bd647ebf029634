package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/llm"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// bigConversation is convtest.Big with a last user turn.
func bigConversation(t testing.TB, target int) []byte {
	t.Helper()
	last, err := json.Marshal(map[string]string{"role": "user", "content": "Please continue."})
	require.NoError(t, err)
	return convtest.Big(t, target, last)
}

// TestLargeRunStepsAllocateWithinBounds runs the steps of a history
// summary (the bench's preset, auto-summarize, at the conversation's own
// size) on a conversation of 5 MB, the summarizer behind the real OpenAI
// client, and bounds what each step allocates, as multiples of the input.
// What a step allocates is also the most it can hold at once, so a step
// that copies the conversation a few times more shows here without a
// timing-dependent sample of the heap. Before the fixes (issue 20,
// item 10) the plan step allocated 13.0× (the parser's copies of every
// field, a copy of the input to count its characters; now 7.9×), the
// history transcript with its identifiers 17.5× (a buffer grown as it
// went, a copy to store it, a byte map of the transcript; now 10.0×), the
// summarizer call 9.5× (go-openai encoding the whole request in growing
// buffers, four copies of the text at once; now 0.9×: the text read once),
// the drift check 12.2× (folding the source for the fabrication check: a
// copy per step and a string header per word; now 2.0×), the run 65.8×
// (now 34.4×).
func TestLargeRunStepsAllocateWithinBounds(t *testing.T) {
	// Not parallel: TotalAlloc counts the whole process.
	data := bigConversation(t, 5<<20)
	in := float64(len(data))
	ctx := context.Background()
	st := storetest.New(t)
	bl := blobtest.New(t, func(c *blob.Config) { c.CacheBytes = 64 << 20 })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"## Session summary\n\nThe agent read django/db/models/fields/__init__.py."},`+
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	oa, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", Timeout: time.Minute})
	require.NoError(t, err)
	a := &Activities{Store: st, Blob: bl, Summarizer: oa, Limits: tokens.DefaultLimits(), LLMSlots: make(chan struct{}, 1)}

	ref, err := bl.PutContentVerified(ctx, "acme", blob.KindArchive, data)
	require.NoError(t, err)
	preset, err := policy.Resolve(policy.AutoSummarize, nil)
	require.NoError(t, err)
	conv, err := conversation.ParseAny(data)
	require.NoError(t, err)
	b, err := plan.NewBudget(preset, "gpt-4o", 0, tokens.DefaultLimits())
	require.NoError(t, err)
	run := contract.Run{ID: "run-large", Tenant: "acme", Session: "s1", EventID: "ev-1", Trigger: "threshold",
		Preset: policy.AutoSummarize, Model: "gpt-4o", ContextLimit: b.Measure(conv)}
	resolved, err := policy.Resolve(run.Preset, nil)
	require.NoError(t, err)
	run.Resolved = &resolved
	conv = conversation.Conversation{}
	sub, err := st.SubmitRun(ctx, store.Run{ID: run.ID, Tenant: "acme", Session: "s1", EventID: "ev-1",
		Trigger: "threshold", Preset: run.Preset, InputKey: ref.Key, InputSHA256: ref.SHA256}, "body", nil)
	require.NoError(t, err)
	require.False(t, sub.Conflict)

	var total float64
	step := func(name string, bound float64, fn func()) {
		t.Helper()
		x := float64(memtest.Allocated(fn)) / in
		total += x
		t.Logf("%-16s allocated %4.1f× the input (bound %.0f×)", name, x, bound)
		require.LessOrEqual(t, x, bound, "%s allocated %.1f× its %d-byte input", name, x, len(data))
	}
	var pr PlanResult
	step("plan", 10, func() {
		pr, err = a.Plan(ctx, PlanInput{Run: run, InputKey: ref.Key, InputSHA256: ref.SHA256})
		require.NoError(t, err)
	})
	var dr DeterministicResult
	step("deterministic", 12, func() {
		dr, err = a.Deterministic(ctx, DeterministicInput{Run: run, WorkKey: ref.Key})
		require.NoError(t, err)
	})
	var hp HistoryPlan
	step("history/prepare", 13, func() {
		hp, err = a.PrepareHistory(ctx, HistoryInput{Run: run, WorkKey: dr.WorkKey})
		require.NoError(t, err)
		// The transcript's identifiers and comparable form are made
		// beside the summarizer call (prefetchIdentifiers): the step is
		// charged with them, whenever they end.
		transcript, err := a.text(ctx, run.Tenant, hp.TranscriptKey)
		require.NoError(t, err)
		_, err = a.checked(hp.TranscriptKey, transcript)
		require.NoError(t, err)
	})
	require.False(t, hp.Skip, hp.Reason)
	var sr SummarizeResult
	step("history/summary", 2, func() {
		sr, err = a.Summarize(ctx, SummarizeInput{Run: run, Step: "history/summarize", Prompt: llm.PromptHistory,
			SourceKey: hp.TranscriptKey, ArchiveKey: pr.Archive.Key, TargetTokens: 4000})
		require.NoError(t, err)
	})
	step("history/drift", 4, func() {
		_, err = a.CheckDrift(ctx, DriftInput{Run: run, Step: "history/drift/0", SourceKey: hp.TranscriptKey, SummaryKey: sr.Key})
		require.NoError(t, err)
	})
	var wr WorkResult
	step("history/apply", 6, func() {
		wr, err = a.ApplyHistory(ctx, ApplyHistoryInput{Run: run, Step: "history/apply", WorkKey: dr.WorkKey, Split: hp.Split,
			SummaryKey: sr.Key, ArchiveKey: pr.Archive.Key})
		require.NoError(t, err)
	})
	step("commit", 1, func() {
		_, err = a.Commit(ctx, CommitInput{Run: run, WorkKey: wr.WorkKey, ArchiveKey: pr.Archive.Key,
			TokensBefore: pr.TokensBefore, LevelBefore: pr.LevelBefore})
		require.NoError(t, err)
	})
	t.Logf("the run allocated %.1f× its input", total)
	require.LessOrEqual(t, total, 45.0, "the run allocated %.1f× its input", total)
}
