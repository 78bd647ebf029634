package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a webhook's timestamp may be from now.
const WebhookTolerance = 5 * time.Minute

// ErrWebhookSignature is wrapped by every VerifyWebhook failure.
var ErrWebhookSignature = errors.New("webhook does not verify")

// VerifyWebhook checks a completion webhook as the Standard Webhooks
// specification (https://www.standardwebhooks.com) says: secret is the
// endpoint's ("whsec_" + base64), h the request's headers (webhook-id,
// webhook-timestamp in unix seconds, webhook-signature a space-separated
// list of "v1,<base64>"), body the raw body exactly as received. One v1
// signature must be HMAC-SHA256 of "id.timestamp.body" keyed by the
// secret's decoded bytes, and the timestamp within WebhookTolerance of
// now. During a rotation both secrets sign: either verifies.
func VerifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return fmt.Errorf("%w: the secret is not whsec_ followed by base64", ErrWebhookSignature)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrWebhookSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return fmt.Errorf("%w: webhook-timestamp is more than %s from now", ErrWebhookSignature, WebhookTolerance)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	ok := false
	for _, sig := range strings.Fields(sigs) {
		version, value, _ := strings.Cut(sig, ",")
		// Every v1 signature is compared, in constant time.
		if version == "v1" && hmac.Equal([]byte(value), want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: no signature matches", ErrWebhookSignature)
	}
	return nil
}
