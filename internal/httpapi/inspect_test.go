package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/gateway"
	"github.com/ctxcompact/orchestrator/internal/policy"
)

// peakHeap runs fn and returns how far the in-use heap rose above where it
// was before, sampled every 2 ms.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	if peak.Load() < before.HeapInuse {
		return 0
	}
	return peak.Load() - before.HeapInuse
}

// TestInspectOfOneHugeResultStaysSmall: issue 20's inspect of one 30 MB
// tool result took about 1 GB. Token counting now hands the tokenizer
// 64 KB parts, so the request holds a few times its body, not tens
// (about 9× before). Not parallel: the heap is the process's.
func TestInspectOfOneHugeResultStaysSmall(t *testing.T) {
	line := "the quick brown fox jumps over the lazy dog at /src/pkg/file.go line 42 with error E123\n"
	conv, err := json.Marshal(map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "fix the parser"},
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "bash", "arguments": `{"cmd":"cat log"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": strings.Repeat(line, 24<<20/len(line))},
	}})
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "context_limit": 128000, "conversation": json.RawMessage(conv)})
	require.NoError(t, err)
	h := New(Deps{Gateway: &gateway.Gateway{DefaultPreset: policy.Adaptive}, MaxRequestBytes: 64 << 20}).(*api)

	w := httptest.NewRecorder()
	rise := peakHeap(func() {
		h.postInspect(w, httptest.NewRequest(http.MethodPost, "/v1/sessions/s1/inspect", bytes.NewReader(body)), "acme")
	})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"level":"CRITICAL"`)
	t.Logf("body %d MB, peak heap +%d MB", len(body)>>20, rise>>20)
	require.Less(t, rise, uint64(6*len(body)), "peak heap within 6× the body")
}
