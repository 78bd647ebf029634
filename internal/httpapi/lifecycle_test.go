package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goneAnswer is the 410 of an erased session.
type goneAnswer struct {
	Error struct {
		Code      string     `json:"code"`
		Message   string     `json:"message"`
		Field     string     `json:"field"`
		ErasureID string     `json:"erasure_id"`
		ErasedAt  *time.Time `json:"erased_at"`
	} `json:"error"`
}

// TestErasedSessionReadsAnswerGone: once a session's erasure is asked
// for, a caller's own offload is refused as events are (409), and every
// read of the session answers 410 naming the erasure, with erased_at once
// it finished; another tenant's session of the same name is untouched.
func TestErasedSessionReadsAnswerGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.st
	ctx := context.Background()
	offload := func(key string) *http.Response {
		body, _ := json.Marshal(compressRequest{Text: strings.Repeat("disk full at step 42\n", 200), Mode: ModeOffload, Session: "s1"})
		return f.do(t, "POST", "/v1/results:compress", key, body, nil)
	}
	require.Equal(t, http.StatusOK, offload(f.keyA).StatusCode)
	require.Equal(t, http.StatusOK, offload(f.keyB).StatusCode)

	e, _, err := st.StartErasure(ctx, "tenant-a", "s1", "test")
	require.NoError(t, err)
	var refused errorAnswer
	body, _ := json.Marshal(compressRequest{Text: "more", Mode: ModeOffload, Session: "s1"})
	resp := f.do(t, "POST", "/v1/results:compress", f.keyA, body, &refused)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "nothing is written to a session being erased")
	require.Equal(t, "session", refused.Error.Field)

	reads := []string{"/v1/sessions/s1/status", "/v1/sessions/s1/offloads", "/v1/sessions/s1/search?q=disk",
		"/v1/sessions/s1/watermarks", "/v1/sessions/s1/offloads/" + strings.Repeat("a", 64), "/v1/runs?session=s1"}
	check := func(finished bool) {
		t.Helper()
		for _, path := range reads {
			var got goneAnswer
			resp := f.do(t, "GET", path, f.keyA, nil, &got)
			require.Equal(t, http.StatusGone, resp.StatusCode, path)
			require.Equal(t, CodeGone, got.Error.Code, path)
			require.Equal(t, e.ID, got.Error.ErasureID, path)
			require.Equal(t, finished, got.Error.ErasedAt != nil, path)
		}
	}
	check(false)

	_, err = st.EraseSessionRows(ctx, e.ID, "tenant-a", "s1")
	require.NoError(t, err)
	require.NoError(t, st.FinishErasure(ctx, e.ID, 1, 0, nil))
	check(true)
	var gone goneAnswer
	resp = f.do(t, "DELETE", "/v1/sessions/s1", f.keyA, nil, &gone)
	require.Equal(t, http.StatusGone, resp.StatusCode, "erasing an erased session")
	require.Equal(t, e.ID, gone.Error.ErasureID)

	var list offloadList
	resp = f.do(t, "GET", "/v1/sessions/s1/offloads", f.keyB, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode, "tenant B's session of the same name")
	require.Len(t, list.Offloads, 1)

	// The name taken again is a live session.
	require.Equal(t, http.StatusOK, offload(f.keyA).StatusCode)
	resp = f.do(t, "GET", "/v1/sessions/s1/offloads", f.keyA, nil, &list)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, list.Offloads, 1, "only the new generation's")
}

// TestWebhookRegistrationIsIdempotent: the same URL twice is one endpoint;
// the second answer is 200 without a secret.
func TestWebhookRegistrationIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := []byte(`{"url":"https://8.8.8.8/hook"}`)
	var first, second webhookEndpoint
	resp := f.do(t, "POST", "/v1/webhooks", f.keyA, body, &first)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NotEmpty(t, first.Secret)
	resp = f.do(t, "POST", "/v1/webhooks", f.keyA, body, &second)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, first.ID, second.ID)
	require.Empty(t, second.Secret, "the secret is shown once")
	var list webhookList
	f.do(t, "GET", "/v1/webhooks", f.keyA, nil, &list)
	require.Len(t, list.Webhooks, 1)
}

// TestRetentionCanBeUnset: DELETE unsets, GET then says not set, and
// unsetting again is fine.
func TestRetentionCanBeUnset(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var got retentionSetting
	require.Equal(t, http.StatusOK, f.do(t, "PUT", "/v1/retention", f.keyA, []byte(`{"days":30}`), &got).StatusCode)
	require.True(t, got.Set)
	for range 2 {
		got = retentionSetting{Set: true}
		require.Equal(t, http.StatusOK, f.do(t, "DELETE", "/v1/retention", f.keyA, nil, &got).StatusCode)
		require.False(t, got.Set)
	}
	got = retentionSetting{Set: true}
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/v1/retention", f.keyA, nil, &got).StatusCode)
	require.Equal(t, retentionSetting{}, got)
}
