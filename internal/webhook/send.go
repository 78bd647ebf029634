package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Sender POSTs deliveries. It follows no redirect (a 3xx is a failed
// attempt), uses no proxy from the environment, dials through the
// Policy's address check and keeps only a short prefix of each answer.
type Sender struct {
	policy Policy
	client *http.Client
}

// Timeout bounds one attempt, connection and answer included.
const Timeout = 30 * time.Second

// NewSender returns a Sender under policy p.
func NewSender(p Policy) *Sender {
	tr := &http.Transport{
		DialContext:           p.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: Timeout,
	}
	return &Sender{policy: p, client: &http.Client{
		Transport: tr,
		Timeout:   Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// Policy is the sender's endpoint policy.
func (s *Sender) Policy() Policy { return s.policy }

// Attempt is what one POST got.
type Attempt struct {
	// Code is the HTTP status, 0 when there was no answer.
	Code int
	// Err says why the attempt failed ("" when the endpoint accepted).
	Err string
	// Prefix is the start of the answer's body, at most PrefixBytes.
	Prefix   string
	Duration time.Duration
}

// Accepted reports whether the endpoint took the delivery (a 2xx).
func (a Attempt) Accepted() bool { return a.Err == "" && a.Code >= 200 && a.Code < 300 }

// PrefixBytes bounds the answer's body kept per attempt.
const PrefixBytes = 256

// Send POSTs body to url as message id, signed at now with secrets.
func (s *Sender) Send(ctx context.Context, url, id string, secrets []string, body []byte, now time.Time) Attempt {
	start := time.Now()
	done := func(a Attempt) Attempt {
		a.Duration = time.Since(start)
		return a
	}
	if err := s.policy.CheckURL(url); err != nil {
		return done(Attempt{Err: "endpoint URL " + err.Error()})
	}
	headers, err := Headers(id, now, body, secrets...)
	if err != nil {
		return done(Attempt{Err: err.Error()})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return done(Attempt{Err: fmt.Sprintf("build request: %v", err)})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ctxcompact-webhooks/1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return done(Attempt{Err: err.Error()})
	}
	defer resp.Body.Close()
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, PrefixBytes))
	// Drain a little more so the connection can be reused; never store it.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	a := Attempt{Code: resp.StatusCode, Prefix: string(bytes.ReplaceAll(bytes.ToValidUTF8(prefix, nil), []byte{0}, nil))}
	if !a.Accepted() {
		a.Err = fmt.Sprintf("endpoint answered %d", resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			a.Err += " (redirects are not followed)"
		}
	}
	return done(a)
}
