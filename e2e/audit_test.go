package e2e

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

// auditHugeLog is a build log of about 40,000 tokens with marker in its
// middle: one tool result large enough for the three-tier design's tier 1 offload.
func auditHugeLog(marker string) string {
	line := "compiling package internal/store ok\n"
	return strings.Repeat(line, 3000) + "FAILED: " + marker + " in internal/store/runs.go:42\n" + strings.Repeat(line, 3000)
}

// auditConversation is a small OpenAI conversation whose one tool result is
// result.
func auditConversation(t *testing.T, userText, result string) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "You are a careful engineer."},
		map[string]any{"role": "user", "content": userText},
		map[string]any{"role": "assistant", "content": "Let me read the build log.", "tool_calls": []any{
			map[string]any{"id": "call_log", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"cat build.log"}`}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_log", "content": result},
		map[string]any{"role": "assistant", "content": "The store package fails to build; fixing it next."},
		// Three more, so that the result is older than the protected last 3.
		map[string]any{"role": "user", "content": "Go on."},
		map[string]any{"role": "assistant", "content": "Fixing internal/store/runs.go now."},
		map[string]any{"role": "user", "content": "Thanks."},
	}})
	require.NoError(t, err)
	return data
}

// auditSubmit submits events at once, so that sessions run in parallel,
// then waits for every run.
func auditSubmit(t *testing.T, e *env, evs ...gateway.Event) []gateway.Submitted {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	subs := make([]gateway.Submitted, len(evs))
	for i, ev := range evs {
		ev.Tenant = e.tenant
		if ev.EventID == "" {
			ev.EventID = fmt.Sprintf("audit-%d-%d", i, time.Now().UnixNano())
		}
		sub, err := e.gw.Submit(ctx, ev)
		require.NoError(t, err)
		subs[i] = sub
	}
	for _, sub := range subs {
		_, err := e.gw.Wait(ctx, sub.RunID)
		require.NoError(t, err, "run %s", sub.RunID)
	}
	return subs
}

func TestAuditHistoryRestoreDiffSearchExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	ctx := context.Background()
	svc := &audit.Service{Store: e.store, Blob: e.blob}
	other := e.tenant + "-other"

	compactIn := readData(t, "swe-agent-deepseek/django__django-11564.json")
	offloadIn := auditConversation(t, "Please fix ticket QUOKKA-1234 before the release.", auditHugeLog("ZEBRA-7781"))
	subs := auditSubmit(t, e,
		gateway.Event{Session: "compact", Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: compactIn},
		gateway.Event{Session: "offload", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 100000, Conversation: offloadIn},
	)
	compactRun, offloadRun := subs[0].RunID, subs[1].RunID

	t.Run("runs with filters", func(t *testing.T) {
		all, err := svc.Runs(ctx, e.tenant, store.RunFilter{})
		require.NoError(t, err)
		require.Len(t, all, 2)
		for _, r := range all {
			require.Equal(t, store.RunSucceeded, r.Status, "run %s: %s", r.ID, r.Error)
		}
		bySession, err := svc.Runs(ctx, e.tenant, store.RunFilter{Session: "offload"})
		require.NoError(t, err)
		require.Len(t, bySession, 1)
		require.Equal(t, offloadRun, bySession[0].ID)
		failed, err := svc.Runs(ctx, e.tenant, store.RunFilter{Status: store.RunFailed})
		require.NoError(t, err)
		require.Empty(t, failed)
		future, err := svc.Runs(ctx, e.tenant, store.RunFilter{From: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Empty(t, future)
		// A filter naming another tenant is overridden by the caller's.
		forced, err := svc.Runs(ctx, other, store.RunFilter{Tenant: e.tenant})
		require.NoError(t, err)
		require.Empty(t, forced)
		// Paging: one run per page, the cursor continues.
		first, err := svc.Runs(ctx, e.tenant, store.RunFilter{Limit: 1})
		require.NoError(t, err)
		require.Len(t, first, 1)
		second, err := svc.Runs(ctx, e.tenant, store.RunFilter{Limit: 1, AfterID: first[0].ID})
		require.NoError(t, err)
		require.Len(t, second, 1)
		require.NotEqual(t, first[0].ID, second[0].ID)
		_, err = svc.Runs(ctx, other, store.RunFilter{AfterID: first[0].ID})
		require.ErrorIs(t, err, store.ErrNotFound, "another tenant's run is no cursor")
	})

	t.Run("show has steps and drift", func(t *testing.T) {
		d, err := svc.Run(ctx, e.tenant, compactRun)
		require.NoError(t, err)
		require.Equal(t, "offload-compact", d.Run.Preset)
		require.Equal(t, "history-v2", d.Run.PromptVersion)
		require.Positive(t, d.Duration)
		names := map[string]bool{}
		for _, st := range d.Steps {
			names[st.Name] = true
			require.Positive(t, st.Attempt)
		}
		// The plan step archives the original (no step of its own), and
		// every step's record was written with the commit.
		for _, want := range []string{"plan", "deterministic", "history/summarize", "commit"} {
			require.True(t, names[want], "step %s recorded; have %v", want, names)
		}
		require.False(t, names["archive"], "no archive step: the plan archived; have %v", names)
		require.NotEmpty(t, d.Drift, "the history summary was drift-checked")
		// The run started CRITICAL: its handoff reuses the history's
		// summary, checked once.
		require.Equal(t, "history/drift/0", d.Drift[0].Step)
		for _, v := range d.Drift {
			require.False(t, strings.HasPrefix(v.Step, "handoff/"), v.Step)
		}

		raw, err := json.Marshal(d)
		require.NoError(t, err)
		var view struct {
			Run struct {
				ID             string `json:"id"`
				Status         string `json:"status"`
				AgentModel     string `json:"agent_model"`
				ContextLimit   int    `json:"context_limit"`
				InputSHA256    string `json:"input_sha256"`
				ResolvedPreset struct {
					Name    string `json:"name"`
					History struct {
						KeepLast int `json:"keep_last"`
					} `json:"history"`
				} `json:"resolved_preset"`
			} `json:"run"`
			Steps []struct {
				Name    string `json:"name"`
				Attempt int    `json:"attempt"`
			} `json:"steps"`
			Drift []struct {
				Missing []string `json:"missing"`
			} `json:"drift_verdicts"`
		}
		require.NoError(t, json.Unmarshal(raw, &view))
		require.Equal(t, compactRun, view.Run.ID)
		require.Equal(t, "succeeded", view.Run.Status)
		// What the caller asked for, as recorded at submit.
		require.Equal(t, "gpt-4o", view.Run.AgentModel)
		require.Equal(t, 60000, view.Run.ContextLimit)
		require.Len(t, view.Run.InputSHA256, 64)
		require.Equal(t, "offload-compact", view.Run.ResolvedPreset.Name)
		require.Equal(t, 5, view.Run.ResolvedPreset.History.KeepLast, "offload-compact keeps the last 5")
		require.Len(t, view.Steps, len(d.Steps))
		require.Len(t, view.Drift, len(d.Drift))
	})

	t.Run("restore gives the original bytes", func(t *testing.T) {
		for run, want := range map[string][]byte{compactRun: compactIn, offloadRun: offloadIn} {
			got, err := svc.Restore(ctx, e.tenant, run)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "run %s restores byte for byte", run)
		}
	})

	t.Run("diff of offload-compact", func(t *testing.T) {
		in := parse(t, compactIn)
		n := len(in.Messages)
		d, err := svc.Diff(ctx, e.tenant, compactRun)
		require.NoError(t, err)
		require.Equal(t, compactRun, d.RunID)
		require.Equal(t, 1, d.Added, "one summary message")
		require.Equal(t, 7, d.Kept, "the system prompt, the task and the last 5")
		require.Equal(t, n-7, d.Summarized)
		require.Zero(t, d.Removed)
		require.Equal(t, audit.ActionKept, d.Changes[0].Action)
		require.Equal(t, audit.ActionAdded, d.Changes[len(d.Changes)-6].Action)
		require.Contains(t, d.Changes[len(d.Changes)-6].Note, "[Compressed History]")
		for i, c := range d.Changes[len(d.Changes)-5:] {
			require.Equal(t, audit.ActionKept, c.Action)
			require.Equal(t, n-5+i, c.Index)
			require.Equal(t, c.Before, c.After)
		}
	})

	t.Run("diff of an offload names the key", func(t *testing.T) {
		d, err := svc.Diff(ctx, e.tenant, offloadRun)
		require.NoError(t, err)
		require.Equal(t, 1, d.Replaced)
		require.Equal(t, 7, d.Kept)
		offs, err := e.store.ListOffloads(ctx, e.tenant, "offload", false)
		require.NoError(t, err)
		require.Len(t, offs, 1)
		c := d.Changes[3]
		require.Equal(t, audit.ActionReplaced, c.Action)
		require.Contains(t, c.Note, "offloaded as "+offs[0].SHA256, "the offload's id, not its storage key")
		require.NotContains(t, c.Note, "tenants/")
		require.Less(t, c.After, c.Before)
	})

	t.Run("search offloads and archives", func(t *testing.T) {
		hits, err := svc.Search(ctx, e.tenant, "offload", "zebra-7781", 0)
		require.NoError(t, err)
		require.Len(t, hits, 2)
		require.Equal(t, audit.HitOffload, hits[0].Kind)
		require.Equal(t, offloadRun, hits[0].RunID)
		require.Contains(t, hits[0].Excerpt, "FAILED: ZEBRA-7781 in internal/store/runs.go:42")
		require.Equal(t, audit.HitArchive, hits[1].Kind)
		require.Equal(t, 3, hits[1].Message)

		hits, err = svc.Search(ctx, e.tenant, "offload", "QUOKKA-1234", 0)
		require.NoError(t, err)
		require.Len(t, hits, 1)
		require.Equal(t, audit.HitArchive, hits[0].Kind)
		require.Equal(t, 1, hits[0].Message)

		hits, err = svc.Search(ctx, e.tenant, "offload", "compiling package", 1)
		require.NoError(t, err)
		require.Len(t, hits, 1, "the limit holds")
		require.Equal(t, 6000, hits[0].Matches)

		hits, err = svc.Search(ctx, e.tenant, "compact", "ZEBRA-7781", 0)
		require.NoError(t, err)
		require.Empty(t, hits, "another session's content is not searched")

		// Issue 20: a search reads at most its byte budget, and says when
		// it stopped there.
		all, err := svc.SearchScan(ctx, e.tenant, "offload", "zebra-7781", 0)
		require.NoError(t, err)
		require.False(t, all.Truncated)
		small := *svc
		small.SearchBytes = 1
		cut, err := small.SearchScan(ctx, e.tenant, "offload", "zebra-7781", 0)
		require.NoError(t, err)
		require.True(t, cut.Truncated)
		require.Less(t, len(cut.Hits), len(all.Hits), "it stopped before reading everything")
	})

	t.Run("status report", func(t *testing.T) {
		st, err := svc.Status(ctx, e.tenant, "offload")
		require.NoError(t, err)
		require.Equal(t, offloadRun, st.LastRunID)
		require.Equal(t, 1, st.Offloads)
		require.Greater(t, st.OffloadTokens, 15000)
		require.Equal(t, mustRun(t, e, offloadRun).Level, st.Level)
		require.NotEmpty(t, st.Recommendation)
		require.Less(t, st.Usage, 0.25)
		require.Equal(t, 100000, st.ContextLimit)
		require.Len(t, st.History, 1)
		require.Equal(t, "offload", st.History[0].Type)
		require.Positive(t, st.History[0].TokensSaved)

		st, err = svc.Status(ctx, e.tenant, "compact")
		require.NoError(t, err)
		require.Equal(t, 1, st.Summarisations)
		require.Zero(t, st.Offloads, "offloads restored into the summary were deleted")
		require.Equal(t, 1, st.Runs["succeeded"])
	})

	t.Run("export jsonl and csv", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, svc.Export(ctx, e.tenant, store.RunFilter{}, audit.FormatJSONL, false, &buf))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 2)
		ids := map[string]bool{}
		for _, l := range lines {
			var rec audit.RunRecord
			require.NoError(t, json.Unmarshal([]byte(l), &rec))
			require.Equal(t, e.tenant, rec.Tenant)
			require.Equal(t, "succeeded", rec.Status)
			require.NotEmpty(t, rec.Stats)
			ids[rec.ID] = true
		}
		require.Equal(t, map[string]bool{compactRun: true, offloadRun: true}, ids)

		buf.Reset()
		require.NoError(t, svc.Export(ctx, e.tenant, store.RunFilter{Session: "compact"}, audit.FormatCSV, false, &buf))
		rows, err := csv.NewReader(&buf).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, audit.CSVHeader, rows[0])
		require.Equal(t, compactRun, rows[1][0])

		buf.Reset()
		require.NoError(t, svc.Export(ctx, e.tenant, store.RunFilter{Limit: 1}, audit.FormatCSV, false, &buf))
		rows, err = csv.NewReader(&buf).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 2, "header and the one row the limit allows")

		require.ErrorContains(t, svc.Export(ctx, e.tenant, store.RunFilter{}, "xml", false, &buf), `format "xml"`)
	})

	t.Run("another tenant sees nothing", func(t *testing.T) {
		for _, run := range []string{compactRun, offloadRun} {
			_, err := svc.Run(ctx, other, run)
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = svc.Restore(ctx, other, run)
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = svc.Diff(ctx, other, run)
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = e.gw.Replay(ctx, other, run, gateway.ReplayRequest{RequestID: "x"})
			require.ErrorIs(t, err, store.ErrNotFound)
		}
		runs, err := svc.Runs(ctx, other, store.RunFilter{})
		require.NoError(t, err)
		require.Empty(t, runs)
		hits, err := svc.Search(ctx, other, "offload", "ZEBRA-7781", 0)
		require.NoError(t, err)
		require.Empty(t, hits)
		_, err = svc.Status(ctx, other, "offload")
		require.ErrorIs(t, err, store.ErrNotFound)
		var buf bytes.Buffer
		require.NoError(t, svc.Export(ctx, other, store.RunFilter{}, audit.FormatJSONL, false, &buf))
		require.Empty(t, buf.String())
	})
}

// auditLongHistory is an OpenAI conversation of n turns with mid-sized
// tool results: too big for a 40,000-token window, with nothing large
// enough to offload, so offload-compact goes to its history summary.
func auditLongHistory(t *testing.T, n int) []byte {
	t.Helper()
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a careful engineer."},
		map[string]any{"role": "user", "content": "Find why the nightly build fails."},
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		var sb strings.Builder
		for j := 0; j < 120; j++ {
			fmt.Fprintf(&sb, "pkg/module%d/file%d.go:%d: checked %d symbols\n", i, j, j*7, i*j)
		}
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Checking module %d.", i), "tool_calls": []any{
				map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"go vet ./pkg/module%d"}`, i)}},
			}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": sb.String()},
		)
	}
	data, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	require.NoError(t, err)
	return data
}

// auditStats reads what Commit recorded about a run's budget.
func auditStats(t *testing.T, r store.Run) (model string, limit int) {
	t.Helper()
	var s struct {
		AgentModel   string `json:"agent_model"`
		ContextLimit int    `json:"context_limit"`
	}
	require.NoError(t, json.Unmarshal(r.Stats, &s))
	return s.AgentModel, s.ContextLimit
}

// TestReplayFailedRunFromArchive fails a run for real: its summarizer call
// hangs, and the operator cancels the run after its original was
// archived. With today's fallbacks no LLM error fails a run (map-reduce
// falls back to extractive or truncation, the history pass leaves history
// unchanged or falls back), so cancellation is the failure a replay must
// recover from.
func TestReplayFailedRunFromArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLLM(llmtest.WithLatency(time.Minute)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := &audit.Service{Store: e.store, Blob: e.blob}

	input := auditLongHistory(t, 24)
	sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "s1", EventID: "ev-hang", Kind: gateway.KindThreshold,
		Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 40000, Conversation: input})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := e.store.GetRun(ctx, sub.RunID)
		return err == nil && r.ArchiveKey != ""
	}, 2*time.Minute, 50*time.Millisecond, "the original is archived")
	require.NoError(t, e.client.CancelWorkflow(ctx, sub.RunID, ""))
	require.Eventually(t, func() bool {
		r, err := e.store.GetRun(ctx, sub.RunID)
		return err == nil && r.Status == store.RunFailed
	}, 2*time.Minute, 50*time.Millisecond, "the cancelled run is recorded failed")
	failed := mustRun(t, e, sub.RunID)
	require.Contains(t, failed.Error, "cancel")
	require.Equal(t, store.ErrorCanceled, failed.ErrorClass)
	for _, leak := range []string{"identity", "scheduledEventID", "activity error", "(type:"} {
		require.NotContains(t, failed.Error, leak, "Temporal's error chain stays in the logs")
	}
	require.Equal(t, failed.InputKey, failed.ArchiveKey, "the caller's bytes are stored once, as the archive")

	// The replay runs the watermark preset, which needs no LLM; the agent
	// model and context limit come from the original request.
	replay := func(requestID string) (gateway.Submitted, contract.Outcome) {
		t.Helper()
		s, err := e.gw.Replay(ctx, e.tenant, sub.RunID, gateway.ReplayRequest{RequestID: requestID, Preset: "watermark"})
		require.NoError(t, err)
		res, err := e.gw.Wait(ctx, s.RunID)
		require.NoError(t, err)
		return s, res
	}
	first, res := replay("r1")
	require.False(t, first.Existing)
	r := mustRun(t, e, first.RunID)
	require.Equal(t, store.RunSucceeded, r.Status, r.Error)
	require.Equal(t, sub.RunID, r.ReplayOf)
	require.Equal(t, "s1", r.Session)
	require.Equal(t, gateway.KindThreshold, r.Trigger)
	require.Equal(t, "watermark", r.Preset)
	require.Equal(t, failed.ArchiveSHA256, r.ArchiveSHA256, "replayed from the archived original")
	require.Equal(t, failed.ArchiveKey, r.InputKey, "a replay reads the archive and stores no copy of it")
	require.Equal(t, failed.ArchiveKey, r.ArchiveKey)
	model, limit := auditStats(t, r)
	require.Equal(t, "gpt-4o", model)
	require.Equal(t, 40000, limit)
	restored, err := svc.Restore(ctx, e.tenant, first.RunID)
	require.NoError(t, err)
	require.Equal(t, input, restored)
	require.NotEmpty(t, res.OutputKey)

	// The same request id again: the same run, not a second one.
	again, _ := replay("r1")
	require.True(t, again.Existing)
	require.Equal(t, first.RunID, again.RunID)
	_, err = e.gw.Replay(ctx, e.tenant, sub.RunID, gateway.ReplayRequest{RequestID: "r1", Preset: "three-tier"})
	require.ErrorIs(t, err, gateway.ErrConflict, "the same request id with other settings")
	replays, err := svc.Runs(ctx, e.tenant, store.RunFilter{ReplayOf: sub.RunID})
	require.NoError(t, err)
	require.Len(t, replays, 1)

	// Replaying every failed run: only the cancelled one failed.
	now := time.Now()
	bulk, err := e.gw.ReplayFailed(ctx, e.tenant, now.Add(-time.Hour), now.Add(time.Minute), gateway.ReplayRequest{RequestID: "bulk", Preset: "watermark"})
	require.NoError(t, err)
	require.Len(t, bulk, 1)
	require.NotEqual(t, first.RunID, bulk[0].RunID)
	_, err = e.gw.Wait(ctx, bulk[0].RunID)
	require.NoError(t, err)
	bulk2, err := e.gw.ReplayFailed(ctx, e.tenant, now.Add(-time.Hour), now.Add(time.Minute), gateway.ReplayRequest{RequestID: "bulk", Preset: "watermark"})
	require.NoError(t, err)
	require.Equal(t, []gateway.Submitted{{RunID: bulk[0].RunID, Existing: true, InputKey: bulk[0].InputKey, Generation: 1}}, bulk2)
	replays, err = svc.Runs(ctx, e.tenant, store.RunFilter{ReplayOf: sub.RunID})
	require.NoError(t, err)
	require.Len(t, replays, 2)
}

// TestReplayFailedSelectsByTimeRange replays runs recorded as failed in
// the past: run rows written directly, as the gateway and the plan step
// record them, with no workflow history to read.
func TestReplayFailedSelectsByTimeRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	input := auditConversation(t, "Please fix ticket QUOKKA-9.", "ok")
	now := time.Now()
	// The gateway stores the original once, as its archive, which is the
	// run's input; the plan step records it as the archive. A run that
	// failed before its plan step did is replayed from its input.
	old := func(id, session string, age time.Duration, planned bool) {
		in, err := e.blob.PutContentVerified(ctx, e.tenant, blob.KindArchive, input)
		require.NoError(t, err)
		r := store.Run{ID: id, Tenant: e.tenant, Session: session, EventID: id, Trigger: gateway.KindManual,
			Preset: "watermark", InputKey: in.Key, InputSHA256: in.SHA256, StartedAt: now.Add(-age)}
		if planned {
			r.ArchiveKey, r.ArchiveSHA256 = in.Key, in.SHA256
		}
		_, _, err = e.store.CreateRun(ctx, r)
		require.NoError(t, err)
		_, err = e.store.FailRun(ctx, id, store.Failure{Message: "worker lost"})
		require.NoError(t, err)
	}
	old("run-two-days", "a", 48*time.Hour, true)
	old("run-not-planned", "b", 36*time.Hour, false)
	old("run-two-weeks", "c", 14*24*time.Hour, true)

	subs, err := e.gw.ReplayFailed(ctx, e.tenant, now.Add(-72*time.Hour), now.Add(-24*time.Hour), gateway.ReplayRequest{RequestID: "q1"})
	require.NoError(t, err)
	require.Len(t, subs, 2)
	replayOf := map[string]string{}
	for _, sub := range subs {
		res, err := e.gw.Wait(ctx, sub.RunID)
		require.NoError(t, err)
		r := mustRun(t, e, sub.RunID)
		require.Equal(t, store.RunSucceeded, r.Status, r.Error)
		require.Equal(t, "watermark", r.Preset, "the original preset when the request names none")
		require.Equal(t, gateway.KindManual, r.Trigger)
		out, _ := e.output(res)
		require.Len(t, out.Messages, 8)
		restored, err := (&audit.Service{Store: e.store, Blob: e.blob}).Restore(ctx, e.tenant, sub.RunID)
		require.NoError(t, err)
		require.Equal(t, input, restored)
		replayOf[r.ReplayOf] = r.Session
	}
	require.Equal(t, map[string]string{"run-two-days": "a", "run-not-planned": "b"}, replayOf)

	_, err = e.gw.ReplayFailed(ctx, e.tenant, now, now.Add(-time.Hour), gateway.ReplayRequest{RequestID: "q2"})
	var ie *gateway.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "to", ie.Field)
	_, err = e.gw.Replay(ctx, e.tenant, "run-two-weeks", gateway.ReplayRequest{})
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "request_id", ie.Field)
	_, err = e.gw.Replay(ctx, e.tenant, "run-unknown", gateway.ReplayRequest{RequestID: "q3"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// auditEnvVars points the starter at the test's Postgres schema, bucket,
// Temporal server and task queue.
func auditEnvVars(t *testing.T, e *env) []string {
	t.Helper()
	var schema string
	require.NoError(t, e.store.Pool().QueryRow(context.Background(), "select current_schema()").Scan(&schema))
	u, err := url.Parse(storetest.BaseURL())
	require.NoError(t, err, "TEST_DATABASE_URL must be a postgres:// URL for this test")
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LOG_LEVEL=error",
		"DATABASE_URL=" + u.String(),
		"S3_ENDPOINT=" + blobtest.Endpoint(t), "S3_BUCKET=" + e.blob.Bucket(), "S3_PATH_STYLE=true",
		"S3_ACCESS_KEY=" + blobtest.AccessKey, "S3_SECRET_KEY=" + blobtest.SecretKey,
		"TEMPORAL_ADDRESS=" + server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + server.GetDefaultNamespace(),
		"TEMPORAL_TASK_QUEUE=" + e.taskQueue,
	}
}

func TestAuditCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	bin := buildCommand(t, "starter")
	vars := auditEnvVars(t, e)
	run := func(wantOK bool, args ...string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = vars
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if wantOK {
			require.NoError(t, err, "starter %v: %s", args, stderr.String())
		} else {
			require.Error(t, err, "starter %v should fail", args)
		}
		return stdout.String(), stderr.String()
	}
	tenant := "--tenant=" + e.tenant

	input := auditConversation(t, "Please fix ticket QUOKKA-1234 before the release.", auditHugeLog("ZEBRA-7781"))
	sub, _ := e.compact(gateway.Event{Session: "cli", Preset: "three-tier", Model: "gpt-4o", ContextLimit: 100000, Conversation: input})

	out, _ := run(true, "runs", tenant)
	require.Contains(t, out, "RUN")
	require.Contains(t, out, sub.RunID)
	require.Contains(t, out, "succeeded")
	out, _ = run(true, "runs", tenant, "--json", "--status=succeeded", "--from=1h")
	var recs []audit.RunRecord
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	require.Len(t, recs, 1)
	require.Equal(t, sub.RunID, recs[0].ID)

	out, _ = run(true, "show", sub.RunID, tenant)
	require.Contains(t, out, "three-tier")
	require.Contains(t, out, "agent model")
	require.Contains(t, out, "gpt-4o")
	require.Contains(t, out, "100000 tokens", "the limit and its unit")
	require.Contains(t, out, "PASS", "the passes")
	require.Contains(t, out, "STEP")
	require.Contains(t, out, "deterministic")

	file := filepath.Join(t.TempDir(), "original.json")
	run(true, "restore", sub.RunID, tenant, "-o", file)
	restored, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, input, restored, "restore writes the archived bytes exactly")
	out, _ = run(true, "restore", sub.RunID, tenant)
	require.Equal(t, string(input), out)

	out, _ = run(true, "diff", sub.RunID, tenant)
	require.Contains(t, out, "1 replaced")
	require.Regexp(t, `offloaded as [0-9a-f]{64}`, out)
	require.NotContains(t, out, "tenants/"+e.tenant+"/offload/", "no storage key in what the diff shows")

	out, _ = run(true, "search", tenant, "--session=cli", "zebra-7781")
	require.Contains(t, out, "offload (run "+sub.RunID)
	require.Contains(t, out, "FAILED: ZEBRA-7781")

	out, _ = run(true, "export", tenant, "--format=csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 2)

	out, _ = run(true, "status", tenant, "--session=cli")
	require.Contains(t, out, "## Context Status Report")
	require.Contains(t, out, "**Tool results offloaded:** 1")

	out, _ = run(true, "replay", sub.RunID, tenant, "--request-id=cli-1", "--preset=watermark", "--wait=2m", "--json")
	// The CLI prints the run's outcome as the HTTP API answers it, read
	// from the run's row.
	var res contract.Outcome
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	replayed := mustRun(t, e, res.RunID)
	require.Equal(t, sub.RunID, replayed.ReplayOf)
	require.Equal(t, store.RunSucceeded, replayed.Status)
	want, err := replayed.Outcome()
	require.NoError(t, err)
	require.Equal(t, want, res)
	require.Equal(t, "succeeded", res.Status)
	require.Equal(t, "openai", res.Format)
	require.NotEmpty(t, res.LevelBefore)
	require.Equal(t, replayed.OutputKey, res.OutputKey)
	out, stderr := run(true, "replay", sub.RunID, tenant, "--request-id=cli-1", "--preset=watermark", "--wait=2m")
	require.Contains(t, stderr, "1 replay(s) submitted")
	require.Regexp(t, `(?m)^status +succeeded$`, out, "the table of the outcome")
	require.Regexp(t, `(?m)^run +`+res.RunID+`$`, out, "the same run: the request id replays once")
	out, _ = run(true, "runs", tenant, "--replay-of="+sub.RunID, "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	require.Len(t, recs, 1, "the same request id replays once")

	out, _ = run(true, "apikey", "create", tenant)
	key := strings.TrimSpace(out)
	owner, ok, err := e.store.TenantForKey(context.Background(), key)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, e.tenant, owner)

	_, stderr = run(false, "show", sub.RunID, "--tenant="+e.tenant+"-other")
	require.Contains(t, stderr, "not found")
	require.NotContains(t, stderr, "three-tier")
}

// TestReadOnlyCommandsNeedOnlyPostgres: the commands that read or manage
// records run with DATABASE_URL alone: no S3 settings, no credentials
// (they never ask the EC2 metadata service).
func TestReadOnlyCommandsNeedOnlyPostgres(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	bin := buildCommand(t, "starter")
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	sub, _ := e.compact(gateway.Event{Session: "ro", Model: "gpt-4o", Conversation: input})
	var dbURL string
	for _, v := range auditEnvVars(t, e) {
		if strings.HasPrefix(v, "DATABASE_URL=") {
			dbURL = v
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LOG_LEVEL=error", dbURL}
	tenant := "--tenant=" + e.tenant
	for _, args := range [][]string{
		{"runs", tenant}, {"show", sub.RunID, tenant}, {"status", "--session", "ro", tenant},
		{"export", tenant}, {"apikey", "list", tenant}, {"webhooks", "list", tenant},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "starter %v: %s", args, out)
		if args[0] == "runs" || args[0] == "show" || args[0] == "export" {
			require.Contains(t, string(out), sub.RunID, "starter %v", args)
		}
	}
}
