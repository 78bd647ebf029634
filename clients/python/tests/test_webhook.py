"""verify_webhook against a vector the reference library (standardwebhooks
1.1.1, npm) signed, and against tampering. No network."""

import base64
import hashlib
import hmac
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ctxcompact import TOLERANCE_SECONDS, WebhookVerificationError, verify_webhook  # noqa: E402

# Signed by the reference library:
#   new Webhook(SECRET).sign(MSG_ID, new Date(TS * 1000), BODY)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
TS = 1700000000
BODY = '{"type":"run.finished","data":{"run_id":"r-1","status":"succeeded"}}'
SIGNATURE = "v1,Kxy1ml2KTKEpQublADUr+2qx3BQMu+vVWCA96QEMhz4="


def headers(sig=SIGNATURE, ts=TS, msg_id=MSG_ID):
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}


def sign(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, ("%s.%d.%s" % (msg_id, ts, body)).encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


class VerifyWebhookTest(unittest.TestCase):
    def test_reference_vector(self):
        payload = verify_webhook(SECRET, headers(), BODY, now=TS)
        self.assertEqual({"type": "run.finished", "data": {"run_id": "r-1", "status": "succeeded"}}, payload)
        # Bytes body, header names in any case, within the tolerance.
        h = {"Webhook-Id": MSG_ID, "WEBHOOK-TIMESTAMP": str(TS), "Webhook-Signature": SIGNATURE}
        self.assertEqual(payload, verify_webhook(SECRET, h, BODY.encode(), now=TS + TOLERANCE_SECONDS - 1))
        self.assertEqual(payload, verify_webhook(SECRET, h, BODY.encode(), now=TS - TOLERANCE_SECONDS + 1))

    def test_secret_without_prefix(self):
        self.assertTrue(verify_webhook(SECRET[len("whsec_"):], headers(), BODY, now=TS))

    def test_one_of_several_signatures(self):
        other = sign("whsec_" + base64.b64encode(b"another key").decode(), MSG_ID, TS, BODY)
        sig = " ".join(["v1a,ignoredAsymmetric", other, SIGNATURE])
        self.assertTrue(verify_webhook(SECRET, headers(sig=sig), BODY, now=TS))

    def test_rejects(self):
        wrong_secret = "whsec_" + base64.b64encode(b"not the secret").decode()
        cases = {
            "tampered body": (SECRET, headers(), BODY.replace("succeeded", "failed"), TS),
            "tampered id": (SECRET, headers(msg_id="msg_other"), BODY, TS),
            "tampered timestamp": (SECRET, headers(ts=TS + 1), BODY, TS),
            "old timestamp": (SECRET, headers(), BODY, TS + TOLERANCE_SECONDS + 1),
            "future timestamp": (SECRET, headers(), BODY, TS - TOLERANCE_SECONDS - 1),
            "wrong secret": (wrong_secret, headers(), BODY, TS),
            "not base64 secret": ("whsec_!!!", headers(), BODY, TS),
            "wrong version": (SECRET, headers(sig=SIGNATURE.replace("v1,", "v2,")), BODY, TS),
            "no signature": (SECRET, headers(sig=""), BODY, TS),
            "bad timestamp": (SECRET, headers(ts="soon"), BODY, TS),
            "missing header": (SECRET, {"webhook-id": MSG_ID, "webhook-timestamp": str(TS)}, BODY, TS),
        }
        for name, (secret, h, body, now) in cases.items():
            with self.subTest(name):
                with self.assertRaises(WebhookVerificationError):
                    verify_webhook(secret, h, body, now=now)

    def test_signed_but_not_json(self):
        body = "not json"
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(SECRET, headers(sig=sign(SECRET, MSG_ID, TS, body)), body, now=TS)

    def test_now_by_default(self):
        import time
        ts = int(time.time())
        self.assertTrue(verify_webhook(SECRET, headers(sig=sign(SECRET, MSG_ID, ts, BODY), ts=ts), BODY))
        old = ts - TOLERANCE_SECONDS - 60
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(SECRET, headers(sig=sign(SECRET, MSG_ID, old, BODY), ts=old), BODY)


if __name__ == "__main__":
    unittest.main()
