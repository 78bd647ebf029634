package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/ctxcompact/orchestrator/internal/audit"
	"github.com/ctxcompact/orchestrator/internal/httpapi"
)

// apiResult is the API's side of a conversation size: its heap while
// sessions submit the size's conversation through the HTTP API at once.
type apiResult struct {
	size     int
	requests loopResult
	quiet    heapSplit // live heap before the submissions
	heap     heapPeak
}

// perRequest is what the API held per concurrent request at its peak
// collection, above its quiet level.
func (r apiResult) perRequest(sessions int) float64 {
	return max(r.heap.api.api-r.quiet.api, 0) / float64(max(sessions, 1))
}

// benchAPI keeps o.loadSessions callers posting conv as events through
// the HTTP API (the handler starter serve runs, with its body limit) for
// o.apiWindow, and follows the heap. The gateway behind it hands the runs
// to a task queue no worker polls: what is measured is the API's work on
// a submission (reading the body, validating and parsing the
// conversation, hashing it, storing it, recording and starting the run),
// not the runs.
func benchAPI(ctx context.Context, st *stack, sc *scenario, o options, conv []byte, limit int) (apiResult, error) {
	gw := *sc.gw
	gw.TaskQueue, gw.LLMTaskQueue = sc.queue+"-api", sc.queue+"-api-llm"
	gw.DeliveryTaskQueue, gw.EraseTaskQueue = sc.queue+"-api-deliveries", sc.queue+"-api-erasures"
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Gateway: &gw, Audit: &audit.Service{Store: st.store, Blob: st.blob},
		Store: st.store, Blob: st.blob, MaxRequestBytes: st.cfg.MaxRequestBytes, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	key := "bench-api-" + randomHex(12)
	if err := st.store.AddAPIKey(ctx, tenant, key); err != nil {
		return apiResult{}, fmt.Errorf("api key: %w", err)
	}
	body, err := json.Marshal(map[string]any{"event_id": apiEventID, "kind": "threshold", "model": agentModel,
		"context_limit": limit, "preset": pipelinePreset, "conversation": json.RawMessage(conv)})
	if err != nil {
		return apiResult{}, err
	}
	post := func(ctx context.Context, w, i int) error {
		return apiRequest(ctx, srv, key, fmt.Sprintf("api-%d", w), fmt.Sprintf("api-%d-%d", w, i), body)
	}
	// One request per caller first: connections, pools, the cache.
	if err := eachOnce(ctx, o.loadSessions, func(ctx context.Context, w, i int) error {
		return apiRequest(ctx, srv, key, fmt.Sprintf("api-%d", w), fmt.Sprintf("api-warm-%d", w), body)
	}); err != nil {
		return apiResult{}, fmt.Errorf("api warm-up: %w", err)
	}
	r := apiResult{size: len(conv)}
	if r.quiet, err = liveHeap(); err != nil {
		return r, err
	}
	tracker := startPeakTracker(50 * time.Millisecond)
	r.requests = closedLoop(ctx, o.loadSessions, 0, o.apiWindow, post)
	r.heap = tracker.peak()
	if r.requests.failed > 0 {
		return r, fmt.Errorf("%d requests failed: %w", r.requests.failed, r.requests.firstErr)
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "bench:   API, %s: %d requests, %d collections split; api at its peak %.1f MB (quiet %.1f MB); largest: %s\n",
			humanBytes(len(conv)), r.requests.total, r.heap.profiled, r.heap.api.api/(1<<20), r.quiet.api/(1<<20), topOf(r.heap.api.apiSites, 8))
	}
	return r, nil
}

// apiEventID stands for the event id in the request body of benchAPI.
const apiEventID = "bench-api-event-id"

// apiRequest posts one event: body with its event id in place of
// apiEventID, as a client would send it (streamed from body, not copied).
func apiRequest(ctx context.Context, srv *httptest.Server, key, session, eventID string, body []byte) error {
	// The top-level key: it is written after the conversation (keys in
	// order), so the last occurrence is it.
	field := []byte(`"event_id":"` + apiEventID + `"`)
	idx := bytes.LastIndex(body, field)
	if idx < 0 {
		return fmt.Errorf("request body has no event id to fill in")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/sessions/"+session+"/events",
		io.MultiReader(bytes.NewReader(body[:idx]), bytes.NewReader([]byte(`"event_id":"`+eventID+`"`)), bytes.NewReader(body[idx+len(field):])))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("event %s answered %d: %s", eventID, resp.StatusCode, answer)
	}
	return nil
}
