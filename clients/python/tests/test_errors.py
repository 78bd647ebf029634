"""ApiError decoding and the client's error path, without a network: a
fake urlopen answers."""

import io
import json
import os
import sys
import unittest
import urllib.error
from email.message import Message
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ctxcompact  # noqa: E402
from ctxcompact import ApiError, Client, CtxcompactError, RawJSON  # noqa: E402


def http_error(status, body, headers=None):
    h = Message()
    for k, v in (headers or {}).items():
        h[k] = v
    return urllib.error.HTTPError("http://x/y", status, "status", h, io.BytesIO(body))


class FakeResponse:
    def __init__(self, status, body, headers=None):
        self.status = status
        self._body = body
        self.headers = Message()
        for k, v in (headers or {}).items():
            self.headers[k] = v

    def read(self):
        return self._body

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class ApiErrorTest(unittest.TestCase):
    def test_decodes_the_common_shape(self):
        body = json.dumps({"error": {"code": "bad_request", "message": "conversation: bad tool_use_id",
                                     "field": "conversation", "index": 3, "path": "content[0].tool_use_id"}})
        e = ApiError.from_response(400, body.encode())
        self.assertEqual((400, "bad_request", "conversation: bad tool_use_id", "conversation", 3,
                          "content[0].tool_use_id"), (e.status, e.code, e.message, e.field, e.index, e.path))
        self.assertIn("400 bad_request (conversation[3].content[0].tool_use_id)", str(e))

    def test_retry_after_and_total_lines(self):
        body = b'{"error":{"code":"range_not_satisfiable","message":"the text has 12 lines","field":"lines"}}'
        e = ApiError.from_response(416, body, {"X-Total-Lines": "12"})
        self.assertEqual(("range_not_satisfiable", "lines", 12, None), (e.code, e.field, e.total_lines, e.retry_after))
        e = ApiError.from_response(503, b'{"error":{"code":"unavailable","message":"postgres"}}', {"Retry-After": "5"})
        self.assertEqual((503, "unavailable", 5, None, None), (e.status, e.code, e.retry_after, e.field, e.index))
        self.assertEqual("503 unavailable: postgres", str(e))

    def test_not_the_common_shape(self):
        e = ApiError.from_response(502, b"<html>Bad Gateway</html>\n")
        self.assertEqual(("http_502", "<html>Bad Gateway</html>"), (e.code, e.message))
        e = ApiError.from_response(500, b'{"error":"a string"}')
        self.assertEqual("http_500", e.code)


class ClientErrorTest(unittest.TestCase):
    def test_error_answer_raises_api_error(self):
        c = Client("http://api", "k")
        err = http_error(404, b'{"error":{"code":"not_found","message":"run not found"}}')
        with mock.patch("urllib.request.urlopen", side_effect=err) as m:
            with self.assertRaises(ApiError) as cm:
                c.wait_run("r-1", wait=0)
        self.assertEqual((404, "not_found", "run not found"), (cm.exception.status, cm.exception.code, cm.exception.message))
        self.assertEqual(1, m.call_count, "a 404 is not retried")
        req = m.call_args[0][0]
        self.assertEqual("Bearer k", req.get_header("Authorization"))
        self.assertEqual("http://api/v1/runs/r-1", req.full_url)

    def test_retries_429_after_retry_after(self):
        c = Client("http://api", "k", max_retries=2, max_retry_wait=0)
        answers = [http_error(429, b'{"error":{"code":"rate_limited","message":"slow down"}}', {"Retry-After": "1"}),
                   FakeResponse(202, b'{"run_id":"r-9","existing":false,"status":"pending","status_url":"/v1/runs/r-9"}')]
        with mock.patch("urllib.request.urlopen", side_effect=answers) as m, mock.patch("time.sleep"):
            a = c.submit_event("s/1", RawJSON('{"messages": []}'), preset="offload-compact")
        self.assertEqual(2, m.call_count)
        self.assertFalse(a.finished)
        self.assertEqual(("r-9", 202), (a.run_id, a.http_status))
        first, second = m.call_args_list[0][0][0], m.call_args_list[1][0][0]
        self.assertEqual("http://api/v1/sessions/s%2F1/events", first.full_url)
        self.assertEqual(first.data, second.data, "the retry is the same event")
        body = json.loads(first.data)
        self.assertTrue(body["event_id"].startswith("evt-"))
        self.assertEqual({"messages": []}, body["conversation"])
        self.assertIn(b'"conversation": {"messages": []}', first.data, "RawJSON is sent as it is")

    def test_gives_up_after_max_retries(self):
        c = Client("http://api", "k", max_retries=1, max_retry_wait=0)
        errs = [http_error(503, b'{"error":{"code":"unavailable","message":"down"}}') for _ in range(2)]
        with mock.patch("urllib.request.urlopen", side_effect=errs) as m, mock.patch("time.sleep"):
            with self.assertRaises(ApiError) as cm:
                c.search("s", "q")
        self.assertEqual(2, m.call_count)
        self.assertEqual("unavailable", cm.exception.code)

    def test_output_sha_mismatch(self):
        c = Client("http://api", "k")
        resp = FakeResponse(200, b'{"messages":[]}', {"X-Content-SHA256": "00" * 32})
        with mock.patch("urllib.request.urlopen", return_value=resp):
            with self.assertRaises(CtxcompactError):
                c.get_output("r-1")

    def test_finished_answer(self):
        c = Client("http://api", "k")
        resp = FakeResponse(200, b'{"run_id":"r-2","status":"succeeded","conversation":{"messages":[]}}')
        with mock.patch("urllib.request.urlopen", return_value=resp):
            a = c.submit_event("s", {"messages": []}, event_id="e-1", wait_seconds=30)
        self.assertTrue(a.finished)
        self.assertEqual("succeeded", a.result["status"])
        self.assertTrue(ctxcompact.is_final(a.result["status"]))


if __name__ == "__main__":
    unittest.main()
