"""Integration check of the Python client against a running server, run by
e2e/clients_test.go (TestClientsIntegration) with:

  CTXCOMPACT_URL, CTXCOMPACT_API_KEY  the server and a tenant's key
  CTXCOMPACT_CONVERSATION             a conversation file (OpenAI chat)
  CTXCOMPACT_SESSION                  the session to use
  CTXCOMPACT_WEBHOOK_URL              an endpoint URL the server allows

Submit (202), wait, output, submit again with wait_seconds (200, the same
run), the original back byte for byte, list offloads, recover one (whole,
a slice, past the end), search and read a hit back, an incremental event,
the session's status; a run over its limit with its handoff, replayed
with a larger limit and the replay promoted; a session erased, its
tombstone read and the session then gone (410); the retention set and
unset; a webhook registered twice (the same endpoint), listed, rotated
and deleted; error answers. Exits non-zero on any failure.
"""

import json
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import time  # noqa: E402

from ctxcompact import ApiError, Client, GoneError, RawJSON, is_final  # noqa: E402


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

    # The original, byte for byte.
    check(c.get_original(a.run_id) == conv, "the original reads back byte for byte")

    # An incremental event: the session's latest output and the messages
    # appended since (the answers to its last calls, then a user turn).
    appended = [{"role": "tool", "tool_call_id": tc["id"], "content": "done"}
                for tc in (out["messages"][-1].get("tool_calls") or [])]
    appended.append({"role": "user", "content": "Go on with the fix."})
    inc = c.submit_event(session, base={"run_id": a.run_id, "sha256": res["output_sha256"]}, messages=appended,
                         model="gpt-4o", context_limit=200000, preset="offload-compact", wait_seconds=120)
    check(inc.result is not None and inc.result["status"] == "succeeded" and inc.run_id != a.run_id,
          "incremental event: %r" % (inc.result or inc.accepted))
    grown = json.loads(c.get_original(inc.run_id))
    check(grown["messages"][-1] == appended[-1], "the incremental run's original ends with the appended message")

    # The session's status names its latest run.
    st = c.session_status(session)
    check(st.get("session") == session and st.get("last_run_id") == inc.run_id, "status %r" % st)
    check(st.get("offloads", 0) > 0 and st.get("runs", {}).get("succeeded") == 2, "status figures %r" % st)

    # No webhook was registered while the runs ran: no delivery.
    check(c.list_deliveries(a.run_id) == [], "deliveries of %s" % a.run_id)

    audit(c, session, a.run_id, inc.run_id, conv)
    replay_and_promote(c, session + "-over", conv)
    erase(c, session + "-erase", conv)
    retention(c)
    webhooks(c)

    # Errors carry the API's code.
    for call, status, code in (
        (lambda: c.wait_run("no-such-run", wait=0), 404, "not_found"),
        (lambda: c.recover(session, "0" * 64), 404, "not_found"),
        (lambda: Client(url, "wrong-key-0123456789").list_offloads(session), 401, "unauthorized"),
        (lambda: c.submit_event(session, {"messages": []}, event_id="ev-" + session, wait_seconds=0), 409, "conflict"),
        (lambda: c.redeliver("no-such-delivery"), 404, "not_found"),
        (lambda: c.promote_replay(a.run_id), 409, "conflict"),
    ):
        try:
            call()
            raise AssertionError("%d %s expected, got success" % (status, code))
        except ApiError as e:
            check((e.status, e.code) == (status, code), "%d %s expected, got %s" % (status, code, e))

    print("python client: ok (run %s, %d offloads, %d hits)" % (a.run_id, len(offloads), len(hits)))


def audit(c, session, first, second, conv):
    """The audit and operator routes: runs listed (a page at a time) and
    exported, a diff, the watermarks, an inspection, a tool result
    offloaded and read back, a manual compaction, a bulk replay of no
    failed run."""
    page = c.list_runs(session=session, limit=1)
    check([r["id"] for r in page.get("runs", [])] == [second] and page.get("next_after") == second, "page 1 %r" % page)
    page = c.list_runs(session=session, after=page["next_after"])
    check([r["id"] for r in page.get("runs", [])] == [first], "page 2 %r" % page)
    lines = [json.loads(line) for line in c.export_runs(session=session).splitlines() if line.strip()]
    check(sorted(r["id"] for r in lines) == sorted([first, second]), "export %r" % [r.get("id") for r in lines])
    d = c.get_diff(first)
    check(d.get("run_id") == first and d.get("changes") and d.get("replaced", 0) > 0, "diff %r" % {k: d.get(k) for k in (
        "run_id", "kept", "replaced", "removed")})
    w = c.list_watermarks(session)
    check(isinstance(w.get("watermarks"), list) and isinstance(w.get("current"), str), "watermarks %r" % w)
    ins = c.inspect(session, RawJSON(conv), model="gpt-4o", context_limit=20000, preset="three-tier")
    check(ins.get("format") == "openai" and ins.get("messages", 0) > 0 and ins.get("report", {}).get("level"),
          "inspection %r" % ins)
    text = "".join("line %d of a long tool result\n" % i for i in range(3000))
    off = c.compress_result(text, "offload", tool_name="bash", session=session + "-results")
    res = off.result
    check(res is not None and res["mode"] == "offload" and re.fullmatch(r"[0-9a-f]{64}", res.get("id", "")) is not None
          and res["id"] in res.get("reference", ""), "offloaded %r" % (res or off.accepted))
    check(c.recover(session + "-results", res["id"]).text == text, "the offloaded result reads back")
    m = c.compact(session + "-compact", RawJSON(conv), model="gpt-4o", context_limit=200000, wait_seconds=120)
    check(m.result is not None and m.result["status"] == "succeeded", "compact %r" % (m.result or m.accepted))
    check(c.wait_run(m.run_id, wait=0)["run"].get("trigger") == "manual", "a manual event")
    now = time.time()
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    check(c.replay_failed(iso(now - 3600), iso(now + 60), statuses=["failed"]) == [], "no failed run to replay")


def replay_and_promote(c, session, conv):
    """A run over its limit (the conversation and then a user message
    larger than the limit), with its handoff; replayed with a larger limit,
    the replay succeeds and is promoted, once; the session's status names
    it."""
    doc = json.loads(conv)
    msgs = doc["messages"]
    msgs += [{"role": "tool", "tool_call_id": tc["id"], "content": "done"} for tc in (msgs[-1].get("tool_calls") or [])]
    msgs.append({"role": "user", "content": "".join(
        "2025-01-02T12:%02d:%02dZ worker-%d processed job %d in %dms (src/jobs/handler_%d.py)\n"
        % (i // 60 % 60, i % 60, i % 7, i, 10 + i % 90, i % 13) for i in range(400))})
    over = c.submit_event(session, doc, preset="three-tier", model="gpt-4o", context_limit=8000, wait_seconds=120)
    res = over.result
    check(res is not None and res["status"] == "over_limit" and res.get("over_limit_reason"),
          "over_limit expected: %r" % (res or over.accepted))
    check(res.get("handoff") and res.get("handoff_key"), "an over-limit run hands off: %r" % sorted(res))
    check(c.wait_run(over.run_id, wait=0).get("handoff") == res["handoff"], "the run's answer carries the handoff")

    sub = c.replay_run(over.run_id, request_id="rp-" + session, context_limit=200000)
    check(sub.get("existing") is False and sub["run_id"] != over.run_id, "replay %r" % sub)
    again = c.replay_run(over.run_id, request_id="rp-" + session, context_limit=200000)
    check(again["run_id"] == sub["run_id"] and again.get("existing") is True, "the same replay: %r" % again)
    d = c.wait_final(sub["run_id"], timeout=240)
    check(d["run"]["status"] == "succeeded" and d["run"].get("replay_of") == over.run_id, "replay run %r" % d["run"])

    p = c.promote_replay(sub["run_id"])
    check((p["run_id"], p["replay_of"], p["session"], p.get("existing")) == (sub["run_id"], over.run_id, session, False),
          "promotion %r" % p)
    check(c.promote_replay(sub["run_id"]).get("existing") is True, "promoting again answers the same promotion")
    st = c.session_status(session)
    check(st.get("last_run_id") == sub["run_id"] and len(st.get("promotions") or []) == 1, "status %r" % st)


def erase(c, session, conv):
    """A session erased: the erasure is readable until erased, and the
    session is then gone (410) with the erasure's id."""
    r = c.submit_event(session, RawJSON(conv), model="gpt-4o", preset="offload-compact", wait_seconds=120)
    check(r.result is not None and is_final(r.result["status"]), "a run to erase: %r" % (r.result or r.accepted))
    e = c.erase_session(session)
    check(e["session"] == session and e["status"] in ("erasing", "erased") and e.get("id"), "erasure %r" % e)
    deadline = time.monotonic() + 240
    while True:
        got = c.get_erasure(e["id"])
        if got["status"] == "erased":
            break
        check(time.monotonic() < deadline, "erasure %s still %s" % (e["id"], got["status"]))
        time.sleep(0.2)
    check(got["id"] == e["id"] and got.get("runs") == 1 and got.get("finished_at"), "tombstone %r" % got)
    try:
        c.session_status(session)
        raise AssertionError("an erased session's status answered 200")
    except GoneError as g:
        check(g.status == 410 and g.code == "gone" and g.erasure_id == e["id"] and g.erased_at, "gone: %s" % g)


def retention(c):
    """The tenant's retention set, read and unset."""
    check(c.get_retention() == {"days": 0, "set": False}, "no retention at first: %r" % c.get_retention())
    check(c.set_retention(3650) == {"days": 3650, "set": True}, "set")
    check(c.get_retention() == {"days": 3650, "set": True}, "read back")
    check(c.unset_retention() == {"days": 0, "set": False}, "unset")
    check(c.get_retention() == {"days": 0, "set": False}, "read back unset")


def webhooks(c):
    """A webhook registered twice is one endpoint (the second answer
    without its secret); listed, rotated (a new secret), deleted."""
    url = os.environ["CTXCOMPACT_WEBHOOK_URL"]
    first = c.add_webhook(url, description="python client")
    check(first.created and first.endpoint.get("secret", "").startswith("whsec_"), "registered %r" % first)
    second = c.add_webhook(url)
    check(not second.created and second.endpoint["id"] == first.endpoint["id"] and "secret" not in second.endpoint,
          "registered again: %r" % second)
    listed = [w for w in c.list_webhooks() if w["url"] == url]
    check(len(listed) == 1 and listed[0]["id"] == first.endpoint["id"] and "secret" not in listed[0], "listed %r" % listed)
    rotated = c.rotate_webhook(first.endpoint["id"])
    check(rotated.get("secret", "").startswith("whsec_") and rotated["secret"] != first.endpoint["secret"]
          and rotated.get("previous_expires_at"), "rotated %r" % rotated)
    c.delete_webhook(first.endpoint["id"])
    check(all(w["url"] != url for w in c.list_webhooks()), "deleted")
    try:
        c.delete_webhook(first.endpoint["id"])
        raise AssertionError("deleting twice answered 2xx")
    except ApiError as e:
        check(e.status == 404, "deleted twice: %s" % e)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
