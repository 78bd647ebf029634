"""Webhook verification per the Standard Webhooks specification
(https://www.standardwebhooks.com)."""

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional, Union

from .errors import WebhookVerificationError

# TOLERANCE_SECONDS: a timestamp further than this from now is refused
# (a replay, or a clock far off).
TOLERANCE_SECONDS = 5 * 60

_SECRET_PREFIX = "whsec_"


def verify_webhook(secret: str, headers: Mapping[str, Any], body: Union[bytes, str],
                   now: Optional[float] = None) -> Any:
    """Verifies a webhook and returns its parsed JSON payload.

    secret is the endpoint's secret ("whsec_" + base64). headers is any
    mapping of the request's headers (looked up case-insensitively):
    webhook-id, webhook-timestamp (unix seconds) and webhook-signature (a
    space-separated list of "v1,<base64>"). body is the raw request body,
    exactly as received. Raises WebhookVerificationError unless one v1
    signature is HMAC-SHA256(secret, "{id}.{timestamp}.{body}") and the
    timestamp is within 5 minutes of now.
    """
    key = _secret_key(secret)
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    sigs = _header(headers, "webhook-signature")
    try:
        timestamp = int(ts)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp %r is not unix seconds" % ts) from None
    now = time.time() if now is None else now
    if timestamp < now - TOLERANCE_SECONDS:
        raise WebhookVerificationError("webhook-timestamp is too old")
    if timestamp > now + TOLERANCE_SECONDS:
        raise WebhookVerificationError("webhook-timestamp is too new")
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    signed = msg_id.encode("utf-8") + b"." + ts.encode("utf-8") + b"." + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    ok = False
    for sig in sigs.split(" "):
        version, _, value = sig.partition(",")
        if version != "v1":
            continue
        # Compare every v1 signature (no early exit) in constant time.
        if hmac.compare_digest(value.encode("utf-8"), expected):
            ok = True
    if not ok:
        raise WebhookVerificationError("no matching signature")
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise WebhookVerificationError("payload is not JSON: %s" % e) from None


def _secret_key(secret: str) -> bytes:
    s = secret[len(_SECRET_PREFIX):] if secret.startswith(_SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not base64 (whsec_...)") from None
    if not key:
        raise WebhookVerificationError("the secret is empty")
    return key


def _header(headers: Mapping[str, Any], name: str) -> str:
    v: Any = None
    get = getattr(headers, "get", None)
    if get is not None:
        v = get(name)
    if v is None:
        for k in headers:
            if isinstance(k, str) and k.lower() == name:
                v = headers[k]
                break
    if isinstance(v, (list, tuple)):
        v = " ".join(str(x) for x in v)
    if isinstance(v, bytes):
        v = v.decode("latin-1")
    if not v:
        raise WebhookVerificationError("missing header %s" % name)
    return str(v)
