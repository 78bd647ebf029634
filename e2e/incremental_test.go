package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/contract"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/sessionlife"
)

// TestIncrementalEvents: an event may name the session's latest output
// (run id and SHA-256) and carry only the messages appended since; the
// service rebuilds the conversation from what it stored, compacts it and
// answers as for a whole one. A base another event already continues is
// a 409 naming the run that holds it. A base that is not the session's latest, a
// digest that does not match, and messages that break tool pairing are
// 400s naming the field, with nothing stored; a retry of an accepted
// incremental event answers its run.
func TestIncrementalEvents(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	full := readData(t, "swe-agent-deepseek/django__django-11742.json")
	src, err := conversation.ParseAny(full)
	require.NoError(t, err)
	head, turns := sessionlife.Turns(src)
	first := src
	first.Messages = append(append([]conversation.Message(nil), head...), concat(turns[:len(turns)/2])...)
	firstData, err := conversation.Render(first)
	require.NoError(t, err)

	post := func(body []byte) (*http.Response, map[string]any) {
		resp, data := a.call("POST", "/v1/sessions/inc/events", a.key, body, nil)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc), "%s", data)
		return resp, doc
	}
	fields := map[string]any{"event_id": "inc-1", "preset": "adaptive", "model": "gpt-4o", "context_limit": 20000, "wait_seconds": 120}
	resp, one := post(eventBody(fields, firstData))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", one)
	require.Equal(t, "succeeded", one["status"])

	// The next turns alone, as the agent's messages in its format.
	next := src
	next.Messages = concat(turns[len(turns)/2 : len(turns)/2+6])
	nextDoc, err := conversation.Render(next)
	require.NoError(t, err)
	var nextMsgs struct {
		Messages json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(nextDoc, &nextMsgs))
	incremental := func(id string, base map[string]any, messages json.RawMessage) []byte {
		body, err := json.Marshal(map[string]any{"event_id": id, "preset": "adaptive", "model": "gpt-4o", "context_limit": 20000,
			"wait_seconds": 120, "base": base, "messages": messages})
		require.NoError(t, err)
		return body
	}
	base := map[string]any{"run_id": one["run_id"], "sha256": one["output_sha256"]}
	runsBefore := a.runCount("inc")

	for _, tc := range []struct {
		name, field string
		body        []byte
	}{
		{"a digest that is not the output's", "base.sha256", incremental("bad-1", map[string]any{"run_id": one["run_id"], "sha256": sha256Hex([]byte("x"))}, nextMsgs.Messages)},
		{"a run that is not the session's", "base.run_id", incremental("bad-2", map[string]any{"run_id": "run-000000000000000000000000", "sha256": one["output_sha256"]}, nextMsgs.Messages)},
		{"a result without its call", "messages", incremental("bad-3", base, json.RawMessage(`[{"role":"tool","tool_call_id":"call_nowhere","content":"ok"}]`))},
		{"no messages", "messages", incremental("bad-4", base, json.RawMessage(`[]`))},
		{"a base and a conversation", "base", func() []byte {
			var m map[string]any
			require.NoError(t, json.Unmarshal(incremental("bad-5", base, nextMsgs.Messages), &m))
			m["conversation"] = json.RawMessage(firstData)
			b, _ := json.Marshal(m)
			return b
		}()},
	} {
		resp, doc := post(tc.body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %v", tc.name, doc)
		require.Contains(t, doc["error"].(map[string]any)["field"], tc.field, tc.name)
	}
	require.Equal(t, runsBefore, a.runCount("inc"), "a refused event stores nothing")

	body := incremental("inc-2", base, nextMsgs.Messages)
	require.Less(t, len(body), len(firstData)/3, "the upload is the new turns, not the conversation")
	resp, two := post(body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", two)
	require.Equal(t, "succeeded", two["status"])
	// What was compacted is the first output with the new turns.
	run, err := a.store.GetRun(t.Context(), two["run_id"].(string))
	require.NoError(t, err)
	input, err := a.blob.Get(t.Context(), run.InputKey)
	require.NoError(t, err)
	got, err := conversation.ParseAny(input)
	require.NoError(t, err)
	out, _ := a.output(mustOutcome(t, a, one["run_id"].(string)))
	require.Equal(t, len(out.Messages)+len(next.Messages), len(got.Messages))

	// The first run's output is already continued by the second: a
	// third event on it is a 409 naming the run that holds it.
	resp, doc := post(incremental("inc-3", base, nextMsgs.Messages))
	require.Equal(t, http.StatusConflict, resp.StatusCode, "%v", doc)
	require.Equal(t, "base.run_id", doc["error"].(map[string]any)["field"])
	require.Equal(t, two["run_id"], doc["error"].(map[string]any)["run_id"])
	// A retry of the accepted event answers its run.
	resp, again := post(body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", again)
	require.Equal(t, two["run_id"], again["run_id"])
	require.Equal(t, true, again["existing"])
}

func concat(turns [][]conversation.Message) []conversation.Message {
	var out []conversation.Message
	for _, t := range turns {
		out = append(out, t...)
	}
	return out
}

// runCount counts the session's runs.
func (a *apiEnv) runCount(session string) int {
	a.t.Helper()
	runs, err := a.store.ListRuns(a.t.Context(), store.RunFilter{Tenant: a.tenant, Session: session})
	require.NoError(a.t, err)
	return len(runs)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// mustOutcome is a finished run's outcome as its row records it.
func mustOutcome(t *testing.T, a *apiEnv, runID string) contract.Outcome {
	t.Helper()
	run, err := a.store.GetRun(t.Context(), runID)
	require.NoError(t, err)
	o, err := run.Outcome()
	require.NoError(t, err)
	return o
}
