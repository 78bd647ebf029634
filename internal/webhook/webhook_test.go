package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
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
	p := Policy{AllowHosts: []string{"127.0.0.1", "receiver.internal"}}
	tests := []struct {
		url  string
		want string // "" accepted, else part of the error
	}{
		{"https://hooks.example.com/ctx", ""},
		{"http://127.0.0.1:9000/hook", ""},
		{"http://receiver.internal/hook", ""},
		{"http://hooks.example.com/ctx", "must be https"},
		{"ftp://hooks.example.com/", "is not https"},
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

// TestSendRefusesInternalAddressesAndRedirects: an https-looking endpoint
// cannot reach the deployment's own network unless the operator allowed
// its host, a redirect is a failed attempt (never followed), and only a
// prefix of the answer is kept.
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
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	secret, err := NewSecret()
	require.NoError(t, err)
	ctx := context.Background()

	// Plain http to a host that is not allowed: refused before dialling.
	denied := NewSender(Policy{})
	att := denied.Send(ctx, srv.URL+"/ok", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.False(t, att.Accepted())
	require.Contains(t, att.Err, "must be https")
	// A host the operator allowed by name reaches what it resolves to
	// (loopback here), over plain http.
	byName := NewSender(Policy{AllowHosts: []string{"localhost"}})
	att = byName.Send(ctx, "http://localhost:"+u.Port()+"/ok", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.True(t, att.Accepted(), "an allowed host name reaches what it resolves to: %s", att.Err)
	require.Len(t, att.Prefix, PrefixBytes)

	allowed := NewSender(Policy{AllowHosts: []string{u.Hostname()}})
	att = allowed.Send(ctx, srv.URL+"/redirect", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.False(t, att.Accepted())
	require.Equal(t, http.StatusFound, att.Code)
	require.Contains(t, att.Err, "redirects are not followed")
	att = allowed.Send(ctx, srv.URL+"/fail", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.Equal(t, http.StatusInternalServerError, att.Code)
	require.False(t, att.Accepted())
	require.EqualValues(t, 3, hits.Load(), "the redirect was not followed")

	// https to an internal address that is not allowed: the dialler
	// refuses after resolution.
	tls := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(tls.Close)
	att = denied.Send(ctx, tls.URL+"/ok", "msg_1", []string{secret}, []byte(`{}`), time.Now())
	require.False(t, att.Accepted())
	require.Contains(t, att.Err, "internal address")
	require.EqualValues(t, 3, hits.Load(), "nothing reached the internal server")
}
