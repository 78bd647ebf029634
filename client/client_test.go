package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ctxcompact/orchestrator/internal/webhook"
)

type doc = map[string]any

func openAPI(t *testing.T) doc {
	t.Helper()
	data, err := os.ReadFile("../api/openapi.yaml")
	require.NoError(t, err)
	var d doc
	require.NoError(t, yaml.Unmarshal(data, &d))
	return d
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestClientMatchesTheOpenAPIDocument: every route the client calls is in
// the document with its method, and every field the client reads or sends
// is a property of the documented schema.
func TestClientMatchesTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	d := openAPI(t)
	paths := d["paths"].(doc)
	for _, rt := range []struct{ method, path string }{
		{"post", "/v1/sessions/{session}/events"},
		{"get", "/v1/runs/{run}"},
		{"get", "/v1/runs/{run}/output"},
		{"get", "/v1/sessions/{session}/offloads"},
		{"get", "/v1/sessions/{session}/offloads/{id}"},
		{"get", "/v1/sessions/{session}/search"},
		{"get", "/v1/tools"},
	} {
		p, ok := paths[rt.path].(doc)
		require.True(t, ok, "%s is documented", rt.path)
		require.Contains(t, p, rt.method, "%s %s is documented", rt.method, rt.path)
	}
	schemas := d["components"].(doc)["schemas"].(doc)
	props := func(name string) doc { return schemas[name].(doc)["properties"].(doc) }
	for _, f := range jsonFields(Result{}) {
		require.Contains(t, props("RunResult"), f, "Result.%s", f)
	}
	for _, f := range jsonFields(Accepted{}) {
		require.Contains(t, props("Accepted"), f, "Accepted.%s", f)
	}
	for _, f := range jsonFields(Event{}) {
		require.Contains(t, props("EventRequest"), f, "Event.%s", f)
	}
	item := props("OffloadList")["offloads"].(doc)["items"].(doc)["properties"].(doc)
	for _, f := range jsonFields(Offload{}) {
		require.Contains(t, item, f, "Offload.%s", f)
	}
	// Both ways for the snapshots: the client reads every field the
	// server documents, and no other.
	snap := props("SnapshotList")["snapshots"].(doc)["items"].(doc)["properties"].(doc)
	require.ElementsMatch(t, keysOf(snap), jsonFields(Snapshot{}), "Snapshot")
	require.ElementsMatch(t, keysOf(props("SnapshotConversation")), jsonFields(SnapshotConversation{}), "SnapshotConversation")
}

// keysOf are a document object's keys.
func keysOf(d doc) []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	return out
}

// TestRetriesHonourRetryAfterAndKeepTheEventID: a 429 and a 503 are
// retried after their Retry-After, with the same event id; a 400 is not.
func TestRetriesHonourRetryAfterAndKeepTheEventID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		ids = append(ids, ev.EventID)
		times = append(times, time.Now())
		n := len(ids)
		mu.Unlock()
		require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down"}}`))
		case 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"S3 is unavailable"}}`))
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"run_id":"run-1","existing":false,"status":"pending","status_url":"/v1/runs/run-1"}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	res, acc, err := c.Submit(context.Background(), "s1", Event{Conversation: json.RawMessage(`[]`)})
	require.NoError(t, err)
	require.Nil(t, res)
	require.Equal(t, "run-1", acc.RunID)
	require.Len(t, ids, 3)
	require.NotEmpty(t, ids[0])
	require.Equal(t, ids[0], ids[1], "a retry is the same event")
	require.Equal(t, ids[0], ids[2])
	require.GreaterOrEqual(t, times[1].Sub(times[0]), time.Second, "Retry-After is honoured")

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"bad_request","message":"session: bad","field":"session"}}`))
	}))
	defer bad.Close()
	_, _, err = New(bad.URL, "k", bad.Client()).Submit(context.Background(), "s1", Event{EventID: "e"})
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Equal(t, "session", ae.Field)
}

// TestGoneErrorNamesTheErasure: a 410 with code gone is a *GoneError
// whose *Error carries the erasure's id and time; errors.As finds the
// *Error too, and it is not retried.
func TestGoneErrorNamesTheErasure(t *testing.T) {
	t.Parallel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"error":{"code":"gone","message":"session s1 was erased","erasure_id":"era-1","erased_at":"2026-11-27T03:00:00Z"}}`))
	}))
	defer srv.Close()
	_, err := New(srv.URL, "k", srv.Client()).Status(context.Background(), "s1")
	var gone *GoneError
	require.ErrorAs(t, err, &gone)
	require.Equal(t, "era-1", gone.Err.ErasureID)
	require.NotNil(t, gone.Err.ErasedAt)
	require.Equal(t, time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC), gone.Err.ErasedAt.UTC())
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusGone, ae.Status)
	require.Equal(t, CodeGone, ae.Code)
	require.Equal(t, 1, calls, "a 410 is not retried")
}

// TestBaseHeldErrorNamesTheHoldingRun: a 409 on an incremental event's
// base is a *BaseHeldError naming the run that already continues it; a
// 409 on the event id is a plain *Error.
func TestBaseHeldErrorNamesTheHoldingRun(t *testing.T) {
	t.Parallel()
	answer := `{"error":{"code":"conflict","field":"base.run_id","run_id":"run-b","message":"the output of run run-a is already continued by run run-b"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	_, _, err := c.Submit(context.Background(), "s1", Event{EventID: "e2", Base: &Base{RunID: "run-a", SHA256: strings.Repeat("a", 64)},
		Messages: json.RawMessage(`[{"role":"user","content":"next"}]`)})
	var held *BaseHeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, "run-b", held.HoldingRun())
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "base.run_id", ae.Field)

	answer = `{"error":{"code":"conflict","field":"event_id","run_id":"run-a","message":"reused"}}`
	_, _, err = c.Submit(context.Background(), "s1", Event{EventID: "e1", Conversation: json.RawMessage(`[]`)})
	require.NotErrorAs(t, err, &held)
	require.ErrorAs(t, err, &ae)
}

// TestAddWebhookSaysWhetherItCreated: 201 is a new endpoint with its
// secret, 200 the existing one without.
func TestAddWebhookSaysWhetherItCreated(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			URL string `json:"url"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		require.Equal(t, "POST /v1/webhooks", r.Method+" "+r.URL.Path)
		if seen[req.URL] {
			_, _ = w.Write([]byte(`{"id":"wh-1","url":"` + req.URL + `","created_at":"2026-11-27T03:00:00Z"}`))
			return
		}
		seen[req.URL] = true
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"wh-1","url":"` + req.URL + `","secret":"whsec_c2VjcmV0","created_at":"2026-11-27T03:00:00Z"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	w, created, err := c.AddWebhook(context.Background(), "https://example.com/hook", "")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "whsec_c2VjcmV0", w.Secret)
	again, created, err := c.AddWebhook(context.Background(), "https://example.com/hook", "")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, w.ID, again.ID)
	require.Empty(t, again.Secret)
}

// TestVerifyWebhookAcceptsWhatTheServerSigns: what the server's signer
// (internal/webhook) signs verifies, during a rotation with either
// secret; a changed body, an old timestamp and another secret do not.
func TestVerifyWebhookAcceptsWhatTheServerSigns(t *testing.T) {
	t.Parallel()
	oldSecret, err := webhook.NewSecret()
	require.NoError(t, err)
	newSecret, err := webhook.NewSecret()
	require.NoError(t, err)
	now := time.Now()
	body := []byte(`{"type":"run.succeeded","data":{"run_id":"r1"}}`)
	hs, err := webhook.Headers("msg_1", now, body, newSecret, oldSecret)
	require.NoError(t, err)
	h := http.Header{}
	for k, v := range hs {
		h.Set(k, v)
	}
	require.NoError(t, VerifyWebhook(oldSecret, h, body, now))
	require.NoError(t, VerifyWebhook(newSecret, h, body, now.Add(time.Minute)))
	other, err := webhook.NewSecret()
	require.NoError(t, err)
	for name, err := range map[string]error{
		"another secret":  VerifyWebhook(other, h, body, now),
		"a changed body":  VerifyWebhook(newSecret, h, append([]byte(" "), body...), now),
		"an old message":  VerifyWebhook(newSecret, h, body, now.Add(6*time.Minute)),
		"a secret of old": VerifyWebhook("whsec_", h, body, now),
		"no headers":      VerifyWebhook(newSecret, http.Header{}, body, now),
	} {
		require.ErrorIs(t, err, ErrWebhookSignature, name)
	}
}

// TestRetentionRoutes: set, read and unset send the documented methods
// and decode the retention.
func TestRetentionRoutes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	days := 0.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, "/v1/retention", r.URL.Path)
		switch r.Method {
		case http.MethodPut:
			var req struct {
				Days float64 `json:"days"`
			}
			require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
			days = req.Days
		case http.MethodDelete:
			days = 0
		}
		_ = json.NewEncoder(w).Encode(Retention{Days: days, Set: days > 0})
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	ctx := context.Background()
	r, err := c.SetRetention(ctx, 30)
	require.NoError(t, err)
	require.Equal(t, Retention{Days: 30, Set: true}, r)
	r, err = c.Retention(ctx)
	require.NoError(t, err)
	require.Equal(t, Retention{Days: 30, Set: true}, r)
	r, err = c.UnsetRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, Retention{}, r)
}

// TestSubmitSendsTheConversationByteForByte: the conversation's bytes
// (spaces, & and <) reach the server unchanged; one that is not JSON is
// refused before any request.
func TestSubmitSendsTheConversationByteForByte(t *testing.T) {
	t.Parallel()
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"run_id":"run-1","existing":false,"status":"pending","status_url":"/v1/runs/run-1"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	conv := json.RawMessage("{\"messages\": [ {\"role\": \"user\", \"content\": \"a && b <c>\"} ]}\n")
	_, acc, err := c.Submit(context.Background(), "s1", Event{EventID: "e1", Model: "gpt-4o", Conversation: conv})
	require.NoError(t, err)
	require.Equal(t, "run-1", acc.RunID)
	require.True(t, json.Valid(got), "%s", got)
	require.Contains(t, string(got), `"conversation":`+string(conv))
	var ev Event
	require.NoError(t, json.Unmarshal(got, &ev))
	require.Equal(t, "e1", ev.EventID)
	require.Equal(t, "gpt-4o", ev.Model)

	_, _, err = c.Submit(context.Background(), "s1", Event{EventID: "e2", Conversation: json.RawMessage(`{"messages": [`)})
	require.ErrorContains(t, err, "not valid JSON")
}

// TestWaitFinalAsksAgainUntilTheRunIsFinal: a run still live when the
// server's wait ends is asked for again, with a wait each time.
func TestWaitFinalAsksAgainUntilTheRunIsFinal(t *testing.T) {
	t.Parallel()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Query().Get("wait"))
		status := "running"
		if len(asked) == 3 {
			status = "succeeded"
		}
		_, _ = w.Write([]byte(`{"run_id":"run-1","status":"` + status + `","run":{"id":"run-1","status":"` + status + `"}}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	run, err := c.WaitFinal(context.Background(), "run-1")
	require.NoError(t, err)
	require.True(t, run.Final())
	require.Equal(t, "succeeded", run.Status)
	require.Equal(t, []string{"5m0s", "5m0s", "5m0s"}, asked)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.WaitFinal(ctx, "run-1")
	require.Error(t, err, "a cancelled wait ends")
}

// TestSnapshotRoutes: the snapshots are listed and one is read back from
// the paths the API serves, the session and the seq escaped; a seq the
// session does not have is a 404 *Error.
func TestSnapshotRoutes(t *testing.T) {
	t.Parallel()
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		switch r.URL.EscapedPath() {
		case "/v1/sessions/s%2F1/snapshots":
			_, _ = w.Write([]byte(`{"snapshots":[{"seq":4,"wire":"openai-chat","from_message":1,"to_message":3,"sha256":"ab","bytes":10,"created_at":"2026-11-29T06:00:00Z"},` +
				`{"seq":9,"wire":"openai-chat","from_message":4,"to_message":5,"extends":4,"sha256":"cd","bytes":7,"created_at":"2026-11-29T06:01:00Z"}]}`))
		case "/v1/sessions/s%2F1/snapshots/9":
			_, _ = w.Write([]byte(`{"seq":9,"wire":"openai-chat","complete":true,"from_message":1,"messages":[{"role":"user","content":"hi"}],"records":[4,9]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"snapshot not found"}}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL, "k", srv.Client())
	list, err := c.Snapshots(context.Background(), "s/1")
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, int64(4), list[1].Extends)
	conv, err := c.SnapshotAt(context.Background(), "s/1", 9)
	require.NoError(t, err)
	require.True(t, conv.Complete)
	require.Equal(t, []int64{4, 9}, conv.Records)
	require.JSONEq(t, `{"role":"user","content":"hi"}`, string(conv.Messages[0]))
	_, err = c.SnapshotAt(context.Background(), "s/1", 3)
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)
}
