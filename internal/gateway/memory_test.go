package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/blob"
	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
	"github.com/ctxcompact/orchestrator/internal/policy"
	"github.com/ctxcompact/orchestrator/internal/testkit/blobtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/memtest"
	"github.com/ctxcompact/orchestrator/internal/testkit/storetest"
)

func TestMain(m *testing.M) { blobtest.Main(m) }

// signalOnly is a Temporal client that takes every signal-with-start and
// starts nothing: the tests here measure the submission alone.
type signalOnly struct {
	client.Client
	signals atomic.Int64
}

func (s *signalOnly) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	s.signals.Add(1)
	return nil, nil
}

// TestSubmissionAllocatesWithinBounds bounds what the API allocates for
// a submission of a 5 MB conversation, as a multiple of the
// conversation: through the gateway (validating and parsing it, hashing
// its canonical form, storing it, recording and starting the run), and
// through the HTTP handler (reading and decoding the request besides).
// What a submission allocates is also the most it can hold at once, so a
// submission that copies the conversation a few times more shows here
// without a timing-dependent sample of the heap. Before the fixes
// (issue 20, item 10) a submission allocated 15.9× through the gateway
// (its canonical hash decoded the whole conversation into a tree of maps
// and encoded it again; the parser copied every field of the document,
// and every text with an escape twice) and 20.1× through the HTTP
// handler; now 2.3× (the parsed conversation and its field maps) and
// 6.4× (the handler's decoding of the body, which grows its buffer as it
// reads, is 4×).
func TestSubmissionAllocatesWithinBounds(t *testing.T) {
	// Not parallel: TotalAlloc counts the whole process.
	conv := gateway.BigConversation(t, 5<<20)
	in := float64(len(conv))
	st := storetest.New(t)
	bl := blobtest.New(t, func(c *blob.Config) { c.CacheBytes = 64 << 20 })
	gw := &gateway.Gateway{Store: st, Blob: bl, Temporal: &signalOnly{}, TaskQueue: "q", DefaultPreset: policy.AutoSummarize}
	ctx := context.Background()
	var seq atomic.Int64
	submit := func() {
		_, err := gw.Submit(ctx, gateway.Event{Tenant: "acme", Session: "s1", EventID: fmt.Sprintf("e%d", seq.Add(1)),
			Model: "gpt-4o", Conversation: conv})
		require.NoError(t, err)
	}
	submit() // warm: pools, connections
	x := float64(memtest.Allocated(submit)) / in
	t.Logf("gateway: a submission allocated %.1f× its conversation", x)
	require.LessOrEqual(t, x, 6.0, "a submission allocated %.1f× its %d-byte conversation", x, len(conv))

	h := httpapi.New(httpapi.Deps{Gateway: gw, Audit: &audit.Service{Store: st, Blob: bl}, Store: st, Blob: bl,
		Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	key := "key-acme-0123456789abcdef"
	require.NoError(t, st.AddAPIKey(ctx, "acme", key))
	body, err := json.Marshal(map[string]any{"event_id": "x", "model": "gpt-4o", "conversation": json.RawMessage(conv)})
	require.NoError(t, err)
	post := func() {
		b := bytes.Replace(body, []byte(`"event_id":"x"`), []byte(fmt.Sprintf(`"event_id":"h%d"`, seq.Add(1))), 1)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/sessions/s1/events", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", answer)
	}
	post()
	// The request's own copy of the body is the client's, not the API's.
	x = (float64(memtest.Allocated(post)) - float64(len(body))) / in
	t.Logf("HTTP API: a request allocated %.1f× its conversation", x)
	require.LessOrEqual(t, x, 10.0, "a request allocated %.1f× its %d-byte conversation", x, len(conv))
}
