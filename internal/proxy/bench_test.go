package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkFirstByte is the time from a streaming request to the
// answer's first event: straight to the provider, through the proxy under
// the trigger (forwarded byte for byte), and through the proxy with the
// session's output spliced in. The differences are what the proxy adds to
// a turn (issue 42: ≤ 2 ms at p50 under the trigger, ≤ 5 ms with a
// splice). Run: go test -bench FirstByte ./internal/proxy/
func BenchmarkFirstByte(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 20; i++ {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"chunk %d\"}}\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	comp := newFakeCompactor()
	p, err := New(Config{AnthropicURL: up.URL, WaitFor: time.Second}, Deps{Compactor: comp, Outputs: comp.output,
		Authenticate: func(*http.Request, string) (string, error) { return "acme", nil }})
	if err != nil {
		b.Fatal(err)
	}
	px := httptest.NewServer(p)
	defer px.Close()

	// A 60-message session of about 4,000 tokens.
	body := anthropicBody(60, true)
	firstEvent := func(b *testing.B, url string, header map[string]string) string {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set(HeaderKey, "k")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "event:") {
			b.Fatalf("first line %q: %v", line, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get(HeaderState)
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			firstEvent(b, up.URL+"/v1/messages", nil)
		}
	})
	b.Run("proxy-forwarded", func(b *testing.B) {
		h := map[string]string{HeaderSession: "fwd", HeaderContextLimit: "1000000"}
		for b.Loop() {
			firstEvent(b, px.URL+"/proxy/anthropic/v1/messages", h)
		}
	})
	b.Run("proxy-spliced", func(b *testing.B) {
		// Crossing a trigger of 3,500 tokens makes the session's output
		// (a summary and the last two messages); every later request is
		// spliced on it, and stays under the trigger.
		h := map[string]string{HeaderSession: "spliced", HeaderContextLimit: "5000"}
		firstEvent(b, px.URL+"/proxy/anthropic/v1/messages", h)
		deadline := time.Now().Add(5 * time.Second)
		for len(comp.submitted()) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		for !strings.HasPrefix(firstEvent(b, px.URL+"/proxy/anthropic/v1/messages", h), "spliced") {
			if time.Now().After(deadline) {
				b.Fatal("the session's output was never spliced in")
			}
			time.Sleep(time.Millisecond)
		}
		for b.Loop() {
			firstEvent(b, px.URL+"/proxy/anthropic/v1/messages", h)
		}
	})
}
