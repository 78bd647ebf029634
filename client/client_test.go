package client

import (
	"context"
	"encoding/json"
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
