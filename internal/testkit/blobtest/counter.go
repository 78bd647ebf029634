package blobtest

import (
	"net/http"
	"sync"

	"github.com/ctxcompact/orchestrator/internal/blob"
)

// RequestCounter counts a Store's HTTP requests by method, to prove what it
// did or did not send to S3. Its zero value is ready to use.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// RoundTrip counts req and sends it with the default transport.
func (c *RequestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[req.Method]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// Count is the number of requests of method since the start or the last
// Reset.
func (c *RequestCounter) Count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

// Reset sets every count back to zero.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// WithCounter is an Option that sends the Store's requests through a new
// RequestCounter, returned with it.
func WithCounter() (Option, *RequestCounter) {
	c := &RequestCounter{}
	return func(cfg *blob.Config) { cfg.HTTPClient = &http.Client{Transport: c} }, c
}
