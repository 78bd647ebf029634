"""Integration check of the Python client against a running server, run by
e2e/clients_test.go (TestClientsIntegration) with:

  CTXCOMPACT_URL, CTXCOMPACT_API_KEY  the server and a tenant's key
  CTXCOMPACT_CONVERSATION             a conversation file (OpenAI chat)
  CTXCOMPACT_SESSION                  the session to use

Submit (202), wait, output, submit again with wait_seconds (200, the same
run), list offloads, recover one (whole, a slice, past the end), search
and read a hit back, error answers. Exits non-zero on any failure.
"""

import json
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ctxcompact import ApiError, Client, RawJSON, is_final  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    url, key = os.environ["CTXCOMPACT_URL"], os.environ["CTXCOMPACT_API_KEY"]
    session = os.environ.get("CTXCOMPACT_SESSION", "py-client")
    with open(os.environ["CTXCOMPACT_CONVERSATION"], "rb") as f:
        conv = f.read()
    c = Client(url, key)
    event = dict(event_id="ev-" + session, model="gpt-4o", context_limit=200000, preset="offload-compact",
                 overrides={"offload": {"trigger_usage": 0, "min_tokens": 300}})

    # Submit without waiting: 202 with the run id.
    a = c.submit_event(session, RawJSON(conv), **event)
    check(a.http_status == 202 and a.accepted is not None, "202 expected, got %d" % a.http_status)
    check(a.accepted["status_url"] == "/v1/runs/" + a.run_id, "status_url %r" % a.accepted)
    check(a.accepted.get("existing") is False, "a new event: %r" % a.accepted)

    # Wait for it.
    d = c.wait_final(a.run_id, timeout=240)
    run = d["run"]
    check(run["id"] == a.run_id and run["session"] == session, "run %r" % run)
    check(is_final(run["status"]) and run["status"] == "succeeded", "run %s: %s %s" % (
        a.run_id, run["status"], run.get("error")))
    check(run.get("preset") == "offload-compact", "preset %r" % run.get("preset"))
    # The run's answer carries the finished run's outcome too.
    check(d.get("run_id") == a.run_id and d.get("status") == "succeeded", "outcome %r %r" % (d.get("run_id"), d.get("status")))

    # Its output parses as JSON, in the caller's format.
    out = json.loads(c.get_output(a.run_id))
    check(isinstance(out.get("messages"), list) and out["messages"], "output has messages")
    check("recover_context" in json.dumps(out), "the output names offloads to recover")

    # The same event again, waiting: 200 with the same run's result.
    r = c.submit_event(session, RawJSON(conv), wait_seconds=60, **event)
    check(r.http_status == 200 and r.result is not None, "200 expected, got %d" % r.http_status)
    res = r.result
    check(res["run_id"] == a.run_id and res.get("existing") is True, "the same run: %r" % res.get("run_id"))
    check(res["status"] == "succeeded" and res.get("format") == "openai", "result %s %s" % (res["status"], res.get("format")))
    check(res.get("tokens_after", 0) < res.get("tokens_before", 0), "tokens %r -> %r" % (
        res.get("tokens_before"), res.get("tokens_after")))
    check(any(p.get("applied") for p in res.get("passes", [])), "a pass applied: %r" % res.get("passes"))
    check(res.get("conversation") == out, "the result's conversation is the output")

    # Recovery: the live offloads, one read back.
    offloads = c.list_offloads(session)
    check(len(offloads) > 0, "offloads listed")
    o = offloads[0]
    check(re.fullmatch(r"[0-9a-f]{64}", o["id"]) is not None and o.get("tokens", 0) > 0, "offload %r" % o)
    check(o["id"] in json.dumps(out), "the output names offload %s" % o["id"])
    rec = c.recover(session, o["id"])
    check(rec.text.strip() != "", "recovered text is empty")
    check(rec.total_lines is not None and rec.total_lines > 0, "X-Total-Lines %r" % rec.total_lines)
    part = c.recover(session, o["id"], lines="1-1")
    check(part.lines is not None and part.text and rec.text.startswith(part.text.rstrip("\n")), "lines 1-1: %r" % part)
    try:
        c.recover(session, o["id"], lines="%d-%d" % (rec.total_lines + 1, rec.total_lines + 5))
        raise AssertionError("a range past the end answered 200")
    except ApiError as e:
        check(e.status == 416 and e.code == "range_not_satisfiable" and e.total_lines == rec.total_lines,
              "416: %s" % e)

    # Search finds the recovered text, and a hit reads back.
    words = re.findall(r"[A-Za-z_]{6,}", rec.text)
    check(words, "a word to search for in %r" % rec.text[:200])
    found = c.search(session, words[0], limit=10)
    hits = found.get("hits") or []
    check(hits, "no hit for %r" % words[0])
    check(all(h.get("kind") in ("offload", "archive") for h in hits), "hit kinds %r" % hits)
    with_id = [h for h in hits if h.get("id")]
    check(with_id, "a hit with an id: %r" % hits)
    back = c.recover(session, with_id[0]["id"])
    check(words[0].lower() in back.text.lower(), "hit %r reads back" % with_id[0])

    # Errors carry the API's code.
    for call, status, code in (
        (lambda: c.wait_run("no-such-run", wait=0), 404, "not_found"),
        (lambda: c.recover(session, "0" * 64), 404, "not_found"),
        (lambda: Client(url, "wrong-key-0123456789").list_offloads(session), 401, "unauthorized"),
        (lambda: c.submit_event(session, {"messages": []}, event_id="ev-" + session, wait_seconds=0), 409, "conflict"),
    ):
        try:
            call()
            raise AssertionError("%d %s expected, got success" % (status, code))
        except ApiError as e:
            check((e.status, e.code) == (status, code), "%d %s expected, got %s" % (status, code, e))

    print("python client: ok (run %s, %d offloads, %d hits)" % (a.run_id, len(offloads), len(hits)))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
