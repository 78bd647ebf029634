package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/proxy"
)

// TestProxySnapshotsFollowTheSession: a proxy session's state is recorded
// between compactions, each snapshot only what the host added since the
// one before; the API reads the latest back as the host sent it; the
// session's erasure deletes the snapshots' rows and their objects in S3.
func TestProxySnapshotsFollowTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutLLM())
	up := &chatUpstream{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	srv, key := proxyServer(t, e, proxy.Config{OpenAIURL: upstream.URL + "/v1"})
	const session = "snapshots-11742"

	msgs, _ := recording(t)
	turns := 0
	var last []json.RawMessage
	for i := 2; i < 40; i++ {
		var role struct {
			Role string `json:"role"`
		}
		require.NoError(t, json.Unmarshal(msgs[i], &role))
		if role.Role != "assistant" {
			continue
		}
		last = msgs[:i]
		body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": last})
		require.NoError(t, err)
		up.mu.Lock()
		up.next = msgs[i]
		up.mu.Unlock()
		// A large limit: no compaction, the snapshots are all there is.
		_, state := proxyPost(t, srv, "/proxy/openai/v1/chat/completions", body, key, session, 1_000_000)
		require.Equal(t, "forwarded", state)
		turns++
		// Wait for each record, so that none is folded into the next.
		want := len(last)
		require.Eventually(t, func() bool {
			to, _, err := e.store.LatestSnapshot(context.Background(), e.tenant, session)
			return err == nil && to == want
		}, 30*time.Second, 20*time.Millisecond, "turn %d recorded", i)
	}

	var list struct {
		Snapshots []struct {
			Seq     int64 `json:"seq"`
			Wire    string
			From    int   `json:"from_message"`
			To      int   `json:"to_message"`
			Extends int64 `json:"extends"`
			Bytes   int64 `json:"bytes"`
		} `json:"snapshots"`
	}
	apiJSON(t, srv, key, http.MethodGet, "/v1/sessions/"+session+"/snapshots", http.StatusOK, &list)
	require.Len(t, list.Snapshots, turns, "one snapshot per turn")
	whole := 0
	for i, s := range list.Snapshots {
		require.Equal(t, "openai-chat", s.Wire)
		if i == 0 {
			require.Equal(t, 1, s.From)
			require.Zero(t, s.Extends)
		} else {
			require.Equal(t, list.Snapshots[i-1].To+1, s.From, "snapshot %d holds only what is new", s.Seq)
			require.Equal(t, list.Snapshots[i-1].Seq, s.Extends)
		}
		whole += int(s.Bytes)
	}
	require.Less(t, whole, 2*len(mustJSON(t, last)), "the records together are about one conversation, not one per turn")

	latest := list.Snapshots[len(list.Snapshots)-1]
	var conv struct {
		Complete bool              `json:"complete"`
		Messages []json.RawMessage `json:"messages"`
		Records  []int64           `json:"records"`
	}
	apiJSON(t, srv, key, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/snapshots/%d", session, latest.Seq), http.StatusOK, &conv)
	require.True(t, conv.Complete)
	require.Len(t, conv.Records, turns)
	require.Len(t, conv.Messages, len(last))
	for i := range last {
		require.JSONEq(t, string(last[i]), string(conv.Messages[i]), "message %d as the host sent it", i)
	}
	apiJSON(t, srv, key, http.MethodGet, "/v1/sessions/"+session+"/snapshots/x", http.StatusBadRequest, nil)
	apiJSON(t, srv, key, http.MethodGet, "/v1/sessions/"+session+"/snapshots/999999", http.StatusNotFound, nil)

	// Erased with the session: the rows, and the objects in S3.
	keys, _, err := e.store.SessionObjects(context.Background(), e.tenant, session)
	require.NoError(t, err)
	require.Len(t, keys, turns, "the session's objects are its snapshots")
	var erasure struct {
		ID string `json:"id"`
	}
	apiJSON(t, srv, key, http.MethodDelete, "/v1/sessions/"+session, http.StatusAccepted, &erasure)
	require.Eventually(t, func() bool {
		got, err := e.store.GetErasure(context.Background(), e.tenant, erasure.ID)
		return err == nil && !got.FinishedAt.IsZero()
	}, time.Minute, 100*time.Millisecond)
	for _, k := range keys {
		_, err := e.blob.Get(context.Background(), k)
		require.Error(t, err, "snapshot object %s is gone", k)
	}
	apiJSON(t, srv, key, http.MethodGet, "/v1/sessions/"+session+"/snapshots", http.StatusGone, nil)
}

// apiJSON calls the JSON API of srv with tenant key, checks the status
// and decodes the answer into out (when not nil).
func apiJSON(t *testing.T, srv *httptest.Server, key, method, path string, status int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(nil))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, path, body)
	if out != nil {
		require.NoError(t, json.Unmarshal(body, out), "%s", body)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
