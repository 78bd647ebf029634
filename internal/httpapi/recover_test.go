package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/conversation"
	"github.com/ctxcompact/orchestrator/internal/recoverid"
	"github.com/ctxcompact/orchestrator/internal/store"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestLineRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text     string
		total    int
		from, to int
		want     string
	}{
		{"", 0, 1, 1, ""},
		{"a", 1, 1, 1, "a"},
		{"a\n", 1, 1, 5, "a\n"},
		{"a\n", 1, 2, 2, ""}, // a final line break starts no line
		{"a\nb", 2, 2, 9, "b"},
		{"a\nb\nc\n", 3, 2, 3, "b\nc\n"},
		{"a\n\nc", 3, 2, 2, "\n"},
		{"\n", 1, 1, 1, "\n"},
	} {
		require.Equal(t, tc.total, countLines(tc.text), "%q", tc.text)
		require.Len(t, splitLines(tc.text), tc.total, "%q", tc.text)
		require.Equal(t, tc.want, lineRange(tc.text, tc.from, tc.to), "%q %d-%d", tc.text, tc.from, tc.to)
	}
	for _, v := range []string{"", "0", "-1", "3-2", "a-b", "1-", "1-x", " 1"} {
		_, _, ok := parseLines(v)
		require.False(t, ok, "%q", v)
	}
}

// recoveryFixture is the API on real Postgres and S3 with one archived
// run of tenant-a's session s1 and one live offload.
type recoveryFixture struct {
	*fixture
	archive blob.Ref
	conv    conversation.Conversation
	offload string
	result  string
	st      *store.Store
}

const archivedChat = `{"messages":[` +
	`{"role":"system","content":"You are careful."},` +
	`{"role":"user","content":"fix the parser in src/parse.go"},` +
	`{"role":"assistant","content":"Reading it.","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat src/parse.go\"}"}}]},` +
	`{"role":"tool","tool_call_id":"c1","content":"package parse\nfunc Parse() {}\n"},` +
	`{"role":"assistant","content":"Fixed."}]}`

func newRecoveryFixture(t *testing.T) *recoveryFixture {
	t.Helper()
	st := storetest.New(t)
	bl := blobtest.New(t)
	h := New(Deps{Audit: &audit.Service{Store: st, Blob: bl}, Store: st, Blob: bl, MaxRequestBytes: testMaxBytes,
		Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &recoveryFixture{st: st, fixture: &fixture{url: srv.URL, keyA: "key-a-0123456789abcdef", keyB: "key-b-0123456789abcdef", blob: bl, client: srv.Client()}}
	ctx := context.Background()
	require.NoError(t, st.AddAPIKey(ctx, "tenant-a", f.keyA))
	require.NoError(t, st.AddAPIKey(ctx, "tenant-b", f.keyB))

	var err error
	f.archive, err = bl.PutContentVerified(ctx, "tenant-a", blob.KindArchive, []byte(archivedChat))
	require.NoError(t, err)
	f.conv, err = conversation.ParseAny([]byte(archivedChat))
	require.NoError(t, err)
	_, _, err = st.CreateRun(ctx, store.Run{ID: "run-a", Tenant: "tenant-a", Session: "s1",
		ArchiveKey: f.archive.Key, ArchiveSHA256: f.archive.SHA256})
	require.NoError(t, err)
	// Tenant B archived the very same bytes in its own session s1.
	b, err := bl.PutContentVerified(ctx, "tenant-b", blob.KindArchive, []byte(archivedChat))
	require.NoError(t, err)
	_, _, err = st.CreateRun(ctx, store.Run{ID: "run-b", Tenant: "tenant-b", Session: "s9", ArchiveKey: b.Key, ArchiveSHA256: b.SHA256})
	require.NoError(t, err)

	f.result = "line 1\nline 2\nline 3\n"
	off, err := bl.PutContent(ctx, "tenant-a", blob.KindOffload, []byte(f.result))
	require.NoError(t, err)
	require.NoError(t, st.AddOffload(ctx, store.Offload{Tenant: "tenant-a", Session: "s1", RunID: "run-a", Key: off.Key, ToolID: "c1", SHA256: off.SHA256}))
	f.offload = off.SHA256
	return f
}

// get answers the raw body of GET path.
func (f *recoveryFixture) get(t *testing.T, path, key string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(data)
}

func TestRecoverArchiveIDs(t *testing.T) {
	t.Parallel()
	f := newRecoveryFixture(t)
	sha := f.archive.SHA256

	// A range: the transcript of those messages, byte-stable.
	resp, body := f.get(t, "/v1/sessions/s1/offloads/"+sha+".m1-3", f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	want, err := recoverid.Text(f.conv, recoverid.Range(sha, 1, 3))
	require.NoError(t, err)
	require.Equal(t, want, body)
	require.Contains(t, body, "[message 1 user]\nfix the parser in src/parse.go\n")
	require.Contains(t, body, "[message 3 tool result bash]\npackage parse\nfunc Parse() {}\n")
	require.Equal(t, strconv.Itoa(countLines(body)), resp.Header.Get("X-Total-Lines"))
	_, again := f.get(t, "/v1/sessions/s1/offloads/"+sha+".m1-3", f.keyA)
	require.Equal(t, body, again)

	// A block: its text verbatim.
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+sha+".m3b0", f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "package parse\nfunc Parse() {}\n", body)
	require.Equal(t, "2", resp.Header.Get("X-Total-Lines"))

	// Lines of it, and past the end: 416 with the count.
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+sha+".m3b0?lines=2-9", f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "func Parse() {}\n", body)
	require.Equal(t, "2-2", resp.Header.Get("X-Lines"))
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+sha+".m3b0?lines=3-9", f.keyA)
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("X-Total-Lines"))
	var e errorAnswer
	require.NoError(t, json.Unmarshal([]byte(body), &e))
	require.Equal(t, CodeRangeNotSatisfiable, e.Error.Code)
	require.Equal(t, "lines", e.Error.Field)
	require.Contains(t, e.Error.Message, "the text has 2 lines")

	// Not found, exactly like an unknown id: another tenant's session,
	// another session, an unknown archive, a range past the original,
	// malformed ids, a key.
	for _, tc := range []struct{ path, key string }{
		{"/v1/sessions/s1/offloads/" + sha + ".m1-3", f.keyB},                     // tenant B has a session s1 too, without it
		{"/v1/sessions/s9/offloads/" + sha + ".m1-3", f.keyA},                     // tenant B's session name
		{"/v1/sessions/s2/offloads/" + sha + ".m1-3", f.keyA},                     // another session of tenant A
		{"/v1/sessions/s1/offloads/" + strings.Repeat("e", 64) + ".m1-3", f.keyA}, // unknown archive
		{"/v1/sessions/s1/offloads/" + sha + ".m1-5", f.keyA},                     // past the last message
		{"/v1/sessions/s1/offloads/" + sha + ".m3b1", f.keyA},                     // past the last block
		{"/v1/sessions/s1/offloads/" + sha + ".m3-1", f.keyA},                     // malformed
		{"/v1/sessions/s1/offloads/" + sha + ".m01-3", f.keyA},                    // malformed
		{"/v1/sessions/s1/offloads/" + sha + ".m1", f.keyA},                       // malformed
		{"/v1/sessions/s1/offloads/" + strings.ToUpper(sha), f.keyA},              // malformed
		{"/v1/sessions/s1/offloads/" + url.PathEscape(f.archive.Key), f.keyA},     // a key is no id
	} {
		resp, body := f.get(t, tc.path, tc.key)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", tc.path, body)
		require.NotContains(t, body, "fix the parser", tc.path)
	}
	// Tenant B reads its own archive of the same bytes in its session.
	resp, _ = f.get(t, "/v1/sessions/s9/offloads/"+sha+".m1-3", f.keyB)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The archive's bare id, as a summary's recovery references name it:
	// the whole original as the caller sent it, in its session only.
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+sha, f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, archivedChat, body)
	for _, tc := range []struct{ path, key string }{
		{"/v1/sessions/s2/offloads/" + sha, f.keyA}, // another session of tenant A
		{"/v1/sessions/s1/offloads/" + sha, f.keyB}, // tenant B's session s1
	} {
		resp, body := f.get(t, tc.path, tc.key)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", tc.path, body)
	}
}

func TestRecoverOffloadLines(t *testing.T) {
	t.Parallel()
	f := newRecoveryFixture(t)
	resp, body := f.get(t, "/v1/sessions/s1/offloads/"+f.offload, f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, f.result, body, "byte for byte")
	require.Equal(t, "3", resp.Header.Get("X-Total-Lines"))
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+f.offload+"?lines=3", f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "line 3\n", body)
	resp, body = f.get(t, "/v1/sessions/s1/offloads/"+f.offload+"?lines=4-10", f.keyA)
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, body)
	require.Equal(t, "3", resp.Header.Get("X-Total-Lines"))
	require.Contains(t, body, "the text has 3 lines")
	resp, _ = f.get(t, "/v1/sessions/s1/offloads/"+f.offload+"?lines=x", f.keyA)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = f.get(t, "/v1/sessions/s2/offloads/"+f.offload, f.keyA)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another session")
	resp, _ = f.get(t, "/v1/sessions/s1/offloads/"+f.offload, f.keyB)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another tenant")
}

func TestSearchHitsCarryRecoverIDs(t *testing.T) {
	t.Parallel()
	f := newRecoveryFixture(t)
	var res struct {
		Hits []audit.Hit `json:"hits"`
	}
	resp := f.do(t, http.MethodGet, "/v1/sessions/s1/search?q=parse", f.keyA, nil, &res)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, res.Hits)
	for _, h := range res.Hits {
		require.NotEmpty(t, h.ID, "%+v", h)
		r, body := f.get(t, "/v1/sessions/s1/offloads/"+h.ID, f.keyA)
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.Contains(t, strings.ToLower(body), "parse", "the id reads the hit back")
		if h.Kind == audit.HitArchive {
			require.Equal(t, recoverid.Range(f.archive.SHA256, h.Message, h.Message).String(), h.ID)
		}
	}
}

// TestReleasedOffloadsAreReadFromTheArchive: once a summary released an
// offload (row marked, object deleted), its id still reads the result
// back, from the original of the run that offloaded it, for this tenant
// and session only; search names the result's archive id.
func TestReleasedOffloadsAreReadFromTheArchive(t *testing.T) {
	t.Parallel()
	f := newRecoveryFixture(t)
	ctx := context.Background()
	text := "package parse\nfunc Parse() {}\n" // message 3 of the archive
	off, err := f.blob.PutContent(ctx, "tenant-a", blob.KindOffload, []byte(text))
	require.NoError(t, err)
	require.NoError(t, f.st.AddOffload(ctx, store.Offload{Tenant: "tenant-a", Session: "s1", RunID: "run-a", Key: off.Key, ToolID: "c1", SHA256: off.SHA256}))
	// Released while another session still holds the object: the row
	// is marked, the object stays, and search still finds it.
	n, err := f.st.MarkOffloadsDeleted(ctx, "tenant-a", "s1", []string{off.Key})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var res struct {
		Hits []audit.Hit `json:"hits"`
	}
	f.do(t, http.MethodGet, "/v1/sessions/s1/search?q=func+Parse", f.keyA, nil, &res)
	found := false
	for _, h := range res.Hits {
		if h.Kind == audit.HitOffload && h.RunID == "run-a" {
			found = true
			require.Equal(t, recoverid.BlockOf(f.archive.SHA256, 3, 0).String(), h.ID, "the result's archive id")
		}
	}
	require.True(t, found)

	// The object deleted too: the id still reads the result back.
	require.NoError(t, f.blob.Delete(ctx, off.Key))
	resp, body := f.get(t, "/v1/sessions/s1/offloads/"+off.SHA256, f.keyA)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, text, body, "byte for byte, from the archive")
	resp, _ = f.get(t, "/v1/sessions/s2/offloads/"+off.SHA256, f.keyA)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = f.get(t, "/v1/sessions/s1/offloads/"+off.SHA256, f.keyB)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
