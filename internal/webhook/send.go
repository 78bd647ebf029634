package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ctxcompact/orchestrator/internal/netcause"
)

// Sender POSTs deliveries. It follows no redirect (a 3xx is a failed
// attempt), uses no proxy from the environment, dials through the
// Policy's address check and keeps only a short prefix of each answer.
type Sender struct {
	policy Policy
	client *http.Client
}

// Timeout bounds one attempt, connection, TLS, request and the bounded
// read of the answer included: a slow or silent receiver holds a
// worker's activity slot for at most this long.
const Timeout = 10 * time.Second

// maxHeaderBytes bounds the answer's headers; drainBytes bounds what is
// read of the body past PrefixBytes so that the connection can be reused
// (a longer answer costs the connection instead).
const (
	maxHeaderBytes = 16 << 10
	drainBytes     = 4 << 10
)

// NewSender returns a Sender under policy p.
func NewSender(p Policy) *Sender {
	tr := &http.Transport{
		DialContext:            p.dialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
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
	// Err is the class of the failure ("" when the endpoint accepted):
	// one of the Class constants, or "http <code>" for an answer that is
	// not a 2xx. It is what the tenant sees in the delivery log, so it
	// never carries addresses, names or port states of the network the
	// worker dialled into.
	Err string
	// Detail is the failure as the transport reported it (addresses
	// included, never the answer's body), for the worker's log only:
	// never stored nor shown to the tenant.
	Detail string
	// Prefix is the start of the answer's body, at most PrefixBytes.
	Prefix   string
	Duration time.Duration
}

// The classes of a failed attempt without an HTTP answer: netcause's
// words, and the two a delivery adds.
const (
	ClassTimeout    = netcause.Timeout
	ClassRefused    = netcause.Refused
	ClassDNS        = netcause.DNS
	ClassTLS        = netcause.TLS
	ClassReset      = netcause.Reset
	ClassBlocked    = "blocked"
	ClassCanceled   = netcause.Canceled
	ClassConnection = netcause.Connection
	// ClassInternal is a failure on the sender's side (signing).
	ClassInternal = "internal error"
)

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
		return done(Attempt{Err: ClassBlocked, Detail: "endpoint URL " + err.Error()})
	}
	headers, err := Headers(id, now, body, secrets...)
	if err != nil {
		return done(Attempt{Err: ClassInternal, Detail: err.Error()})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return done(Attempt{Err: ClassInternal, Detail: fmt.Sprintf("build request: %v", err)})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ctxcompact-webhooks/1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return done(Attempt{Err: Classify(err), Detail: err.Error()})
	}
	defer resp.Body.Close()
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, PrefixBytes))
	// Drain a little more so the connection can be reused; never store it.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	a := Attempt{Code: resp.StatusCode, Prefix: string(bytes.ReplaceAll(bytes.ToValidUTF8(prefix, nil), []byte{0}, nil))}
	if !a.Accepted() {
		a.Err = fmt.Sprintf("http %d", resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			a.Err += " (redirects are not followed)"
		}
		a.Detail = a.Err
	}
	return done(a)
}

// Classify names the class of a failure to get an answer: what a tenant
// may be told (see Attempt.Err), netcause's words or "blocked".
func Classify(err error) string {
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		return ClassBlocked
	}
	return netcause.Of(err)
}
