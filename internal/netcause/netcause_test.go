package netcause

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOf: real failed calls get the cause a reader expects.
func TestOf(t *testing.T) {
	t.Parallel()
	// A port that was just closed refuses.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	// A server that never answers times out.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	// A plain-HTTP server answers a TLS hello with what is not TLS.
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(plain.Close)

	get := func(url string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", get(closed, 5*time.Second), Refused},
		{"timeout", get(hang.URL, 100*time.Millisecond), Timeout},
		{"dns", get("http://no-such-host.invalid/", 5*time.Second), DNS},
		{"tls", get("https://"+plain.Listener.Addr().String(), 5*time.Second), TLS},
		{"canceled", context.Canceled, Canceled},
		{"other", errors.New("something else"), Connection},
		{"none", nil, ""},
	} {
		require.Equal(t, tc.want, Of(tc.err), "%s: %v", tc.name, tc.err)
	}
	require.Equal(t, "http 503", HTTP(503))
}
