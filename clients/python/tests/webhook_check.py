"""Runs verify_webhook over cases read as JSON on stdin, for
e2e/node/webhook-crosscheck.mjs: [{"name", "secret", "headers", "body"}].
Prints [{"name", "ok", "payload"?, "error"?}] on stdout."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ctxcompact import WebhookVerificationError, verify_webhook  # noqa: E402


def main():
    out = []
    for case in json.load(sys.stdin):
        try:
            payload = verify_webhook(case["secret"], case["headers"], case["body"].encode("utf-8"))
            out.append({"name": case["name"], "ok": True, "payload": payload})
        except WebhookVerificationError as e:
            out.append({"name": case["name"], "ok": False, "error": str(e)})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
