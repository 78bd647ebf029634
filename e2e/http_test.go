package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/llmtest"
)

// The HTTP API over real HTTP on the real stack: the handler of `starter
// serve` in front of this test's gateway, store, S3 bucket and worker.

// httpMaxBytes is the body limit of these servers; small, so that the 413
// test stays light.
const httpMaxBytes = 4 << 20

// apiEnv is an env with the API served over HTTP and a key for two
// tenants: e.tenant and another one.
type apiEnv struct {
	*env
	url         string
	key         string
	otherKey    string
	otherTenant string
	client      *http.Client
}

func newAPIEnv(t *testing.T, opts ...envOption) *apiEnv {
	t.Helper()
	e := newEnv(t, opts...)
	h := httpapi.New(httpapi.Deps{
		Gateway: e.gw, Audit: &audit.Service{Store: e.store, Blob: e.blob}, Store: e.store, Blob: e.blob,
		MaxRequestBytes: httpMaxBytes, Logger: slog.New(slog.DiscardHandler), Metrics: e.deps.Metrics,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a := &apiEnv{env: e, url: srv.URL, client: srv.Client(), otherTenant: "other-" + e.tenant,
		key: "key-" + e.tenant + "-0123456789abcdef", otherKey: "key-other-" + e.tenant + "-0123456789abcdef"}
	ctx := context.Background()
	require.NoError(t, e.store.AddAPIKey(ctx, e.tenant, a.key))
	require.NoError(t, e.store.AddAPIKey(ctx, a.otherTenant, a.otherKey))
	return a
}

// call sends a request and returns the answer and its raw body; out, when
// not nil, receives the decoded JSON.
func (a *apiEnv) call(method, path, key string, body []byte, out any) (*http.Response, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	require.NoError(a.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	if out != nil {
		require.NoError(a.t, json.Unmarshal(data, out), "%s %s answered %d: %s", method, path, resp.StatusCode, data)
	}
	return resp, data
}

// apiResult is the answer of a finished run.
type apiResult struct {
	RunID        string  `json:"run_id"`
	Existing     bool    `json:"existing"`
	Status       string  `json:"status"`
	Error        string  `json:"error"`
	Format       string  `json:"format"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Ratio        float64 `json:"ratio"`
	LevelBefore  string  `json:"level_before"`
	LevelAfter   string  `json:"level_after"`
	Drift        string  `json:"drift"`
	// offload-compact's CompactResult figures and the honest outcome.
	Success         bool            `json:"success"`
	HistoryFailed   bool            `json:"history_failed"`
	OverLimit       bool            `json:"over_limit"`
	OverLimitReason string          `json:"over_limit_reason"`
	Unit            string          `json:"unit"`
	ContextLimit    int             `json:"context_limit"`
	FreedTokens     int             `json:"freed_tokens"`
	PreservedCount  int             `json:"preserved_count"`
	DeletedOffloads int             `json:"deleted_offloads"`
	ArchiveKey      string          `json:"archive_key"`
	OutputKey       string          `json:"output_key"`
	Passes          []any           `json:"passes"`
	Conversation    json.RawMessage `json:"conversation"`
}

// apiAccepted is the 202 answer.
type apiAccepted struct {
	RunID     string `json:"run_id"`
	Existing  bool   `json:"existing"`
	Status    string `json:"status"`
	StatusURL string `json:"status_url"`
}

// apiError is the common error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
		Index   *int   `json:"index"`
		Path    string `json:"path"`
	} `json:"error"`
}

// apiRunDetail is the part of GET /v1/runs/{run} these tests read.
type apiRunDetail struct {
	Run struct {
		ID       string `json:"id"`
		Tenant   string `json:"tenant"`
		Session  string `json:"session"`
		Trigger  string `json:"trigger"`
		Preset   string `json:"preset"`
		Status   string `json:"status"`
		Error    string `json:"error"`
		ReplayOf string `json:"replay_of"`
	} `json:"run"`
	Steps []struct {
		Name string `json:"name"`
	} `json:"steps"`
}

// pollRun reads GET /v1/runs/{id} until the run is final.
func (a *apiEnv) pollRun(statusURL string) apiRunDetail {
	a.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var d apiRunDetail
		resp, _ := a.call("GET", statusURL, a.key, nil, &d)
		require.Equal(a.t, http.StatusOK, resp.StatusCode)
		switch d.Run.Status {
		case "succeeded", "over_limit", "failed":
			return d
		}
		require.True(a.t, time.Now().Before(deadline), "run %s still %s", d.Run.ID, d.Run.Status)
		time.Sleep(200 * time.Millisecond)
	}
}

// eventBody builds an event body around a conversation kept byte for byte
// (json.Marshal would compact it).
func eventBody(fields map[string]any, conv []byte) []byte {
	head, _ := json.Marshal(fields)
	return append(append(append(head[:len(head)-1:len(head)-1], []byte(`,"conversation":`)...), conv...), '}')
}

func TestHTTPTriggerWaitRestoreAuditAndIsolation(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	// Pretty-printed Anthropic input: the archive must give back these
	// very bytes, whitespace included.
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, anthropicWithCheckpoint(6), "", "  "))
	input := pretty.Bytes()
	fields := map[string]any{"event_id": "ev-1", "kind": "checkpoint", "preset": "watermark", "model": "claude-sonnet-4", "wait_seconds": 120}
	body := eventBody(fields, input)

	// Trigger → wait → compacted, in the caller's format.
	var res apiResult
	resp, _ := a.call("POST", "/v1/sessions/chat-1/events", a.key, body, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "succeeded", res.Status)
	require.False(t, res.Existing)
	require.Equal(t, "anthropic", res.Format)
	f, err := conversation.Detect(res.Conversation)
	require.NoError(t, err)
	require.Equal(t, conversation.FormatAnthropic, f, "the answer comes back in the caller's format")
	out := parse(t, res.Conversation)
	require.NoError(t, conversation.CheckPairing(out))
	for _, m := range out.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindToolUse && b.ToolID != "toolu_abc123xyz" {
				t.Fatalf("tool block %s before the watermark survived", b.ToolID)
			}
		}
	}
	require.Less(t, res.TokensAfter, res.TokensBefore)
	require.NotEmpty(t, res.ArchiveKey)
	require.NotEmpty(t, res.LevelAfter)
	prefix, err := blob.TenantPrefix(a.tenant)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(res.ArchiveKey, prefix) && strings.HasPrefix(res.OutputKey, prefix), "keys are under the tenant's prefix")

	// The same event again: the same run, the same answer.
	var again apiResult
	resp, _ = a.call("POST", "/v1/sessions/chat-1/events", a.key, body, &again)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, again.Existing)
	require.Equal(t, res.RunID, again.RunID)
	require.JSONEq(t, string(res.Conversation), string(again.Conversation))
	// Without waiting, the duplicate answers 202 with the same run.
	fields["wait_seconds"] = 0
	var ack apiAccepted
	resp, _ = a.call("POST", "/v1/sessions/chat-1/events", a.key, eventBody(fields, input), &ack)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, res.RunID, ack.RunID)
	require.True(t, ack.Existing)
	require.Equal(t, "succeeded", ack.Status)

	// The same event id with another body is a 409.
	fields["model"] = "claude-opus-4"
	var conflict apiError
	resp, _ = a.call("POST", "/v1/sessions/chat-1/events", a.key, eventBody(fields, input), &conflict)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "conflict", conflict.Error.Code)
	require.Equal(t, "event_id", conflict.Error.Field)

	// Audit: the run, its original byte for byte, the diff, the status,
	// the listing and the export.
	runURL := "/v1/runs/" + res.RunID
	var detail apiRunDetail
	resp, _ = a.call("GET", runURL, a.key, nil, &detail)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "succeeded", detail.Run.Status)
	require.Equal(t, "checkpoint", detail.Run.Trigger)
	require.Equal(t, "chat-1", detail.Run.Session)
	require.NotEmpty(t, detail.Steps)

	resp, original := a.call("GET", runURL+"/original", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, input, original, "restore gives back the submitted bytes")
	sum := sha256.Sum256(input)
	require.Equal(t, hex.EncodeToString(sum[:]), resp.Header.Get("X-Content-SHA256"))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	var diff struct {
		RunID   string `json:"run_id"`
		Changes []struct {
			Action string `json:"action"`
		} `json:"changes"`
	}
	resp, _ = a.call("GET", runURL+"/diff", a.key, nil, &diff)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, res.RunID, diff.RunID)
	changed := 0
	for _, c := range diff.Changes {
		if c.Action != "kept" {
			changed++
		}
	}
	require.Positive(t, changed, "the watermark pruned messages: the diff shows them")

	var status struct {
		Session   string `json:"session"`
		LastRunID string `json:"last_run_id"`
		Level     string `json:"level"`
		Watermark string `json:"watermark"`
	}
	resp, _ = a.call("GET", "/v1/sessions/chat-1/status", a.key, nil, &status)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, res.RunID, status.LastRunID)
	require.Equal(t, "toolu_abc123xyz", status.Watermark)
	require.NotEmpty(t, status.Level)

	var list struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	resp, _ = a.call("GET", "/v1/runs?session=chat-1&status=succeeded", a.key, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, list.Runs, 1)
	require.Equal(t, res.RunID, list.Runs[0].ID)

	resp, export := a.call("GET", "/v1/export?format=jsonl", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	require.Contains(t, string(export), res.RunID)

	var hits struct {
		Hits []struct {
			RunID string `json:"run_id"`
		} `json:"hits"`
	}
	resp, _ = a.call("GET", "/v1/sessions/chat-1/search?q=src/mod3.py", a.key, nil, &hits)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, hits.Hits, "the pruned tool call is found in the archive")

	// Tenant isolation: the other tenant sees none of it, as 404s.
	for _, path := range []string{runURL, runURL + "/original", runURL + "/diff", "/v1/sessions/chat-1/status", "/v1/sessions/chat-1/search?q=module"} {
		var e apiError
		resp, raw := a.call("GET", path, a.otherKey, nil, &e)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "not_found", e.Error.Code, path)
		require.NotContains(t, string(raw), "toolu_abc123xyz", path)
	}
	var replayed apiError
	resp, _ = a.call("POST", runURL+"/replay", a.otherKey, []byte(`{"request_id":"steal"}`), &replayed)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var otherList struct {
		Runs []any `json:"runs"`
	}
	resp, _ = a.call("GET", "/v1/runs", a.otherKey, nil, &otherList)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, otherList.Runs)
	resp, otherExport := a.call("GET", "/v1/export?format=csv", a.otherKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(otherExport), res.RunID)

	// The same session name and event id under the other tenant is that
	// tenant's own run; the first tenant cannot see it either.
	fields["model"] = "claude-sonnet-4"
	fields["wait_seconds"] = 120
	var theirs apiResult
	resp, _ = a.call("POST", "/v1/sessions/chat-1/events", a.otherKey, eventBody(fields, input), &theirs)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, theirs.Existing)
	require.NotEqual(t, res.RunID, theirs.RunID)
	otherPrefix, err := blob.TenantPrefix(a.otherTenant)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(theirs.ArchiveKey, otherPrefix))
	resp, _ = a.call("GET", "/v1/runs/"+theirs.RunID, a.key, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestHTTPAcceptedThenPollThenReplay(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	input := readData(t, "swe-agent-deepseek/django__django-12308.json")
	body := eventBody(map[string]any{"event_id": "ev-poll", "preset": "auto-summarize", "model": "gpt-4o", "context_limit": 60000}, input)

	var ack apiAccepted
	resp, _ := a.call("POST", "/v1/sessions/poll/events", a.key, body, &ack)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.False(t, ack.Existing)
	require.Equal(t, "/v1/runs/"+ack.RunID, ack.StatusURL)
	require.Equal(t, ack.StatusURL, resp.Header.Get("Location"))

	d := a.pollRun(ack.StatusURL)
	require.Equal(t, "succeeded", d.Run.Status, d.Run.Error)
	require.Equal(t, "threshold", d.Run.Trigger, "kind defaults to threshold")
	require.Equal(t, "auto-summarize", d.Run.Preset)
	require.NotEmpty(t, a.llm.Calls(), "the summary went through the LLM")

	// Replay with another preset: a new run of the same session, linked
	// to the first; the same request id again is the same replay.
	var rep struct {
		RunID     string `json:"run_id"`
		Existing  bool   `json:"existing"`
		StatusURL string `json:"status_url"`
	}
	resp, _ = a.call("POST", ack.StatusURL+"/replay", a.key, []byte(`{"request_id":"try-offload","preset":"offload-compact"}`), &rep)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.NotEqual(t, ack.RunID, rep.RunID)
	require.False(t, rep.Existing)
	rd := a.pollRun(rep.StatusURL)
	require.Equal(t, "succeeded", rd.Run.Status, rd.Run.Error)
	require.Equal(t, ack.RunID, rd.Run.ReplayOf)
	require.Equal(t, "offload-compact", rd.Run.Preset)
	require.Equal(t, "poll", rd.Run.Session)

	var again struct {
		RunID    string `json:"run_id"`
		Existing bool   `json:"existing"`
	}
	resp, _ = a.call("POST", ack.StatusURL+"/replay", a.key, []byte(`{"request_id":"try-offload","preset":"offload-compact"}`), &again)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, rep.RunID, again.RunID)
	require.True(t, again.Existing)

	// The replay's original is the first run's original.
	resp, original := a.call("GET", rep.StatusURL+"/original", a.key, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, input, original)
}

func TestHTTPManualCompact(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	body := eventBody(map[string]any{"preset": "offload-compact", "model": "gpt-4o", "context_limit": 60000, "wait_seconds": 120}, input)

	var res apiResult
	resp, _ := a.call("POST", "/v1/sessions/manual/compact", a.key, body, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "succeeded", res.Status, res.Error)
	require.Equal(t, "openai", res.Format)
	require.Less(t, res.TokensAfter, res.TokensBefore)
	out := parse(t, res.Conversation)
	require.Equal(t, conversation.FormatOpenAI, out.Format)
	require.True(t, strings.HasPrefix(textOf(out.Messages[2]), "[Compressed History]"), "offload-compact's summary message, after the system prompt and the task")
	require.True(t, res.Success)
	require.False(t, res.OverLimit)
	require.Equal(t, "tokens", res.Unit)
	require.Equal(t, res.TokensBefore-res.TokensAfter, res.FreedTokens)
	require.Equal(t, len(out.Messages)-3, res.PreservedCount, "everything after the system prompt, the task and the summary was preserved")
	require.GreaterOrEqual(t, res.PreservedCount, 5)
	// The answer is read from the run's row and stats: the input's level
	// and the workflow's drift verdict are there too.
	require.Equal(t, "CRITICAL", res.LevelBefore)
	require.Contains(t, []string{"passed", "repaired", "patched"}, res.Drift)

	var d apiRunDetail
	resp, _ = a.call("GET", "/v1/runs/"+res.RunID, a.key, nil, &d)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "manual", d.Run.Trigger)

	// Without an event id every manual compact is a new run.
	var second apiResult
	resp, _ = a.call("POST", "/v1/sessions/manual/compact", a.key, body, &second)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEqual(t, res.RunID, second.RunID)
}

// TestHTTPManualCompactAtLowUsage: a manual compaction under the default
// preset compacts the history even far under the target usage, where an
// automatic event would stop after the deterministic passes (docs/api.md:
// manual forces history compaction).
func TestHTTPManualCompactAtLowUsage(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	body := eventBody(map[string]any{"model": "gpt-4o", "context_limit": 1000000, "wait_seconds": 120}, input)
	var res apiResult
	resp, _ := a.call("POST", "/v1/sessions/manual-low/compact", a.key, body, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "succeeded", res.Status, res.Error)
	require.Equal(t, "GREEN", res.LevelBefore, "far under the target")
	history := false
	for _, p := range res.Passes {
		pass, _ := p.(map[string]any)
		if pass["name"] == "history" && pass["applied"] == true {
			history = true
		}
	}
	require.True(t, history, "the history pass ran and applied: %v", res.Passes)
	require.Less(t, res.TokensAfter, res.TokensBefore, "a manual compaction compacts")
}

func TestHTTPErrorPaths(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	chat := []byte(`{"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]}`)
	orphan := []byte(`{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`)
	huge := eventBody(map[string]any{"event_id": "big"}, []byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("x", httpMaxBytes)+`"}]}`))
	call := func(id, name string) []byte {
		return []byte(`{"messages":[{"role":"user","content":"list it"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"` + id + `","content":"done"}]}`)
	}
	nulCall, escName := call(`call\u0000x`, "bash"), call("call_1", `ba\u001bsh`)
	for _, tc := range []struct {
		name, method, path, key string
		body                    []byte
		status                  int
		code, field             string
		index                   int
		msgPath                 string
	}{
		{"no key", "POST", "/v1/sessions/s/events", "", eventBody(map[string]any{"event_id": "e"}, chat), 401, "unauthorized", "", -1, ""},
		{"wrong key", "POST", "/v1/sessions/s/events", "key-nobody-0123456789abcdef", eventBody(map[string]any{"event_id": "e"}, chat), 401, "unauthorized", "", -1, ""},
		{"too large", "POST", "/v1/sessions/s/events", a.key, huge, 413, "too_large", "", -1, ""},
		{"tool result without call", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e"}, orphan), 400, "bad_request", "conversation", 1, "content[0].tool_use_id"},
		{"bad preset", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e", "preset": "shrink-it"}, chat), 400, "bad_request", "preset", -1, ""},
		{"bad overrides", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e", "preset": "offload-compact", "overrides": map[string]any{"history": map[string]any{"keep_lats": 3}}}, chat), 400, "bad_request", "", -1, ""},
		{"malformed body", "POST", "/v1/sessions/s/events", a.key, []byte(`{"event_id": "e", "conversation": `), 400, "bad_request", "", -1, ""},
		// Issue 20: validated before anything is stored.
		{"NUL in a tool_call_id", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e"}, nulCall), 400, "bad_request", "conversation.messages[1].tool_call_id", -1, ""},
		{"control character in a tool name", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e"}, escName), 400, "bad_request", "conversation.messages[1].tool_name", -1, ""},
		{"context_limit past int32", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e", "context_limit": 2147483648}, chat), 400, "bad_request", "context_limit", -1, ""},
		{"NUL in model", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e", "model": "gpt-4o\u0000"}, chat), 400, "bad_request", "model", -1, ""},
		{"model too long", "POST", "/v1/sessions/s/events", a.key, eventBody(map[string]any{"event_id": "e", "model": strings.Repeat("m", 300)}, chat), 400, "bad_request", "model", -1, ""},
		{"unknown run", "GET", "/v1/runs/run-000000000000", a.key, nil, 404, "not_found", "", -1, ""},
		{"unknown session", "GET", "/v1/sessions/never/status", a.key, nil, 404, "not_found", "", -1, ""},
		{"unknown route", "GET", "/v1/nothing", a.key, nil, 404, "not_found", "", -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e apiError
			resp, raw := a.call(tc.method, tc.path, tc.key, tc.body, &e)
			require.Equal(t, tc.status, resp.StatusCode, "%s", raw)
			require.Equal(t, tc.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
			if tc.field != "" {
				require.Equal(t, tc.field, e.Error.Field, e.Error.Message)
			}
			if tc.index >= 0 {
				require.NotNil(t, e.Error.Index, e.Error.Message)
				require.Equal(t, tc.index, *e.Error.Index)
				require.Equal(t, tc.msgPath, e.Error.Path)
			}
		})
	}
	// None of these started a run.
	var list struct {
		Runs []any `json:"runs"`
	}
	resp, _ := a.call("GET", "/v1/runs", a.key, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, list.Runs)
	// Nor stored anything.
	keys, err := a.blob.List(context.Background(), "tenants/"+a.tenant+"/")
	require.NoError(t, err)
	require.Empty(t, keys, "a refused event leaves nothing in S3")
}

// buildLog is a long tool result with identifiers in every line, well over
// react-two-layer's 50,000-character threshold.
func buildLog(lines int) string {
	var sb strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&sb, "2025-01-02T12:%02d:%02dZ worker-%d processed job %d in %dms (src/jobs/handler_%d.py)\n", i/60%60, i%60, i%7, i, 10+i%90, i%13)
	}
	return sb.String()
}

func TestHTTPResultsCompress(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t)
	text := buildLog(1500)
	require.Greater(t, len(text), 100000)

	// Offload: stored under the tenant, answered with a reference.
	body, _ := json.Marshal(map[string]any{"text": text, "tool_name": "bash", "model": "gpt-4o", "mode": "offload", "session": "agent-7"})
	var off struct {
		Status    string `json:"status"`
		Reference string `json:"reference"`
		ID        string `json:"id"`
		SHA256    string `json:"sha256"`
		Tokens    int    `json:"tokens"`
	}
	resp, _ := a.call("POST", "/v1/results:compress", a.key, body, &off)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id, ok := strategy.ParseReference(off.Reference)
	require.True(t, ok)
	require.Equal(t, off.ID, id, "the reference names the offload's id")
	require.Equal(t, off.SHA256, off.ID)
	offKey := blob.ContentKey(a.tenant, blob.KindOffload, off.ID)
	require.Positive(t, off.Tokens)
	stored, err := a.blob.GetVerified(context.Background(), offKey, off.SHA256)
	require.NoError(t, err)
	require.Equal(t, text, string(stored))

	// Summarize: map-reduced by the react-two-layer pipeline as a run.
	body, _ = json.Marshal(map[string]any{"text": text, "tool_name": "bash", "mode": "summarize", "session": "agent-7", "wait_seconds": 180})
	var sum struct {
		Status      string `json:"status"`
		RunID       string `json:"run_id"`
		Text        string `json:"text"`
		CharsBefore int    `json:"chars_before"`
		CharsAfter  int    `json:"chars_after"`
	}
	resp, raw := a.call("POST", "/v1/results:compress", a.key, body, &sum)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Equal(t, "succeeded", sum.Status)
	require.Equal(t, len([]rune(text)), sum.CharsBefore)
	require.Equal(t, len([]rune(sum.Text)), sum.CharsAfter)
	require.NotEmpty(t, sum.Text)
	require.Less(t, sum.CharsAfter, sum.CharsBefore/2)
	require.Greater(t, len(a.llm.Calls()), 1, "the chunks went through the LLM")

	var d apiRunDetail
	resp, _ = a.call("GET", "/v1/runs/"+sum.RunID, a.key, nil, &d)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "react-two-layer", d.Run.Preset)
	require.Equal(t, "agent-7", d.Run.Session)

	// The same request again joins the same run.
	var again struct {
		RunID string `json:"run_id"`
		Text  string `json:"text"`
	}
	resp, _ = a.call("POST", "/v1/results:compress", a.key, body, &again)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, sum.RunID, again.RunID)
	require.Equal(t, sum.Text, again.Text)

	// Issue 20: the same identifier rules as every other route.
	for _, bad := range []struct{ field, session, tool string }{
		{"session", "agent\x1b[31m", "bash"}, {"session", "a\nb", "bash"}, {"session", "..", "bash"},
		{"session", "x\u202ey", "bash"}, {"tool_name", "agent-7", strings.Repeat("t", 1<<20)},
	} {
		body, _ := json.Marshal(map[string]any{"text": text, "tool_name": bad.tool, "mode": "offload", "session": bad.session})
		var e apiError
		resp, raw := a.call("POST", "/v1/results:compress", a.key, body, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q: %s", bad.session, raw)
		require.Equal(t, bad.field, e.Error.Field)
	}

	// Both are searchable in the session: the offload and the archive.
	var hits struct {
		Hits []struct {
			Kind string `json:"kind"`
		} `json:"hits"`
	}
	resp, _ = a.call("GET", "/v1/sessions/agent-7/search?q=handler_12.py&limit=10", a.key, nil, &hits)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	kinds := map[string]bool{}
	for _, h := range hits.Hits {
		kinds[h.Kind] = true
	}
	require.True(t, kinds["offload"] && kinds["archive"], "hits: %+v", hits.Hits)
}

func TestHTTPWaitEndsWithTheRunIDAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	// No worker yet: the run cannot finish while the requests wait.
	e := newEnv(t, withoutLLM(), func(c *envConfig) { c.noWorker = true })
	draining, drain := context.WithCancel(context.Background())
	defer drain()
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Gateway: e.gw, Audit: &audit.Service{Store: e.store, Blob: e.blob}, Store: e.store, Blob: e.blob,
		MaxRequestBytes: httpMaxBytes, Draining: draining, Logger: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(srv.Close)
	a := &apiEnv{env: e, url: srv.URL, client: srv.Client(), key: "key-" + e.tenant + "-0123456789abcdef"}
	require.NoError(t, e.store.AddAPIKey(context.Background(), e.tenant, a.key))
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	fields := map[string]any{"event_id": "slow", "preset": "offload-compact", "model": "gpt-4o", "context_limit": 60000, "wait_seconds": 1}

	// The wait ends first: 202 with the run id.
	var ack apiAccepted
	resp, _ := a.call("POST", "/v1/sessions/slow/events", a.key, eventBody(fields, input), &ack)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, "pending", ack.Status)

	// A server that starts shutting down ends long waits the same way.
	fields["wait_seconds"] = 600
	done := make(chan apiAccepted, 1)
	body := eventBody(fields, input)
	go func() {
		// No require here: only the test goroutine may stop the test.
		var got apiAccepted
		req, _ := http.NewRequest("POST", a.url+"/v1/sessions/slow/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+a.key)
		resp, err := a.client.Do(req)
		if err != nil {
			got.Status = err.Error()
		} else {
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusAccepted {
				got.Status = fmt.Sprintf("HTTP %d (%v)", resp.StatusCode, err)
			}
		}
		done <- got
	}()
	drain()
	var drained apiAccepted
	select {
	case drained = <-done:
	case <-time.After(time.Minute):
		t.Fatal("a waiting request outlived the drain")
	}
	require.Equal(t, ack.RunID, drained.RunID)
	require.True(t, drained.Existing)
	require.Equal(t, "pending", drained.Status)

	// The run is durable: once a worker comes, it finishes.
	e.startWorker()
	d := a.pollRun(ack.StatusURL)
	require.Equal(t, "succeeded", d.Run.Status, d.Run.Error)
}

// TestHTTPOffloadCompactFailureAndOverLimit: a summarizer that refuses
// makes the offload-compact design's success false (history unchanged); a
// user message larger than the limit ends over_limit with the reason, in
// the answer and in the run.
func TestHTTPOffloadCompactFailureAndOverLimit(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withLLM(llmtest.WithScript(llmtest.Fault401{})))
	input := readData(t, "swe-agent-deepseek/django__django-11564.json")
	body := eventBody(map[string]any{"preset": "offload-compact", "model": "gpt-4o", "context_limit": 200000, "wait_seconds": 120}, input)
	var res apiResult
	resp, _ := a.call("POST", "/v1/sessions/refused/compact", a.key, body, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, res.HistoryFailed)
	require.False(t, res.Success, "offload-compact: success false when the summary failed")
	require.Equal(t, "succeeded", res.Status, "the run itself committed under its limit")
	require.Len(t, parse(t, res.Conversation).Messages, len(parse(t, input).Messages), "history unchanged")

	var doc map[string]any
	require.NoError(t, json.Unmarshal(readData(t, "swe-agent-deepseek/django__django-11742.json"), &doc))
	doc["messages"] = []any{
		map[string]any{"role": "system", "content": "You are a helpful assistant."},
		map[string]any{"role": "user", "content": buildLog(40000)},
	}
	big, err := json.Marshal(doc)
	require.NoError(t, err)
	body = eventBody(map[string]any{"event_id": "too-big-1", "kind": "threshold", "preset": "three-tier", "model": "gpt-4o", "context_limit": 20000, "wait_seconds": 120}, big)
	var over apiResult
	resp, _ = a.call("POST", "/v1/sessions/too-big/events", a.key, body, &over)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "over_limit", over.Status)
	require.True(t, over.OverLimit)
	require.False(t, over.Success)
	require.Contains(t, over.OverLimitReason, "message 1 (user text)")
	require.Greater(t, over.TokensAfter, over.ContextLimit)
	var d apiRunDetail
	resp, _ = a.call("GET", "/v1/runs/"+over.RunID, a.key, nil, &d)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "over_limit", d.Run.Status)
	require.Equal(t, over.OverLimitReason, d.Run.Error)

	// A bulk replay takes over_limit runs when asked, and only then.
	from, to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	var replays struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
	}
	resp, raw := a.call("POST", "/v1/replays", a.key, []byte(`{"from":"`+from+`","to":"`+to+`","request_id":"only-failed"}`), &replays)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(raw))
	require.Empty(t, replays.Runs, "no run failed")
	resp, raw = a.call("POST", "/v1/replays", a.key, []byte(`{"from":"`+from+`","to":"`+to+`","request_id":"over","statuses":["over_limit"],"context_limit":200000}`), &replays)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(raw))
	require.Len(t, replays.Runs, 1, "the over_limit run, replayed")
	var bad apiError
	resp, _ = a.call("POST", "/v1/replays", a.key, []byte(`{"from":"`+from+`","to":"`+to+`","request_id":"x","statuses":["succeeded"]}`), &bad)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "statuses[0]", bad.Error.Field)
}
