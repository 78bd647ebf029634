package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSignMatchesTheSpecificationsExample: the signature of the Standard
// Webhooks specification's own example (its libraries' test vector).
func TestSignMatchesTheSpecificationsExample(t *testing.T) {
	t.Parallel()
	sig, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	secret, err := NewSecret()
	require.NoError(t, err)
	other, err := NewSecret()
	require.NoError(t, err)
	now := time.Now()
	body := []byte(`{"type":"run.succeeded"}`)
	h, err := Headers("msg_1", now, body, secret)
	require.NoError(t, err)
	require.NoError(t, Verify(secret, h, body, now))

	rotated, err := Headers("msg_1", now, body, other, secret)
	require.NoError(t, err)
	require.Len(t, strings.Fields(rotated["webhook-signature"]), 2, "both secrets sign during a rotation")
	require.NoError(t, Verify(secret, rotated, body, now), "the old secret still verifies")
	require.NoError(t, Verify(other, rotated, body, now), "the new secret verifies")

	for name, check := range map[string]error{
		"tampered body": Verify(secret, h, []byte(`{"type":"run.failed"}`), now),
		"wrong secret":  Verify(other, h, body, now),
		"too old":       Verify(secret, h, body, now.Add(Tolerance+time.Minute)),
		"no headers":    Verify(secret, map[string]string{}, body, now),
	} {
		require.Error(t, check, name)
	}
	_, err = Sign("not a secret!", "msg", now, body)
	require.Error(t, err)
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	p := Policy{AllowHosts: []string{"127.0.0.1:9000", "receiver.internal", "[::1]:9001", "::2", "10.0.0.7:8080"}}
	tests := []struct {
		url  string
		want string // "" accepted, else part of the error
	}{
		{"https://hooks.example.com/ctx", ""},
		{"https://hooks.example.com:8443/ctx", ""},
		{"http://127.0.0.1:9000/hook", ""},
		{"http://receiver.internal/hook", ""},
		{"https://receiver.internal/hook", ""},
		{"http://[::1]:9001/hook", ""},
		{"http://[::2]/hook", ""},
		{"http://10.0.0.7:8080/hook", ""},
		// An entry with a port allows that port only.
		{"http://127.0.0.1:5432/", "port 5432 of \"127.0.0.1\" is not allowed"},
		{"http://127.0.0.1/", "port 80 of \"127.0.0.1\" is not allowed"},
		{"https://127.0.0.1:5432/", "port 5432"},
		{"http://[::1]:5432/", "port 5432"},
		// A host alone allows 80 and 443 only.
		{"http://receiver.internal:8080/hook", "port 8080 of \"receiver.internal\" is not allowed"},
		{"http://[::2]:9000/hook", "port 9000"},
		// Internal address literals not listed at all.
		{"https://10.0.0.8/hook", "internal address"},
		{"https://169.254.169.254/latest/meta-data", "internal address"},
		{"https://[::ffff:127.0.0.2]:443/", "internal address"},
		{"http://hooks.example.com/ctx", "must be https"},
		{"http://localhost:9000/hook", "must be https"},
		{"ftp://hooks.example.com/", "is not https"},
		{"https://hooks.example.com:0/", "not a port number"},
		{"https://hooks.example.com:99999/", "not a port number"},
		{"https://user:pw@hooks.example.com/", "credentials"},
		{"https://hooks.example.com/#x", "fragment"},
		{"", "is empty"},
		{"https:///nohost", "no host"},
		{"https://" + strings.Repeat("a", MaxURLLength) + ".com/", "longer than"},
	}
	for _, tt := range tests {
		err := p.CheckURL(tt.url)
		if tt.want == "" {
			require.NoError(t, err, tt.url)
			continue
		}
		require.ErrorContains(t, err, tt.want, tt.url)
	}
}

// TestAllows: entries are host:port aware, names and addresses written
// one way.
func TestAllows(t *testing.T) {
	t.Parallel()
	p := Policy{AllowHosts: []string{" 127.0.0.1:9000", "LocalHost.", "::1", "[::3]", "[::4]:09002", "bad:port"}}
	tests := []struct {
		host, port string
		want       bool
	}{
		{"127.0.0.1", "9000", true},
		{"127.0.0.1", "9001", false},
		{"127.0.0.1", "80", false},
		{"::ffff:127.0.0.1", "9000", true},
		{"localhost", "80", true},
		{"localhost.", "443", true},
		{"localhost", "9000", false},
		{"::1", "443", true},
		{"0:0::1", "80", true},
		{"::1", "9000", false},
		{"::3", "80", true},
		{"::3", "9000", false},
		{"::4", "9002", true},
		{"::4", "443", false},
		{"bad", "port", false},
		{"example.com", "443", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, p.allows(tt.host, tt.port), "%s port %s", tt.host, tt.port)
	}
}

// TestCheckDial: at connection time the resolved address is checked with
// its port, so a name that now resolves inside (DNS rebinding) is refused
// unless that address and port are allowed; an allow-listed endpoint
// host:port reaches what its name resolves to.
func TestCheckDial(t *testing.T) {
	t.Parallel()
	p := Policy{AllowHosts: []string{"127.0.0.1:9000", "10.1.2.3"}}
	tests := []struct {
		named    bool
		resolved string
		ok       bool
	}{
		{false, "93.184.216.34:443", true},
		{false, "93.184.216.34:5432", true},
		{false, "127.0.0.1:9000", true},
		{false, "127.0.0.1:5432", false},
		{false, "127.0.0.1:8080", false},
		{false, "10.1.2.3:443", true},
		{false, "10.1.2.3:5432", false},
		{false, "[::1]:9000", false},
		{false, "[::ffff:127.0.0.1]:9000", true},
		{false, "169.254.169.254:80", false},
		{false, "100.64.1.1:443", false},
		{false, "[64:ff9b::7f00:1]:443", false},
		{true, "127.0.0.1:5432", true},
		{false, "not-an-address:80", false},
	}
	for _, tt := range tests {
		err := p.checkDial(tt.named, tt.resolved)
		if tt.ok {
			require.NoError(t, err, tt.resolved)
			continue
		}
		var be *BlockedError
		require.ErrorAs(t, err, &be, tt.resolved)
		require.Equal(t, ClassBlocked, Classify(fmt.Errorf("post: %w", err)))
	}
}

// TestClassify: what a tenant is told of a failed attempt is a class,
// never the transport's text.
func TestClassify(t *testing.T) {
	t.Parallel()
	op := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	tests := []struct {
		err  error
		want string
	}{
		{op(&net.DNSError{Err: "no such host", Name: "db.internal", Server: "10.0.0.2:53", IsNotFound: true}), ClassDNS},
		{op(&net.DNSError{Err: "i/o timeout", Name: "x", Server: "10.0.0.2:53", IsTimeout: true}), ClassDNS},
		{op(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), ClassRefused},
		{op(&os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}), ClassReset},
		{&url.Error{Op: "Post", URL: "u", Err: io.EOF}, ClassReset},
		{&url.Error{Op: "Post", URL: "u", Err: errors.New("http: server closed idle connection")}, ClassReset},
		{&url.Error{Op: "Post", URL: "u", Err: context.DeadlineExceeded}, ClassTimeout},
		{&url.Error{Op: "Post", URL: "u", Err: context.Canceled}, ClassCanceled},
		{&url.Error{Op: "Post", URL: "u", Err: x509.UnknownAuthorityError{}}, ClassTLS},
		{&url.Error{Op: "Post", URL: "u", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, ClassTLS},
		{op(&BlockedError{Address: "127.0.0.1:5432"}), ClassBlocked},
		{errors.New("something else"), ClassConnection},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Classify(tt.err), "%v", tt.err)
	}
}

// sendTo posts an empty body to u under p.
func sendTo(t *testing.T, p Policy, u string) Attempt {
	t.Helper()
	secret, err := NewSecret()
	require.NoError(t, err)
	return NewSender(p).Send(t.Context(), u, "msg_1", []string{secret}, []byte(`{}`), time.Now())
}

// requireNoNetworkText: a class names no address nor port.
func requireNoNetworkText(t *testing.T, a Attempt, hostPort string) {
	t.Helper()
	host, port, err := net.SplitHostPort(hostPort)
	require.NoError(t, err)
	require.NotContains(t, a.Err, host)
	require.NotContains(t, a.Err, port)
}

// TestSendRefusesInternalAddressesAndRedirects: an https-looking endpoint
// cannot reach the deployment's own network unless the operator allowed
// its host and port, a redirect is a failed attempt (never followed), and
// only a prefix of the answer is kept.
func TestSendRefusesInternalAddressesAndRedirects(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/ok":
			if r.Header.Get("webhook-signature") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(strings.Repeat("x", 10_000)))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)

	// Plain http to a host that is not allowed: refused before dialling.
	att := sendTo(t, Policy{}, srv.URL+"/ok")
	require.False(t, att.Accepted())
	require.Equal(t, ClassBlocked, att.Err)
	require.Contains(t, att.Detail, "must be https")
	// A host the operator allowed by name and port reaches what it
	// resolves to (loopback here), over plain http.
	att = sendTo(t, Policy{AllowHosts: []string{"localhost:" + u.Port()}}, "http://localhost:"+u.Port()+"/ok")
	require.True(t, att.Accepted(), "an allowed host name reaches what it resolves to: %s", att.Detail)
	require.Len(t, att.Prefix, PrefixBytes)

	allowed := Policy{AllowHosts: []string{u.Host}}
	att = sendTo(t, allowed, srv.URL+"/redirect")
	require.False(t, att.Accepted())
	require.Equal(t, http.StatusFound, att.Code)
	require.Equal(t, "http 302 (redirects are not followed)", att.Err)
	att = sendTo(t, allowed, srv.URL+"/fail")
	require.Equal(t, http.StatusServiceUnavailable, att.Code)
	require.Equal(t, "http 503", att.Err)
	require.False(t, att.Accepted())
	require.EqualValues(t, 3, hits.Load(), "the redirect was not followed")

	// https to an internal address that is not allowed: the dialler
	// refuses after resolution.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(tlsSrv.Close)
	tu, err := url.Parse(tlsSrv.URL)
	require.NoError(t, err)
	att = sendTo(t, Policy{}, "https://localhost:"+tu.Port()+"/ok")
	require.False(t, att.Accepted())
	require.Equal(t, ClassBlocked, att.Err)
	require.Contains(t, att.Detail, "internal address")
	requireNoNetworkText(t, att, tu.Host)
	require.EqualValues(t, 3, hits.Load(), "nothing reached the internal server")
	// Allowed on its port, the test server's certificate is not trusted.
	att = sendTo(t, Policy{AllowHosts: []string{tu.Host}}, tlsSrv.URL+"/ok")
	require.Equal(t, ClassTLS, att.Err, att.Detail)
}

// TestHostOnlyEntryAllowsNoOtherPort: "127.0.0.1" in the allow-list
// allows ports 80 and 443 only: a receiver on another port of that host
// (the database's, the API's) is refused at registration and, for a name
// that resolves there, when dialling.
func TestHostOnlyEntryAllowsNoOtherPort(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(tlsSrv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	tu, err := url.Parse(tlsSrv.URL)
	require.NoError(t, err)
	p := Policy{AllowHosts: []string{u.Hostname(), "localhost"}}

	require.ErrorContains(t, p.CheckURL(srv.URL+"/hook"), "port "+u.Port())
	att := sendTo(t, p, srv.URL+"/hook")
	require.Equal(t, ClassBlocked, att.Err)
	// A public-looking https URL whose name resolves to loopback on that
	// port: refused by the dialler.
	att = sendTo(t, Policy{AllowHosts: []string{u.Hostname()}}, "https://localhost:"+tu.Port()+"/hook")
	require.Equal(t, ClassBlocked, att.Err, att.Detail)
	require.Zero(t, hits.Load(), "no request reached a port that is not allowed")
}

// TestSendClassifiesFailures: a refused port, a connection closed
// without an answer and a silent receiver are told as classes, with the
// transport's text kept for the worker's log.
func TestSendClassifiesFailures(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	att := sendTo(t, Policy{AllowHosts: []string{closed}}, "http://"+closed+"/hook")
	require.Equal(t, ClassRefused, att.Err)
	require.Contains(t, att.Detail, "refused")
	requireNoNetworkText(t, att, closed)

	// A listener that closes every connection at once.
	eof, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = eof.Close() })
	go func() {
		for {
			c, err := eof.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	att = sendTo(t, Policy{AllowHosts: []string{eof.Addr().String()}}, "http://"+eof.Addr().String()+"/hook")
	require.Equal(t, ClassReset, att.Err, att.Detail)
	requireNoNetworkText(t, att, eof.Addr().String())

	// A receiver that never answers, under a short deadline.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	su, err := url.Parse(slow.URL)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	secret, err := NewSecret()
	require.NoError(t, err)
	att = NewSender(Policy{AllowHosts: []string{su.Host}}).Send(ctx, slow.URL+"/hook", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.Equal(t, ClassTimeout, att.Err, att.Detail)
	require.Less(t, att.Duration, Timeout)
}

// TestNormalize: every spelling of one receiver normalizes to one URL
// (case, a trailing dot, the default port, leading zeros, an
// IPv4-mapped IPv6 address), without DNS; paths keep their case.
func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, want string }{
		{"http://localhost:19900/h", "http://localhost:19900/h"},
		{"http://LOCALHOST:19900/h", "http://localhost:19900/h"},
		{"http://localhost.:19900/h", "http://localhost:19900/h"},
		{"HTTP://localhost:019900/h", "http://localhost:19900/h"},
		{"http://127.0.0.1:019900/h", "http://127.0.0.1:19900/h"},
		{"http://[::ffff:127.0.0.1]:19900/h", "http://127.0.0.1:19900/h"},
		{"https://Example.COM:443/Hook?A=B", "https://example.com/Hook?A=B"},
		{"http://example.com:80", "http://example.com"},
		{"https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x"},
		{"https://[2001:db8::1]:8443/x", "https://[2001:db8::1]:8443/x"},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.raw)
		require.NoError(t, err, tt.raw)
		require.Equal(t, tt.want, got, tt.raw)
	}
	_, err := Normalize("http://h:99999/x")
	require.Error(t, err)
}
