// Package webhook signs and sends completion webhooks as the Standard
// Webhooks specification says (https://www.standardwebhooks.com): the
// `webhook-id`, `webhook-timestamp` and `webhook-signature` headers, an
// HMAC-SHA256 over "id.timestamp.body" keyed by the endpoint's secret. It
// also decides which endpoint URLs may be registered and reached.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every secret, as the specification's libraries
// expect.
const SecretPrefix = "whsec_"

// NewSecret returns a fresh endpoint secret: 32 random bytes, base64,
// after SecretPrefix.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// key is the HMAC key of secret: its base64 part, decoded.
func key(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook secret: not whsec_ followed by base64")
	}
	return k, nil
}

// Sign returns the "v1,<base64>" signature of body sent as message id at
// ts under secret.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	k, err := key(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Headers returns the three Standard Webhooks headers of body sent as
// message id at ts, signed with each of secrets (during a rotation the
// old and the new secret both sign, space-separated).
func Headers(id string, ts time.Time, body []byte, secrets ...string) (map[string]string, error) {
	var sigs []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		sig, err := Sign(s, id, ts, body)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, errors.New("webhook: no secret to sign with")
	}
	return map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(ts.Unix(), 10),
		"webhook-signature": strings.Join(sigs, " "),
	}, nil
}

// Tolerance is how far a signed timestamp may be from the receiver's
// clock.
const Tolerance = 5 * time.Minute

// Verify checks the headers of a delivery of body against secret at now:
// the receiver's side, used by the tests and by Go receivers.
func Verify(secret string, headers map[string]string, body []byte, now time.Time) error {
	id, tsText, sigs := headers["webhook-id"], headers["webhook-timestamp"], headers["webhook-signature"]
	if id == "" || tsText == "" || sigs == "" {
		return errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: webhook-timestamp %q is not unix seconds", tsText)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("webhook: timestamp %s is more than %s from now", ts.UTC().Format(time.RFC3339), Tolerance)
	}
	want, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	for _, sig := range strings.Fields(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("webhook: no signature matches")
}
