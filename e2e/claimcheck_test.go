package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/plan"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/convtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/sessionlife"
	"github.com/ctxcompact/orchestrator/internal/tokens"
)

// maxHistoryBytes is the claim check's bar: a run's whole Temporal history
// stays far below the conversation it compacts.
const maxHistoryBytes = 1 << 20

// historiesDir is where recorded histories go for the replay test of
// package workflows.
const historiesDir = "../workflows/testdata/histories"

// fetchHistory reads every event of a workflow's latest run.
func fetchHistory(t *testing.T, c client.Client, workflowID string) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err, "history of %s", workflowID)
		h.Events = append(h.Events, ev)
	}
	require.NotEmpty(t, h.Events, "history of %s", workflowID)
	return h
}

// addQuietHook registers, for e's tenant, a webhook receiver that
// accepts every delivery.
func addQuietHook(t *testing.T, e *env) {
	t.Helper()
	l := takeHookListener(t)
	hook := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hook.Serve(l) }()
	t.Cleanup(func() { _ = hook.Close() })
	_, _, err := e.gw.AddWebhook(context.Background(), e.tenant, "http://"+l.Addr().String()+"/hook", "recorded")
	require.NoError(t, err)
}

// deliveryDone waits for the webhook delivery of run runID to complete
// and returns its description.
func deliveryDone(t *testing.T, e *env, runID string) *workflowservice.DescribeWorkflowExecutionResponse {
	t.Helper()
	var d *workflowservice.DescribeWorkflowExecutionResponse
	require.Eventually(t, func() bool {
		var err error
		d, err = e.client.DescribeWorkflowExecution(context.Background(), contract.DeliveryWorkflowID(runID), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, time.Minute, 100*time.Millisecond, "the delivery of %s completed", runID)
	return d
}

// versionMarkers lists the change ids of the version markers in h, in
// their order (the SDK's "Version" markers carry it as "change-id").
func versionMarkers(t *testing.T, h *historypb.History) []string {
	t.Helper()
	var ids []string
	for _, ev := range h.Events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id))
		ids = append(ids, id)
	}
	return ids
}

// historyJSON is the history in the JSON form `temporal workflow show
// --output json` writes and the SDK's replayer reads.
func historyJSON(t *testing.T, h *historypb.History) []byte {
	t.Helper()
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
	require.NoError(t, err)
	return data
}

// readableJSON is the history as JSON with payloads written as the JSON
// they hold rather than base64, so that text in a payload is searchable.
func readableJSON(t *testing.T, h *historypb.History) string {
	t.Helper()
	data, err := temporalproto.CustomJSONMarshalOptions{
		Metadata: map[string]any{commonpb.EnablePayloadShorthandMetadataKey: true},
	}.Marshal(h)
	require.NoError(t, err)
	return string(data)
}

// historyBytes is the size of the history as Temporal stores it: the sum
// of the serialized events.
func historyBytes(h *historypb.History) int {
	n := 0
	for _, ev := range h.Events {
		n += proto.Size(ev)
	}
	return n
}

// snippetSafe are the characters a snippet may use: none of them is
// escaped by JSON or protojson, so a snippet found in the input is found
// verbatim in any serialization of a payload that carries it.
func snippetSafe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" .,:;()_-=+*/#!?'", r)
}

// snippets picks n distinctive 40-character slices of conversation text,
// spread over the messages: each is the first run of safe characters of
// that length past the middle of a long message, with enough letters to
// be prose or code rather than padding.
func snippets(t *testing.T, contents []string, n int) []string {
	t.Helper()
	const size = 40
	var long []string
	for _, c := range contents {
		if len(c) >= 400 {
			long = append(long, c)
		}
	}
	require.GreaterOrEqual(t, len(long), n)
	// Evenly spaced messages first, then any other when one of those has
	// no usable slice.
	var order []int
	for i := 0; i < n; i++ {
		order = append(order, i*len(long)/n)
	}
	for i := range long {
		order = append(order, i)
	}
	seen := map[string]bool{}
	var out []string
	for _, idx := range order {
		if len(out) == n {
			break
		}
		c := long[idx]
		for start := len(c) / 2; start+size <= len(c); start++ {
			s := c[start : start+size]
			letters := 0
			ok := true
			for _, r := range s {
				if !snippetSafe(r) {
					ok = false
					break
				}
				if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
					letters++
				}
			}
			if ok && letters >= 25 && !seen[s] {
				seen[s] = true
				out = append(out, s)
				break
			}
		}
	}
	require.Len(t, out, n, "distinctive snippets found")
	return out
}

// requireNoText asserts that no snippet occurs in the history, neither in
// its JSON nor in its binary events, and that the search itself works:
// mustContain, a value only a payload carries (the input key), is found.
func requireNoText(t *testing.T, h *historypb.History, snips []string, mustContain string) {
	t.Helper()
	js := readableJSON(t, h)
	var bin strings.Builder
	for _, ev := range h.Events {
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		bin.Write(b)
	}
	require.True(t, strings.Contains(js, mustContain), "the search sees payloads: %q in the JSON", mustContain)
	require.True(t, strings.Contains(bin.String(), mustContain), "the search sees payloads: %q in the events", mustContain)
	for _, s := range snips {
		require.False(t, strings.Contains(js, s), "conversation text %q in the history (JSON)", s)
		require.False(t, strings.Contains(bin.String(), s), "conversation text %q in the history (binary)", s)
	}
}

// openAIContents lists the string contents of an OpenAI conversation's
// messages.
func openAIContents(t *testing.T, data []byte) []string {
	t.Helper()
	var doc struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	var out []string
	for _, m := range doc.Messages {
		if s, ok := m.Content.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// messageTexts lists the text of each message of a conversation in any
// format.
func messageTexts(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	for _, m := range parse(t, data).Messages {
		out = append(out, textOf(m))
	}
	return out
}

// bigConversation concatenates the swe-agent-deepseek runs, over and over,
// into one OpenAI conversation of at least minBytes. Only the first system
// prompt is kept, and tool call ids get a suffix per copy so that every
// call stays paired with its own result.
func bigConversation(t *testing.T, minBytes int) []byte {
	t.Helper()
	dir := filepath.Join(dataDir, "swe-agent-deepseek")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Fatalf("test data %s: no conversations", dir)
	}
	sort.Strings(files)
	var msgs []map[string]any
	size := 0
	for copyN := 0; size < minBytes; copyN++ {
		for fi, f := range files {
			if size >= minBytes {
				break
			}
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			var doc struct {
				Messages []map[string]any `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(data, &doc), f)
			suffix := fmt.Sprintf("_c%df%d", copyN, fi)
			// Each run ends with a call whose result was never recorded:
			// pending at its end, an orphan in the middle of the joined
			// conversation, which no valid input holds.
			if n := len(doc.Messages); n > 0 && doc.Messages[n-1]["tool_calls"] != nil {
				doc.Messages = doc.Messages[:n-1]
			}
			for _, m := range doc.Messages {
				if m["role"] == "system" && len(msgs) > 0 {
					continue
				}
				if calls, ok := m["tool_calls"].([]any); ok {
					for _, c := range calls {
						call := c.(map[string]any)
						call["id"] = fmt.Sprint(call["id"]) + suffix
					}
				}
				if id, ok := m["tool_call_id"].(string); ok {
					m["tool_call_id"] = id + suffix
				}
				msgs = append(msgs, m)
			}
			size += len(data)
		}
	}
	out, err := json.Marshal(map[string]any{"model": "deepseek-chat", "messages": msgs})
	require.NoError(t, err)
	return out
}

// TestClaimCheckKeepsTextOutOfTemporal compacts a 5 MB conversation and
// proves the claim check: the Compaction and Session histories are small
// and carry keys and figures, never the conversation's text.
func TestClaimCheckKeepsTextOutOfTemporal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	input := bigConversation(t, 5<<20)
	require.GreaterOrEqual(t, len(input), 5<<20)
	snips := snippets(t, openAIContents(t, input), 20)
	for _, s := range snips {
		require.True(t, strings.Contains(string(input), s), "snippet %q is in the input", s)
	}

	sub, res := e.compact(gateway.Event{Session: "claimcheck", Model: "gpt-4o", ContextLimit: 128000, Conversation: input})
	checkRun(t, e, input, sub, res)
	var applied []string
	for _, p := range res.Passes {
		if p.Applied {
			applied = append(applied, p.Name)
		}
	}
	t.Logf("passes: %+v", res.Passes)
	require.GreaterOrEqual(t, len(applied), 2, "several passes ran: %+v", res.Passes)
	require.Less(t, res.TokensAfter, res.TokensBefore/10)

	run := fetchHistory(t, e.client, sub.RunID)
	session := fetchHistory(t, e.client, contract.SessionWorkflowID(e.tenant, "claimcheck"))
	for name, h := range map[string]*historypb.History{"compaction": run, "session": session} {
		size, js := historyBytes(h), len(historyJSON(t, h))
		t.Logf("%s history: %d events, %d bytes serialized, %d bytes as JSON; input %d bytes", name, len(h.Events), size, js, len(input))
		require.Less(t, size, maxHistoryBytes, "%s history size", name)
		require.Less(t, js, maxHistoryBytes, "%s history JSON size", name)
		requireNoText(t, h, snips, sub.InputKey)
	}
}

// TestRecordHistories runs one compaction per kind of workflow path on the
// real stack and writes each history to workflows/testdata/histories, for
// the replay test there. Run it after a deliberate change to workflow
// code (with a version gate where old histories must still replay):
//
//	RECORD_HISTORIES=1 go test -count=1 -run TestRecordHistories ./e2e/
func TestRecordHistories(t *testing.T) {
	if os.Getenv("RECORD_HISTORIES") == "" {
		t.Skip("set RECORD_HISTORIES=1 to record workflow histories")
	}
	record := func(t *testing.T, name string, h *historypb.History, input []byte, snips []string, inputKey string) {
		t.Helper()
		for _, s := range snips {
			require.True(t, strings.Contains(string(input), s), "snippet %q is in the input", s)
		}
		requireNoText(t, h, snips, inputKey)
		data := historyJSON(t, h)
		// The replayer must read back exactly what was recorded.
		back, err := client.HistoryFromJSON(strings.NewReader(string(data)), client.HistoryJSONOptions{})
		require.NoError(t, err)
		require.True(t, proto.Equal(h, back), "history %s round-trips through JSON", name)
		require.NoError(t, os.MkdirAll(historiesDir, 0o755))
		path := filepath.Join(historiesDir, name+".json")
		// A recorded history stands for the runs in flight that took its
		// path: recording it again with today's code would lose that.
		if _, err := os.Stat(path); err == nil && os.Getenv("RECORD_HISTORIES") != "overwrite" {
			t.Fatalf("%s is recorded already: record today's path under a new name (or set RECORD_HISTORIES=overwrite, if no run in flight can have the old one)", path)
		}
		require.NoError(t, os.WriteFile(path, data, 0o644))
		t.Logf("%s: %d events, %d bytes", name, len(h.Events), len(data))
	}

	t.Run("offload-compact", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.NotEmpty(t, res.Drift, "the history summary was drift-checked")
		record(t, "compaction-offload-compact", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("manual-low-usage", func(t *testing.T) {
		t.Parallel()
		// A manual compaction far under the target: the deterministic
		// passes reach it, and the history pass runs anyway (the
		// manual-compacts version marker).
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Kind: gateway.KindManual, Model: "gpt-4o", ContextLimit: 1000000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Less(t, res.TokensAfter, res.TokensBefore, "the manual compaction compacted")
		record(t, "compaction-manual-low-usage", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("session-log-reflection", func(t *testing.T) {
		t.Parallel()
		// A long session with the LLM judge on: the run recorded is one
		// whose session log outgrew its budget and was reflected, its new
		// block judged once (the judge-once version marker).
		e := newEnv(t)
		e.gw.Judge = true
		data := readData(t, "swe-agent-deepseek/django__django-13265.json")
		src, err := conversation.Parse(data, conversation.FormatOpenAI)
		require.NoError(t, err)
		counter, err := tokens.New("o200k_base")
		require.NoError(t, err)
		var runID, inputKey string
		var input []byte
		_, err = sessionlife.Replay(t.Context(), src, sessionlife.Options{Limit: sessionLimit, Trigger: 0.65, Counter: counter, Compactions: 8, Cycle: true},
			func(ctx context.Context, le sessionlife.Event) (contract.Outcome, []byte, error) {
				sub, res := e.compact(gateway.Event{Session: "reflect", EventID: fmt.Sprintf("reflect-%d", le.N), Preset: "adaptive",
					Model: "gpt-4o", ContextLimit: sessionLimit, Conversation: le.Data})
				if runID == "" && res.SessionLog != nil && res.SessionLog.Reflected {
					runID, inputKey, input = sub.RunID, sub.InputKey, le.Data
				}
				_, out := e.output(res)
				return res, out, nil
			})
		require.NoError(t, err)
		require.NotEmpty(t, runID, "a compaction of the session reflected its log")
		record(t, "compaction-session-log-reflection", fetchHistory(t, e.client, runID), input, snippets(t, openAIContents(t, input), 15), inputKey)
	})
	// driftRepair compacts a real run with a bar no extractive summary
	// clears: the repair path. llmtest is an LLM: a summary of it that
	// still fails is replaced by the deterministic one.
	driftRepair := func(t *testing.T) (*env, []byte, gateway.Submitted, contract.Outcome) {
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-12308.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 30000,
			Overrides: json.RawMessage(`{"drift":{"min_retention":1}}`), Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Contains(t, []string{"repaired", "patched", "replaced", "replaced+patched"}, res.Drift)
		return e, input, sub, res
	}
	t.Run("drift-repair", func(t *testing.T) {
		t.Parallel()
		e, input, sub, _ := driftRepair(t)
		record(t, "compaction-drift-repair", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("drift-replacement-beside-repair", func(t *testing.T) {
		t.Parallel()
		// The same path, with the deterministic replacement made beside
		// the repair's summarizer call, as a regular activity (the
		// replacement-beside-repair version marker).
		e, input, sub, res := driftRepair(t)
		require.Contains(t, []string{"repaired", "replaced", "replaced+patched"}, res.Drift, "an LLM summary is never patched as it is")
		h := fetchHistory(t, e.client, sub.RunID)
		scheduled := 0
		for _, ev := range h.Events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "Fallback" {
				scheduled++
			}
		}
		require.Equal(t, 1, scheduled, "the replacement was scheduled as an activity beside the repair")
		record(t, "compaction-drift-replacement-beside-repair", h, input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("run-shape", func(t *testing.T) {
		t.Parallel()
		// The run-shape version: one marker for every branch a run takes.
		// The drift repair path with its replacement beside the repair
		// (judge-once, replacement-beside-repair), on a tenant with a
		// webhook (webhooks, delivery-queue), handing on its admission
		// slot and releasing its intermediates after the commit.
		e := newEnv(t)
		addQuietHook(t, e)
		input := readData(t, "swe-agent-deepseek/django__django-12308.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 30000,
			Overrides: json.RawMessage(`{"drift":{"min_retention":1}}`), Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Contains(t, []string{"repaired", "replaced", "replaced+patched"}, res.Drift)
		deliveryDone(t, e, sub.RunID)
		h := fetchHistory(t, e.client, sub.RunID)
		require.Equal(t, []string{"run-shape"}, versionMarkers(t, h), "one version marker for the run's every branch")
		record(t, "compaction-run-shape", h, input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("run-shape-manual", func(t *testing.T) {
		t.Parallel()
		// The run-shape version on the manual-compacts branch.
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Kind: gateway.KindManual, Model: "gpt-4o", ContextLimit: 1000000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Less(t, res.TokensAfter, res.TokensBefore, "the manual compaction compacted")
		h := fetchHistory(t, e.client, sub.RunID)
		require.Equal(t, []string{"run-shape"}, versionMarkers(t, h))
		record(t, "compaction-run-shape-manual", h, input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("history-failed", func(t *testing.T) {
		t.Parallel()
		// The summarizer refuses the key: offload-compact leaves the history as it
		// was, and the history records the activity failure.
		e := newEnv(t, withLLM(llmtest.WithScript(llmtest.Fault401{})))
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.True(t, res.HistoryFailed)
		record(t, "compaction-history-failed", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("react-two-layer", func(t *testing.T) {
		t.Parallel()
		// Calls that take a while, so that the parallel chunks overlap.
		e := newEnv(t, withLLM(llmtest.WithLatency(300*time.Millisecond)))
		huge := hugeText(t)[:300000]
		openai := withHugeResult(t, readData(t, "swe-agent-deepseek/django__django-11742.json"), 30, huge)
		input := reactFromOpenAI(t, openai)
		sub, res := e.compact(gateway.Event{Preset: "react-two-layer", Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Greater(t, e.llm.MaxConcurrent(), 1, "chunks were summarized in parallel")
		snips := append(snippets(t, messageTexts(t, input), 20), snippets(t, []string{huge[:100000], huge[100000:200000], huge[200000:]}, 3)...)
		record(t, "compaction-react-two-layer", fetchHistory(t, e.client, sub.RunID), input, snips, sub.InputKey)
	})
	t.Run("budget-ladder", func(t *testing.T) {
		t.Parallel()
		// The newest result overflows and the watermark preset has neither
		// offload nor history: the budget ladder offloads it, summarizes
		// the history with a smaller tail and ends under the limit.
		e := newEnv(t)
		huge := convtest.SingleLine(412_000)
		input, err := convtest.AppendResults(readData(t, "swe-agent-deepseek/django__django-11742.json"), huge)
		require.NoError(t, err)
		sub, res := e.compact(gateway.Event{Preset: "watermark", Model: "gpt-4o", ContextLimit: 30000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.False(t, res.OverLimit, res.OverLimitReason)
		var names []string
		for _, p := range res.Passes {
			names = append(names, p.Name)
		}
		require.Contains(t, names, "budget/offload")
		require.Contains(t, names, "budget/history")
		// Two of the result's digests (no quotes to escape), from its middle
		// and its end.
		snips := append(snippets(t, openAIContents(t, input), 20),
			fmt.Sprintf("%08x", 3000*2654435761), fmt.Sprintf("%08x", 5000*2654435761))
		record(t, "compaction-budget-ladder", fetchHistory(t, e.client, sub.RunID), input, snips, sub.InputKey)
	})
	t.Run("drift-replaced", func(t *testing.T) {
		t.Parallel()
		// A lazy model (an invented quote, a judge passing everything): the
		// fabrication check fails it and the deterministic summary
		// replaces it (drift-deterministic-fallback).
		e := newEnv(t, withLLM(llmtest.WithAnswer(func(_, _ string, judge bool) string {
			if judge {
				return lazyVerdict
			}
			return "## Summary\nThe user asked: \"please rewrite the whole project in Rust\". Going well.\n"
		})))
		e.gw.Judge = true
		input := readData(t, "swe-agent-deepseek/django__django-12308.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 30000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Contains(t, []string{"replaced", "replaced+patched"}, res.Drift)
		record(t, "compaction-drift-replaced", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("handoff", func(t *testing.T) {
		t.Parallel()
		// A run that starts CRITICAL under a preset without a history
		// summary: its handoff's summary is made by the summarizer beside
		// the passes and drift-checked (handoff-summary).
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-12308.json")
		p, err := policy.Builtin(policy.ReactTwoLayer)
		require.NoError(t, err)
		b, err := plan.NewBudget(p, "gpt-4o", 1, tokens.DefaultLimits())
		require.NoError(t, err)
		limit := b.Measure(parse(t, input)) * 100 / 90 // CRITICAL
		sub, res := e.compact(gateway.Event{Preset: "react-two-layer", Model: "gpt-4o", ContextLimit: limit, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Equal(t, "CRITICAL", res.LevelBefore)
		require.NotEmpty(t, res.HandoffKey)
		var made bool
		for _, p := range res.Passes {
			made = made || (p.Name == "handoff/summary" && strings.HasPrefix(p.Note, "summary by "))
		}
		require.True(t, made, "the summarizer made the handoff's summary: %v", res.Passes)
		record(t, "compaction-handoff", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("relieve-red", func(t *testing.T) {
		t.Parallel()
		// A result that just arrived leaves the run RED under its goal:
		// the relief step offloads it (relieve-red).
		e := newEnv(t)
		input, err := convtest.AppendResults(readData(t, "swe-agent-deepseek/django__django-11742.json"), convtest.SingleLine(180_000))
		require.NoError(t, err)
		p, err := policy.Builtin(policy.Watermark)
		require.NoError(t, err)
		b, err := plan.NewBudget(p, "gpt-4o", 1, tokens.DefaultLimits())
		require.NoError(t, err)
		limit := b.Measure(parse(t, input)) * 100 / 84
		sub, res := e.compact(gateway.Event{Preset: "watermark", Model: "gpt-4o", ContextLimit: limit, Conversation: input})
		checkRun(t, e, input, sub, res)
		var relieved bool
		for _, p := range res.Passes {
			relieved = relieved || (p.Name == "budget/relieve" && p.Applied)
		}
		require.True(t, relieved)
		require.NotEqual(t, "RED", res.LevelAfter)
		snips := append(snippets(t, openAIContents(t, input), 20), fmt.Sprintf("%08x", 2000*2654435761))
		record(t, "compaction-relieve-red", fetchHistory(t, e.client, sub.RunID), input, snips, sub.InputKey)
	})
	t.Run("ladder-offload-small", func(t *testing.T) {
		t.Parallel()
		// A ReAct trajectory of many small results, still over its goal
		// after truncation: the ladder's last step offloads them, oldest
		// first (ladder-offload-small).
		e := newEnv(t)
		input := reactFromOpenAI(t, readData(t, "swe-agent-deepseek/django__django-11797.json"))
		sub, res := e.compact(gateway.Event{Preset: "react-two-layer", Model: "gpt-4o", ContextLimit: 240000, Conversation: input})
		checkRun(t, e, input, sub, res)
		var small bool
		for _, p := range res.Passes {
			small = small || (p.Name == "budget/offload-small" && p.Applied)
		}
		require.True(t, small, "passes: %v", res.Passes)
		require.False(t, res.OverLimit, res.OverLimitReason)
		record(t, "compaction-ladder-offload-small", fetchHistory(t, e.client, sub.RunID), input, snippets(t, messageTexts(t, input), 20), sub.InputKey)
	})
	t.Run("watermark", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		input := anthropicWithCheckpoint(6)
		sub, res := e.compact(gateway.Event{Session: "wm", Kind: gateway.KindCheckpoint, Preset: "watermark", Model: "claude-sonnet-4", Conversation: input})
		checkRun(t, e, input, sub, res)
		// The texts of this conversation are short: search for them whole.
		snips := []string{"You are a careful engineer", "Look at module 3", "Reading module 5.", "def f4(): pass",
			"Can you deactivate refactoring", "unloaded 3 augments", "Deactivated 3 augments", "Now help me with feature X"}
		h := fetchHistory(t, e.client, sub.RunID)
		record(t, "compaction-watermark", h, input, snips, sub.InputKey)
	})
	t.Run("release-intermediates", func(t *testing.T) {
		t.Parallel()
		// A run that ends by releasing its intermediates (behind the
		// "intermediates" version).
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		record(t, "compaction-release-after-commit", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("outcome-update", func(t *testing.T) {
		t.Parallel()
		// A run whose waiter was answered by the outcome update, before
		// the release of its intermediates.
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		h := fetchHistory(t, e.client, sub.RunID)
		updated := false
		for _, ev := range h.Events {
			updated = updated || ev.GetWorkflowExecutionUpdateCompletedEventAttributes() != nil
		}
		require.True(t, updated, "the waiter was answered by the outcome update")
		record(t, "compaction-outcome-update", h, input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("session-erasure", func(t *testing.T) {
		t.Parallel()
		// An erasure of a session with one finished run.
		e := newEnv(t)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Session: "erased", Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		er, wf, err := e.gw.EraseSession(context.Background(), e.tenant, "erased", "recorder")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := e.store.GetErasure(context.Background(), e.tenant, er.ID)
			return err == nil && !got.FinishedAt.IsZero()
		}, time.Minute, 100*time.Millisecond)
		require.Eventually(t, func() bool {
			d, err := e.client.DescribeWorkflowExecution(context.Background(), wf, "")
			return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
		}, time.Minute, 100*time.Millisecond)
		record(t, "session-erasure-executions", fetchHistory(t, e.client, wf), input, snippets(t, openAIContents(t, input), 20), er.ID)
	})
	t.Run("retention-sweep", func(t *testing.T) {
		t.Parallel()
		// A sweep of one expired run: listed, its objects collected, its
		// rows erased, its objects deleted and the sweep recorded.
		e := newEnv(t)
		ctx := context.Background()
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		// And one proxy snapshot, swept first (retention-snapshots).
		snap := []byte(`{"messages":[{"role":"user","content":"a proxy session's snapshot"}]}`)
		sum := blob.SHA256Hex(snap)
		_, err := e.store.AddSnapshot(ctx, store.Snapshot{Tenant: e.tenant, Session: "proxy-s", Wire: "openai-chat", From: 1, To: 1,
			Digest: sum, Key: blob.ContentKey(e.tenant, blob.KindSnapshot, sum), SHA256: sum, Bytes: int64(len(snap))},
			func(ctx context.Context) error {
				_, err := e.blob.PutContent(ctx, e.tenant, blob.KindSnapshot, snap)
				return err
			})
		require.NoError(t, err)
		require.NoError(t, e.store.SetRetention(ctx, e.tenant, 0.00001)) // under a second
		time.Sleep(2 * time.Second)
		run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "retention-" + sub.RunID, TaskQueue: e.gw.TaskQueue},
			contract.RetentionWorkflow, contract.RetentionInput{})
		require.NoError(t, err)
		var swept contract.RetentionResult
		require.NoError(t, run.Get(ctx, &swept))
		require.Equal(t, 1, swept.Runs)
		require.Equal(t, 1, swept.Snapshots)
		require.Positive(t, swept.ObjectsDeleted)
		record(t, "retention-sweep-snapshots", fetchHistory(t, e.client, run.GetID()), input, snippets(t, openAIContents(t, input), 20), sub.RunID)
	})
	t.Run("webhook", func(t *testing.T) {
		t.Parallel()
		// A run of a tenant with an endpoint that answers 500 then 200:
		// the run starts its delivery (an abandoned child) and the
		// delivery retries once.
		e := newEnv(t)
		var calls atomic.Int32
		hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if calls.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		// On an allow-listed receiver port (WEBHOOK_ALLOW_HOSTS is host:port).
		hook.Listener = takeHookListener(t)
		hook.Start()
		t.Cleanup(hook.Close)
		_, _, err := e.gw.AddWebhook(context.Background(), e.tenant, hook.URL, "recorded")
		require.NoError(t, err)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		require.Eventually(t, func() bool {
			ds, err := e.store.ListDeliveries(context.Background(), e.tenant, sub.RunID)
			return err == nil && len(ds) == 1 && ds[0].Status == "delivered"
		}, time.Minute, 100*time.Millisecond)
		snips := snippets(t, openAIContents(t, input), 20)
		record(t, "compaction-webhook", fetchHistory(t, e.client, sub.RunID), input, snips, sub.InputKey)
		deliveryDone(t, e, sub.RunID)
		record(t, "webhook-delivery", fetchHistory(t, e.client, contract.DeliveryWorkflowID(sub.RunID)), input, snips, sub.RunID)
	})
	t.Run("webhook-delivery-queue", func(t *testing.T) {
		t.Parallel()
		// Version delivery-queue: the run starts its delivery on the
		// delivery task queue (DELIVERY_TASK_QUEUE).
		e := newEnv(t)
		addQuietHook(t, e)
		input := readData(t, "swe-agent-deepseek/django__django-11564.json")
		sub, res := e.compact(gateway.Event{Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
		checkRun(t, e, input, sub, res)
		d := deliveryDone(t, e, sub.RunID)
		require.Equal(t, e.deps.Config.DeliveryTaskQueue, d.GetWorkflowExecutionInfo().GetTaskQueue(), "the delivery ran on the delivery queue")
		record(t, "compaction-webhook-delivery-queue", fetchHistory(t, e.client, sub.RunID), input, snippets(t, openAIContents(t, input), 20), sub.InputKey)
	})
	t.Run("session-two-events", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		inputs := [][]byte{
			readData(t, "swe-agent-deepseek/django__django-12308.json"),
			readData(t, "swe-agent-deepseek/django__django-11742.json"),
		}
		// Both events are submitted before either runs: the second waits in
		// the session's queue.
		var subs []gateway.Submitted
		for i, in := range inputs {
			sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: "pair", EventID: fmt.Sprintf("ev-%d", i),
				Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: in})
			require.NoError(t, err)
			subs = append(subs, sub)
		}
		for i, sub := range subs {
			res, err := e.gw.Wait(ctx, sub.RunID)
			require.NoError(t, err)
			checkRun(t, e, inputs[i], sub, res)
		}
		// The session then waits idle on its timer; record once it does, so
		// that the history ends on a completed workflow task.
		id := contract.SessionWorkflowID(e.tenant, "pair")
		var h *historypb.History
		require.Eventually(t, func() bool {
			h = fetchHistory(t, e.client, id)
			done := 0
			for _, ev := range h.Events {
				if ev.EventType == enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED {
					done++
				}
			}
			return done == 2 && h.Events[len(h.Events)-1].EventType == enumspb.EVENT_TYPE_TIMER_STARTED
		}, time.Minute, 100*time.Millisecond)
		snips := append(snippets(t, openAIContents(t, inputs[0]), 10), snippets(t, openAIContents(t, inputs[1]), 10)...)
		record(t, "session-two-events", h, append(append([]byte{}, inputs[0]...), inputs[1]...), snips, subs[1].InputKey)
	})
	// admissionPair submits one event in each of two sessions of a tenant
	// with one run in flight at a time: one waits for admission and is
	// told by the other's run when it ended. It returns which run handed
	// its slot on.
	admissionPair := func(t *testing.T) (e *env, input []byte, sessions []string, subs []gateway.Submitted, handoff int) {
		e = newEnv(t, withRunsInFlight(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		input = readData(t, "swe-agent-deepseek/django__django-12308.json")
		sessions = []string{"admit-a", "admit-b"}
		for _, s := range sessions {
			sub, err := e.gw.Submit(ctx, gateway.Event{Tenant: e.tenant, Session: s, EventID: "ev-0",
				Preset: "offload-compact", Model: "gpt-4o", ContextLimit: 60000, Conversation: input})
			require.NoError(t, err)
			subs = append(subs, sub)
		}
		for _, sub := range subs {
			res, err := e.gw.Wait(ctx, sub.RunID)
			require.NoError(t, err)
			checkRun(t, e, input, sub, res)
		}
		// The run that handed its slot on signalled the other session.
		handoff = -1
		for i, sub := range subs {
			require.NoError(t, e.client.GetWorkflow(ctx, sub.RunID, "").Get(ctx, nil))
			for _, ev := range fetchHistory(t, e.client, sub.RunID).Events {
				if ev.EventType == enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED {
					handoff = i
				}
			}
		}
		require.NotEqual(t, -1, handoff, "one run handed its slot on")
		return e, input, sessions, subs, handoff
	}
	t.Run("run-shape-told", func(t *testing.T) {
		t.Parallel()
		// The run-shape version on a run that hands its slot on: it
		// closes only once its signal to the admitted run's session is
		// out (awaitTold).
		e, input, _, subs, handoff := admissionPair(t)
		h := fetchHistory(t, e.client, subs[handoff].RunID)
		require.Equal(t, []string{"run-shape"}, versionMarkers(t, h))
		require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, h.Events[len(h.Events)-1].EventType)
		record(t, "compaction-run-shape-told", h, input, snippets(t, openAIContents(t, input), 10), subs[handoff].InputKey)
	})
	t.Run("session-admission", func(t *testing.T) {
		t.Parallel()
		// The admission and admission-handoff version markers: the
		// waiting session and the run that handed its slot on are
		// recorded.
		e, input, sessions, subs, handoff := admissionPair(t)
		snips := snippets(t, openAIContents(t, input), 10)
		record(t, "compaction-admission-handoff", fetchHistory(t, e.client, subs[handoff].RunID), input, snips, subs[handoff].InputKey)
		// The other session waited, and then waits idle on its timer.
		waited := 1 - handoff
		var h *historypb.History
		require.Eventually(t, func() bool {
			h = fetchHistory(t, e.client, contract.SessionWorkflowID(e.tenant, sessions[waited]))
			idle, signalled := false, false
			for _, ev := range h.Events {
				switch ev.EventType {
				case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
					idle = false
				case enumspb.EVENT_TYPE_TIMER_STARTED:
					idle = true
				case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
					if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == contract.AdmitSignal {
						signalled = true
					}
				}
			}
			last := h.Events[len(h.Events)-1].EventType
			return signalled && idle && (last == enumspb.EVENT_TYPE_TIMER_STARTED || last == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
		}, time.Minute, 100*time.Millisecond, "the other session was told by the admitted signal")
		record(t, "session-admission-waited", h, input, snips, subs[waited].InputKey)
	})
}
