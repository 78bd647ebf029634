package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// BenchmarkChunkDelay is what the proxy adds to each chunk of a stream
// once it flows: the provider stamps each event with the time it sent it
// (one every 2 ms, as a model streams tokens), and the reader takes the
// time it read it. Forwarded is the byte-for-byte path; recovering is a
// request whose conversation names cut content, so that the proxy reads
// the stream event by event for the recover tool's calls (recover.go).
// It reports the delay's p50 and p99 in µs per chunk. The "burst"
// variants send the events back to back and report the stream's
// throughput (SetBytes) instead. Run: go test -bench ChunkDelay
// ./internal/proxy/
func BenchmarkChunkDelay(b *testing.B) {
	const chunks = 100
	pad := strings.Repeat("x", 400)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		spaced := r.URL.Query().Get("burst") == ""
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < chunks; i++ {
			if spaced {
				time.Sleep(2 * time.Millisecond)
			}
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"},\"sent\":%d}\n\n",
				pad, time.Now().UnixNano())
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	comp := newFakeCompactor()
	p, err := New(Config{AnthropicURL: up.URL, WaitFor: time.Second}, Deps{Compactor: comp, Outputs: comp.output,
		Authenticate: func(*http.Request, string) (string, error) { return "acme", nil },
		Recover:      func(context.Context, string, string, string, string) ([]byte, int, error) { return nil, 0, nil }})
	if err != nil {
		b.Fatal(err)
	}
	px := httptest.NewServer(p)
	defer px.Close()
	stream := func(b *testing.B, url, body string, delays *[]time.Duration) int64 {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set(HeaderKey, "k")
		req.Header.Set(HeaderContextLimit, "1000000")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var n int64
		for {
			line, err := rd.ReadString('\n')
			n += int64(len(line))
			if i := strings.Index(line, `"sent":`); i >= 0 {
				var sent int64
				if _, serr := fmt.Sscanf(line[i+len(`"sent":`):], "%d", &sent); serr == nil {
					*delays = append(*delays, time.Since(time.Unix(0, sent)))
				}
			}
			if err != nil {
				return n
			}
		}
	}
	for _, tc := range []struct{ name, url, body string }{
		{"direct", up.URL + "/v1/messages", anthropicBody(4, true)},
		{"proxy-forwarded", px.URL + "/proxy/anthropic/v1/messages", anthropicBody(4, true)},
		{"proxy-recovering", px.URL + "/proxy/anthropic/v1/messages", recoverBody(false, true, "")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var delays []time.Duration
			for b.Loop() {
				stream(b, tc.url, tc.body, &delays)
			}
			slices.Sort(delays)
			if len(delays) > 0 {
				b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "p50-µs/chunk")
				b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds()), "p99-µs/chunk")
			}
		})
		b.Run(tc.name+"-burst", func(b *testing.B) {
			var delays []time.Duration
			for b.Loop() {
				b.SetBytes(stream(b, tc.url+"?burst=1", tc.body, &delays))
			}
		})
	}
}
