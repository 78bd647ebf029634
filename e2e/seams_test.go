package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/strategy"
	"github.com/ctxcompact/orchestrator/internal/testkit/sessionlife"
)

// The seams of one session: every feature at once, nothing lost.

// TestSeamsTwoRacingDeltasOnOneBase: two incremental events sent together
// on one base: one is accepted, the other is a 409 naming it, and the
// session continues from the accepted run's output, which holds its
// delta. Before, both were accepted and one delta was lost.
func TestSeamsTwoRacingDeltasOnOneBase(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	first, deltas := sessionSlices(t, 2)
	one := a.postEvent("race", map[string]any{"event_id": "race-1", "preset": "adaptive", "model": "gpt-4o",
		"context_limit": 20000, "wait_seconds": 120}, first)
	base := map[string]any{"run_id": one["run_id"], "sha256": one["output_sha256"]}

	type answer struct {
		status int
		doc    map[string]any
	}
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			body, err := json.Marshal(map[string]any{"event_id": "race-d" + string(rune('a'+i)), "preset": "adaptive",
				"model": "gpt-4o", "context_limit": 20000, "base": base, "messages": deltas[i]})
			if err != nil {
				panic(err)
			}
			resp, data := a.call("POST", "/v1/sessions/race/events", a.key, body, nil)
			answers[i].status = resp.StatusCode
			_ = json.Unmarshal(data, &answers[i].doc)
		})
	}
	wg.Wait()
	var accepted, refused *answer
	for i := range answers {
		switch answers[i].status {
		case http.StatusAccepted, http.StatusOK:
			require.Nil(t, accepted, "two events on one base were both accepted: %v", answers)
			accepted = &answers[i]
		case http.StatusConflict:
			refused = &answers[i]
		default:
			t.Fatalf("unexpected answer %d: %v", answers[i].status, answers[i].doc)
		}
	}
	require.NotNil(t, accepted)
	require.NotNil(t, refused)
	e := refused.doc["error"].(map[string]any)
	require.Equal(t, "base.run_id", e["field"])
	require.Equal(t, accepted.doc["run_id"], e["run_id"], "the 409 names the run that holds the base")
	d := a.pollRun("/v1/runs/" + accepted.doc["run_id"].(string))
	require.Equal(t, "succeeded", d.Run.Status)
	require.Equal(t, 2, a.runCount("race"), "the refused event stored nothing")
}

// TestSeamsNonASCIISessionName: a session named in another script works
// end to end (its event compacts) and its erasure ends, after which the
// name answers 410.
func TestSeamsNonASCIISessionName(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	first, _ := sessionSlices(t, 0)
	for _, name := range []string{"été", "会话 1", "100%"} {
		path := url.PathEscape(name)
		one := a.postEvent(path, map[string]any{"event_id": "e1", "preset": "adaptive", "model": "gpt-4o",
			"context_limit": 20000, "wait_seconds": 120}, first)
		require.Equal(t, "succeeded", one["status"], name)
		run, err := a.store.GetRun(t.Context(), one["run_id"].(string))
		require.NoError(t, err)
		require.Equal(t, name, run.Session, "the name as sent")
		a.erase(path)
		resp, body := a.call("GET", "/v1/sessions/"+path+"/status", a.key, nil, nil)
		require.Equal(t, http.StatusGone, resp.StatusCode, "%s: %s", name, body)
	}
}

// TestSeamsPastedBackBlock: a user who pastes a committed summary block
// back into the conversation writes their own words: the session is not
// frozen at the paste (before, the paste became the log's end, and the
// event ran no pass and appended nothing), its next compactions still
// summarize and stay under the limit.
func TestSeamsPastedBackBlock(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	first, deltas := sessionSlices(t, 3)
	fields := func(id string) map[string]any {
		return map[string]any{"event_id": id, "preset": "adaptive", "model": "gpt-4o", "context_limit": 12000, "wait_seconds": 120}
	}
	prev := a.postEvent("paste", fields("p-1"), first)
	require.Equal(t, "succeeded", prev["status"])
	out, _ := a.output(mustOutcome(t, a, prev["run_id"].(string)))
	block := ""
	for _, m := range out.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.KindText && strategy.IsLogBlock(b.Text) {
				block = b.Text
			}
		}
	}
	require.NotEmpty(t, block, "the first compaction appended a log block")
	pasted, err := json.Marshal([]map[string]any{{"role": "user", "content": block}})
	require.NoError(t, err)
	for i, delta := range deltas {
		msgs := delta
		if i == 0 {
			var list []json.RawMessage
			require.NoError(t, json.Unmarshal(delta, &list))
			list = append(list, pasted[1:len(pasted)-1]) // the user's last message
			msgs, err = json.Marshal(list)
			require.NoError(t, err)
		}
		f := fields("p-" + string(rune('2'+i)))
		f["base"] = map[string]any{"run_id": prev["run_id"], "sha256": prev["output_sha256"]}
		f["messages"] = msgs
		body, err := json.Marshal(f)
		require.NoError(t, err)
		resp, data := a.call("POST", "/v1/sessions/paste/events", a.key, body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc))
		require.Equal(t, "succeeded", doc["status"], "event %d after the paste: %v", i+1, doc["over_limit_reason"])
		if i == 0 {
			// The paste is the conversation's last message: read as a
			// block, it froze everything before it (no pass ran,
			// nothing appended).
			require.Contains(t, passNames(doc), "history", "the event with the paste is still summarized")
			require.EqualValues(t, 1, doc["summary_log"].(map[string]any)["appended"], "and its summary appended to the log")
		}
		prev = doc
	}
	out, _ = a.output(mustOutcome(t, a, prev["run_id"].(string)))
	pastes := 0
	for _, m := range out.Messages {
		for _, b := range m.Blocks {
			if b.Text == block && m.Role == conversation.RoleUser {
				pastes++
			}
		}
	}
	require.LessOrEqual(t, pastes, 2, "the log's block and at most the user's paste, which may be summarized away")
}

// sessionSlices cuts a real SWE-agent run into its first half (a whole
// conversation) and n deltas of 4 turns each (the messages appended
// since, as an OpenAI message array).
func sessionSlices(t *testing.T, n int) ([]byte, []json.RawMessage) {
	t.Helper()
	src, err := conversation.ParseAny(readData(t, "swe-agent-deepseek/django__django-11742.json"))
	require.NoError(t, err)
	head, turns := sessionlife.Turns(src)
	half := len(turns) / 2
	first := src
	first.Messages = append(append([]conversation.Message(nil), head...), concat(turns[:half])...)
	data, err := conversation.Render(first)
	require.NoError(t, err)
	var deltas []json.RawMessage
	for i := range n {
		next := src
		next.Messages = concat(turns[half+4*i : half+4*i+4])
		doc, err := conversation.Render(next)
		require.NoError(t, err)
		var m struct {
			Messages json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(doc, &m))
		deltas = append(deltas, m.Messages)
	}
	return data, deltas
}

// postEvent posts a whole conversation to session (its path segment,
// escaped) and returns the decoded answer, which must be a 200.
func (a *apiEnv) postEvent(session string, fields map[string]any, conv []byte) map[string]any {
	a.t.Helper()
	resp, data := a.call("POST", "/v1/sessions/"+session+"/events", a.key, eventBody(fields, conv), nil)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "%s", data)
	var doc map[string]any
	require.NoError(a.t, json.Unmarshal(data, &doc))
	return doc
}

func passNames(doc map[string]any) []string {
	var out []string
	ps, _ := doc["passes"].([]any)
	for _, p := range ps {
		m, _ := p.(map[string]any)
		if m["applied"] == true {
			out = append(out, fmt.Sprint(m["name"]))
		}
	}
	return out
}

// TestInspectBaseAndMessages: a platform asks "should I compact?" with the
// session's latest output and the messages appended since, as it would
// send the event, and gets the rebuilt conversation's tokens and whether
// the preset's trigger is reached; nothing is stored. A wrong digest, or
// a base beside a conversation, is refused naming the field.
func TestInspectBaseAndMessages(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	first, deltas := sessionSlices(t, 2)
	one := a.postEvent("ask", map[string]any{"event_id": "ask-1", "preset": "adaptive", "model": "gpt-4o",
		"context_limit": 20000, "wait_seconds": 120}, first)
	base := map[string]any{"run_id": one["run_id"], "sha256": one["output_sha256"]}
	runsBefore, err := a.store.ListRuns(t.Context(), store.RunFilter{Tenant: a.tenant, Session: "ask"})
	require.NoError(t, err)

	inspect := func(fields map[string]any) (int, map[string]any) {
		body, err := json.Marshal(fields)
		require.NoError(t, err)
		resp, data := a.call("POST", "/v1/sessions/ask/inspect", a.key, body, nil)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc), string(data))
		return resp.StatusCode, doc
	}
	status, small := inspect(map[string]any{"model": "gpt-4o", "context_limit": 20000, "base": base, "messages": deltas[0]})
	require.Equal(t, http.StatusOK, status, small)
	var both, more []json.RawMessage
	require.NoError(t, json.Unmarshal(deltas[0], &both))
	require.NoError(t, json.Unmarshal(deltas[1], &more))
	both = append(both, more...)
	status, big := inspect(map[string]any{"model": "gpt-4o", "context_limit": 20000, "base": base, "messages": both})
	require.Equal(t, http.StatusOK, status, big)
	require.Greater(t, big["tokens"].(float64), small["tokens"].(float64), "more appended, more tokens")
	require.Equal(t, 0.5, small["trigger_usage"], "the adaptive preset starts summarizing at half the limit")
	usage := big["report"].(map[string]any)["usage"].(float64)
	require.Equal(t, usage >= 0.5, big["trigger_reached"], "usage %v", usage)

	status, bad := inspect(map[string]any{"base": map[string]any{"run_id": one["run_id"], "sha256": strings.Repeat("0", 64)}, "messages": deltas[0]})
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "base.sha256", bad["error"].(map[string]any)["field"])
	status, bad = inspect(map[string]any{"base": base, "messages": deltas[0], "conversation": map[string]any{"messages": []any{}}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "base", bad["error"].(map[string]any)["field"])

	runsAfter, err := a.store.ListRuns(t.Context(), store.RunFilter{Tenant: a.tenant, Session: "ask"})
	require.NoError(t, err)
	require.Len(t, runsAfter, len(runsBefore), "an inspection runs and stores nothing")
}
