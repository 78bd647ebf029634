package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ctxcompact/orchestrator/internal/webhook"
)

// TestWebhookRegistrationChecksHostAndPort: WEBHOOK_ALLOW_HOSTS entries
// are host:port; registering an endpoint on a port the operator did not
// allow (the database's, the API's) is a 400 naming url, a bare host
// allowing 80 and 443 only.
func TestWebhookRegistrationChecksHostAndPort(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(d *Deps) {
		d.Gateway.WebhookPolicy = webhook.Policy{AllowHosts: []string{"127.0.0.1:9000", "localhost"}}
	})
	for _, u := range []string{"http://127.0.0.1:5432/", "https://127.0.0.1:8080/hook", "http://localhost:9000/hook", "https://10.0.0.5/hook", "http://[::1]:9000/"} {
		var got errorAnswer
		resp := f.do(t, "POST", "/v1/webhooks", f.keyA, []byte(`{"url":"`+u+`"}`), &got)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, u)
		require.Equal(t, "url", got.Error.Field, u)
	}
	for _, u := range []string{"http://127.0.0.1:9000/hook", "http://localhost/hook"} {
		resp := f.do(t, "POST", "/v1/webhooks", f.keyA, []byte(`{"url":"`+u+`"}`), nil)
		require.Equal(t, http.StatusCreated, resp.StatusCode, u)
	}
}
