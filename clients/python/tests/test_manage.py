"""The management calls (erasure, retention, webhooks, replay, promote)
and GoneError, without a network: a fake urlopen answers."""

import json
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ctxcompact import ApiError, BaseHeldError, Client, GoneError  # noqa: E402
from test_errors import FakeResponse, http_error  # noqa: E402


class GoneErrorTest(unittest.TestCase):
    def test_a_410_names_the_erasure(self):
        body = b'{"error":{"code":"gone","message":"session s1 was erased","erasure_id":"era-1",' \
               b'"erased_at":"2026-11-27T03:00:00Z"}}'
        c = Client("http://api", "k")
        with mock.patch("urllib.request.urlopen", side_effect=http_error(410, body)) as m:
            with self.assertRaises(GoneError) as cm:
                c.session_status("s1")
        e = cm.exception
        self.assertIsInstance(e, ApiError)
        self.assertEqual((410, "gone", "era-1", "2026-11-27T03:00:00Z"), (e.status, e.code, e.erasure_id, e.erased_at))
        self.assertEqual(1, m.call_count, "a 410 is not retried")

    def test_another_410_is_an_api_error(self):
        e = ApiError.from_response(410, b"gone away")
        self.assertNotIsInstance(e, GoneError)
        self.assertEqual("http_410", e.code)


class BaseHeldErrorTest(unittest.TestCase):
    def test_a_409_on_the_base_names_the_holding_run(self):
        body = b'{"error":{"code":"conflict","field":"base.run_id","run_id":"run-b",' \
               b'"message":"the output of run run-a is already continued by run run-b"}}'
        e = ApiError.from_response(409, body)
        self.assertIsInstance(e, BaseHeldError)
        self.assertEqual(("base.run_id", "run-b"), (e.field, e.run_id))

    def test_a_409_on_the_event_id_is_not(self):
        body = b'{"error":{"code":"conflict","field":"event_id","run_id":"run-a","message":"reused"}}'
        self.assertNotIsInstance(ApiError.from_response(409, body), BaseHeldError)


class ManageTest(unittest.TestCase):
    def call(self, answers, fn):
        with mock.patch("urllib.request.urlopen", side_effect=answers) as m:
            out = fn()
        return out, [c[0][0] for c in m.call_args_list]

    def test_add_webhook_says_whether_it_created(self):
        c = Client("http://api", "k")
        reg, reqs = self.call([FakeResponse(201, b'{"id":"wh-1","url":"https://h/x","secret":"whsec_eA=="}')],
                              lambda: c.add_webhook("https://h/x", description="mine"))
        self.assertTrue(reg.created)
        self.assertEqual("whsec_eA==", reg.endpoint["secret"])
        self.assertEqual(("POST", "http://api/v1/webhooks"), (reqs[0].get_method(), reqs[0].full_url))
        self.assertEqual({"url": "https://h/x", "description": "mine"}, json.loads(reqs[0].data))
        reg, _ = self.call([FakeResponse(200, b'{"id":"wh-1","url":"https://h/x"}')], lambda: c.add_webhook("https://h/x"))
        self.assertFalse(reg.created)
        self.assertEqual("wh-1", reg.endpoint["id"])
        self.assertNotIn("secret", reg.endpoint)

    def test_routes_and_methods(self):
        c = Client("http://api", "k")
        for fn, answer, method, url in (
            (lambda: c.delete_webhook("wh/1"), b"", "DELETE", "http://api/v1/webhooks/wh%2F1"),
            (lambda: c.rotate_webhook("wh-1"), b'{"id":"wh-1"}', "POST", "http://api/v1/webhooks/wh-1/rotate"),
            (lambda: c.list_webhooks(), b'{"webhooks":[]}', "GET", "http://api/v1/webhooks"),
            (lambda: c.erase_session("s1"), b'{"id":"e1","status":"erasing"}', "DELETE", "http://api/v1/sessions/s1"),
            (lambda: c.get_erasure("e1"), b'{"id":"e1","status":"erased"}', "GET", "http://api/v1/erasures/e1"),
            (lambda: c.get_retention(), b'{"days":0,"set":false}', "GET", "http://api/v1/retention"),
            (lambda: c.set_retention(30), b'{"days":30,"set":true}', "PUT", "http://api/v1/retention"),
            (lambda: c.unset_retention(), b'{"days":0,"set":false}', "DELETE", "http://api/v1/retention"),
            (lambda: c.promote_replay("r-2"), b'{"run_id":"r-2","existing":false}', "POST", "http://api/v1/runs/r-2/promote"),
            (lambda: c.list_deliveries("r-2"), b'{"deliveries":[]}', "GET", "http://api/v1/runs/r-2/deliveries"),
            (lambda: c.redeliver("d-1"), b'{"delivery_id":"d-1"}', "POST", "http://api/v1/deliveries/d-1/redeliver"),
            (lambda: c.session_status("s1"), b'{"session":"s1"}', "GET", "http://api/v1/sessions/s1/status"),
            (lambda: c.list_runs(session="s1", limit=2), b'{"runs":[]}', "GET", "http://api/v1/runs?session=s1&limit=2"),
            (lambda: c.export_runs("csv", steps=True), b"id\n", "GET", "http://api/v1/export?format=csv&steps=true"),
            (lambda: c.get_diff("r-1"), b'{"run_id":"r-1"}', "GET", "http://api/v1/runs/r-1/diff"),
            (lambda: c.list_watermarks("s1"), b'{"current":""}', "GET", "http://api/v1/sessions/s1/watermarks"),
            (lambda: c.inspect("s1", {"messages": []}), b'{"format":"openai"}', "POST", "http://api/v1/sessions/s1/inspect"),
            (lambda: c.compress_result("t", "offload"), b'{"mode":"offload","status":"stored"}', "POST",
             "http://api/v1/results:compress"),
            (lambda: c.compact("s1", {"messages": []}), b'{"run_id":"r","status":"succeeded"}', "POST",
             "http://api/v1/sessions/s1/compact"),
            (lambda: c.replay_failed("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), b'{"runs":[]}', "POST",
             "http://api/v1/replays"),
        ):
            _, reqs = self.call([FakeResponse(200, answer)], fn)
            self.assertEqual((method, url), (reqs[0].get_method(), reqs[0].full_url))

    def test_replay_fixes_its_request_id_before_the_first_attempt(self):
        c = Client("http://api", "k", max_retries=1, max_retry_wait=0)
        answers = [http_error(503, b'{"error":{"code":"unavailable","message":"down"}}'),
                   FakeResponse(202, b'{"run_id":"r-3","existing":false,"status_url":"/v1/runs/r-3"}')]
        with mock.patch("time.sleep"):
            sub, reqs = self.call(answers, lambda: c.replay_run("r-1", context_limit=200000))
        self.assertEqual("r-3", sub["run_id"])
        first, second = json.loads(reqs[0].data), json.loads(reqs[1].data)
        self.assertTrue(first["request_id"].startswith("rpl-"))
        self.assertEqual(first, second, "the retry is the same replay")
        self.assertEqual(200000, first["context_limit"])

    def test_rotate_is_not_retried_after_a_connection_error(self):
        import urllib.error
        c = Client("http://api", "k", max_retries=3, max_retry_wait=0)
        with mock.patch("urllib.request.urlopen", side_effect=urllib.error.URLError("reset")) as m:
            with self.assertRaises(Exception):
                c.rotate_webhook("wh-1")
        self.assertEqual(1, m.call_count)


if __name__ == "__main__":
    unittest.main()
