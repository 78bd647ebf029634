package llm

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPingSaysWhetherTheEndpointIsReachable: an endpoint that answers at
// all is reachable, even with an error (a server without /models); a
// closed port is not, and the error names what failed.
func TestPingSaysWhetherTheEndpointIsReachable(t *testing.T) {
	t.Parallel()
	answers := func(status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())

	for _, tc := range []struct {
		name, url string
		reachable bool
	}{
		{"models listed", answers(http.StatusOK), true},
		{"no /models route", answers(http.StatusNotFound), true},
		{"closed port", closed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := NewOpenAI(Config{BaseURL: tc.url, APIKey: "k", Model: "m", Timeout: 5 * time.Second})
			require.NoError(t, err)
			err = o.Ping(t.Context())
			if tc.reachable {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "reach the summarizer endpoint")
		})
	}
}
