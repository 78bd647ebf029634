package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/store"
)

// TestIdentifiersAreValidatedAtTheEdge: sessions and event ids with NUL,
// newlines, ESC, invalid UTF-8, "..", surrounding spaces or too long are
// 400s naming the field, and nothing is stored for them: no run, no event,
// no session row, no S3 object.
func TestIdentifiersAreValidatedAtTheEdge(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	ctx := context.Background()
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	for _, tc := range []struct {
		name, session, eventID, field string
	}{
		{"session of invalid UTF-8", "%ff%fe", "ev-1", "session"},
		{"session with a newline", "a%0Ab", "ev-2", "session"},
		{"session with ESC", "a%1B%5B31mred", "ev-3", "session"},
		{"session with a leading space", "%20lead", "ev-4", "session"},
		{"session ..", "%2E%2E", "ev-5", "session"},
		{"event id with NUL", "ok", "a\x00b", "event_id"},
		{"event id with a newline", "ok", "a\nb", "event_id"},
		{"event id too long", "ok", strings.Repeat("e", 300), "event_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := eventBody(map[string]any{"event_id": tc.eventID, "preset": "adaptive", "model": "gpt-4o"}, input)
			var e apiError
			resp, raw := a.call("POST", "/v1/sessions/"+tc.session+"/events", a.key, body, &e)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
			require.Equal(t, tc.field, e.Error.Field)
		})
	}
	for _, key := range []string{
		"tenants/" + a.tenant + "/../" + a.otherTenant + "/archive/ab/" + strings.Repeat("ab", 32),
		"tenants/" + a.otherTenant + "/archive/ab/" + strings.Repeat("ab", 32),
		"tenants/" + a.tenant + "/archive/ab/../../x",
	} {
		body, err := json.Marshal(map[string]any{"event_id": "key-" + key[len(key)-4:], "preset": "adaptive", "conversation_key": key})
		require.NoError(t, err)
		var e apiError
		resp, raw := a.call("POST", "/v1/sessions/keys/events", a.key, body, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", key, raw)
		require.Equal(t, "conversation_key", e.Error.Field)
	}
	resp, _ := a.call("GET", "/v1/sessions/%ff/status", a.key, nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a bad session in a read path is a 400, not a 500")
	resp, _ = a.call("GET", "/v1/runs/%00x", a.key, nil, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	runs, err := a.store.ListRuns(ctx, store.RunFilter{Tenant: a.tenant})
	require.NoError(t, err)
	require.Empty(t, runs)
	objs, err := a.blob.List(ctx, "tenants/"+a.tenant+"/")
	require.NoError(t, err)
	require.Empty(t, objs, "no S3 object written before validation")
	var sessions int
	require.NoError(t, a.store.Pool().QueryRow(ctx, `select count(*) from sessions where tenant_id = $1`, a.tenant).Scan(&sessions))
	require.Zero(t, sessions)
}

// TestIdempotencyOnMeaning: the same event re-serialized (indentation,
// key order) is the same run; a changed conversation is a 409 that leaves
// no session row behind.
func TestIdempotencyOnMeaning(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	ctx := context.Background()
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	first := eventBody(map[string]any{"event_id": "same", "preset": "adaptive", "model": "gpt-4o", "overrides": map[string]any{"history": map[string]any{"keep_last": 4, "target_tokens": 3000}}}, input)
	var acc apiAccepted
	resp, raw := a.call("POST", "/v1/sessions/s1/events", a.key, first, &acc)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", raw)

	// Re-encoded: keys in another order, indented.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(input, &doc))
	var indented bytes.Buffer
	enc := json.NewEncoder(&indented)
	enc.SetIndent("", "    ")
	require.NoError(t, enc.Encode(doc))
	again := []byte(`{"overrides": {"history": {"target_tokens": 3000, "keep_last": 4}}, "model": "gpt-4o", "preset": "adaptive", "event_id": "same", "conversation": ` + indented.String() + `}`)
	var acc2 apiAccepted
	resp, raw = a.call("POST", "/v1/sessions/s1/events", a.key, again, &acc2)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", raw)
	require.Equal(t, acc.RunID, acc2.RunID)
	require.True(t, acc2.Existing)

	// Another conversation under the same id in the same session: 409
	// naming the run that holds the id, and no second run.
	changed := bytes.Replace(input, []byte("django"), []byte("DJANGO"), 1)
	body := eventBody(map[string]any{"event_id": "same", "preset": "adaptive", "model": "gpt-4o"}, changed)
	var conflict struct {
		Error struct {
			RunID string `json:"run_id"`
		} `json:"error"`
	}
	resp, raw = a.call("POST", "/v1/sessions/s1/events", a.key, body, &conflict)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", raw)
	require.Equal(t, acc.RunID, conflict.Error.RunID, "the 409 names the run holding the id")
	var n int
	require.NoError(t, a.store.Pool().QueryRow(ctx, `select count(*) from runs where tenant_id = $1 and session_id = 's1'`, a.tenant).Scan(&n))
	require.Equal(t, 1, n, "a 409 records no run")
	// ... and no object: the changed conversation's original, stored
	// before the claim was refused, is deleted again; the first run's
	// original stays.
	objs, err := a.blob.List(ctx, "tenants/"+a.tenant+"/archive/")
	require.NoError(t, err)
	require.Len(t, objs, 1, "only the accepted run's original: %v", objs)
	run, err := a.store.GetRun(ctx, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, run.InputKey, objs[0])

	// The refused bytes under a new event id are accepted: the claim
	// writes the discarded original again, and the run completes.
	body = eventBody(map[string]any{"event_id": "new", "preset": "adaptive", "model": "gpt-4o", "wait_seconds": 60}, changed)
	var res apiResult
	resp, raw = a.call("POST", "/v1/sessions/other/events", a.key, body, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Contains(t, []string{"succeeded", "over_limit"}, res.Status, res.Error)
}

// TestOverridesAtAndAboveTheCaps: every capped override is accepted at its
// cap and refused above it with a 400 naming the field, before anything
// is stored.
func TestOverridesAtAndAboveTheCaps(t *testing.T) {
	t.Parallel()
	a := newAPIEnv(t, withoutLLM())
	input := readData(t, "swe-agent-deepseek/django__django-11742.json")
	for i, tc := range []struct {
		at, above map[string]any
		field     string
	}{
		{map[string]any{"history": map[string]any{"attempts": 5}}, map[string]any{"history": map[string]any{"attempts": 1000000}}, "overrides.history.attempts"},
		{map[string]any{"large_result": map[string]any{"parallelism": 16}}, map[string]any{"large_result": map[string]any{"parallelism": 1e8}}, "overrides.large_result.parallelism"},
		{map[string]any{"large_result": map[string]any{"chunk_chars": 10000}}, map[string]any{"large_result": map[string]any{"chunk_chars": 10}}, "overrides.large_result.chunk_chars"},
		{map[string]any{"drift": map[string]any{"repair_passes": 3}}, map[string]any{"drift": map[string]any{"repair_passes": 4}}, "overrides.drift.repair_passes"},
		{map[string]any{"history": map[string]any{"target_tokens": 32000}}, map[string]any{"history": map[string]any{"target_tokens": 32001}}, "overrides.history.target_tokens"},
		{map[string]any{}, map[string]any{"summarizer_model": "o1-pro"}, "overrides.summarizer_model"},
		{map[string]any{}, map[string]any{"encoding": "chars"}, "overrides.encoding"},
		{map[string]any{}, map[string]any{"budget": map[string]any{"enabled": false}}, "overrides.budget.enabled"},
	} {
		body := eventBody(map[string]any{"event_id": fmt.Sprintf("at-%d", i), "preset": "react-two-layer", "overrides": tc.at}, input)
		resp, raw := a.call("POST", "/v1/sessions/caps/events", a.key, body, nil)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "at the cap: %s", raw)

		var e apiError
		body = eventBody(map[string]any{"event_id": fmt.Sprintf("above-%d", i), "preset": "react-two-layer", "overrides": tc.above}, input)
		resp, raw = a.call("POST", "/v1/sessions/caps-above/events", a.key, body, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "above the cap: %s", raw)
		require.Equal(t, tc.field, e.Error.Field)
	}
	runs, err := a.store.ListRuns(context.Background(), store.RunFilter{Tenant: a.tenant, Session: "caps-above"})
	require.NoError(t, err)
	require.Empty(t, runs, "nothing stored for a refused override")
}
