"""The HTTP client (api/openapi.yaml): standard library only."""

import hashlib
import json
import secrets
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .errors import ApiError, CtxcompactError
from .types import (FINAL_STATUSES, Accepted, CompressResult, Delivery, Diff, Erasure, InspectResult, Offload,
                    PromoteResponse, Redelivered, Retention, RunDetail, RunList, RunResult, SearchResult,
                    SessionStatus, Snapshot, SnapshotConversation, Submitted, WatermarkList, WebhookEndpoint)

_RETRY_STATUSES = (429, 503)


@dataclass
class EventAnswer:
    """What submit_event answers: result when the run finished within
    wait_seconds (200), else accepted (202) and the run goes on: wait_run
    and output get it later."""

    http_status: int
    result: Optional[RunResult] = None
    accepted: Optional[Accepted] = None

    @property
    def run_id(self) -> str:
        a = self.result if self.result is not None else self.accepted
        return (a or {}).get("run_id", "")

    @property
    def finished(self) -> bool:
        return self.result is not None


@dataclass
class CompressAnswer:
    """What compress_result answers: result (200), or accepted (202) when
    a summarize run outlasted wait_seconds."""

    http_status: int
    result: Optional[CompressResult] = None
    accepted: Optional[Accepted] = None


@dataclass
class WebhookRegistration:
    """What add_webhook answers: the endpoint, and whether this call
    created it (201, the endpoint's secret in endpoint["secret"], shown
    once) or found the URL registered already (200, no secret)."""

    endpoint: WebhookEndpoint
    created: bool


@dataclass
class Recovered:
    """What a recover id names: text, with X-Total-Lines (the whole text's
    line count) and X-Lines (the lines answered, with lines=)."""

    text: str
    total_lines: Optional[int] = None
    lines: Optional[str] = None


class RawJSON:
    """A JSON text sent as it is (e.g. a conversation whose bytes the
    archive must keep, whitespace included)."""

    def __init__(self, text: Union[str, bytes]) -> None:
        self.text = text.decode("utf-8") if isinstance(text, bytes) else text


class Client:
    """A client of one deployment with one API key (one tenant).

    Retries 429 and 503 answers after their Retry-After (at most
    max_retries times, each wait capped by max_retry_wait seconds), and
    connection errors: calls are safe to repeat, since submit_event and
    replay_run fix their ids before the first attempt (rotate_webhook and
    redeliver, which are not, are not retried after a connection error).

    Each method that calls the API says its operation on the line above it
    ("# op: METHOD /path"); e2e/clients_test.go checks them against
    api/openapi.yaml.
    """

    def __init__(self, base_url: str, api_key: str, timeout: float = 60.0,
                 max_retries: int = 4, max_retry_wait: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait

    # -- compaction ---------------------------------------------------------

    # op: POST /v1/sessions/{session}/events
    def submit_event(self, session: str, conversation: Any = None, *, event_id: Optional[str] = None,
                     kind: Optional[str] = None, model: Optional[str] = None,
                     context_limit: Optional[int] = None, preset: Optional[str] = None,
                     overrides: Optional[Mapping[str, Any]] = None, conversation_key: Optional[str] = None,
                     base: Optional[Mapping[str, str]] = None, messages: Optional[List[Any]] = None,
                     wait_seconds: Optional[int] = None) -> EventAnswer:
        """POST /v1/sessions/{session}/events.

        conversation is any JSON value (OpenAI, Anthropic or ReAct), or a
        RawJSON to send its text unchanged. event_id makes the submission
        idempotent; None gets a random one. With wait_seconds > 0 the
        request waits for the run: 200 answers its RunResult (with the
        compacted conversation), 202 its Accepted. An incremental event
        gives base ({"run_id", "sha256"} of the session's latest output) and
        messages (those appended since) instead of conversation.
        """
        return self._post_event("/v1/sessions/%s/events" % _seg(session), conversation, (
            ("event_id", event_id or "evt-" + secrets.token_hex(12)), ("kind", kind), ("model", model),
            ("context_limit", context_limit), ("preset", preset), ("overrides", overrides),
            ("conversation_key", conversation_key), ("base", base), ("messages", messages),
            ("wait_seconds", wait_seconds)))

    # op: POST /v1/sessions/{session}/compact
    def compact(self, session: str, conversation: Any = None, *, event_id: Optional[str] = None,
                model: Optional[str] = None, context_limit: Optional[int] = None, preset: Optional[str] = None,
                overrides: Optional[Mapping[str, Any]] = None, conversation_key: Optional[str] = None,
                base: Optional[Mapping[str, str]] = None, messages: Optional[List[Any]] = None,
                wait_seconds: Optional[int] = None) -> EventAnswer:
        """POST /v1/sessions/{session}/compact: the offload-compact design's
        manual /compact, an event of kind manual, answered as submit_event.
        event_id None gets a random one, fixed before the first attempt:
        each call is a new event, and a retry is the same one."""
        return self._post_event("/v1/sessions/%s/compact" % _seg(session), conversation, (
            ("event_id", event_id or "cmp-" + secrets.token_hex(12)), ("model", model),
            ("context_limit", context_limit), ("preset", preset), ("overrides", overrides),
            ("conversation_key", conversation_key), ("base", base), ("messages", messages),
            ("wait_seconds", wait_seconds)))

    def _post_event(self, path: str, conversation: Any, items: Any) -> EventAnswer:
        fields = {k: v for k, v in items if v is not None}
        timeout = self.timeout + (fields.get("wait_seconds") or 0)
        status, data, _ = self._request("POST", path, body=_with_conversation(fields, conversation), timeout=timeout)
        doc = _json(data, "event answer")
        if status == 202:
            return EventAnswer(status, accepted=doc)
        return EventAnswer(status, result=doc)

    # op: POST /v1/sessions/{session}/inspect
    def inspect(self, session: str, conversation: Any = None, *, model: Optional[str] = None,
                context_limit: Optional[int] = None, preset: Optional[str] = None,
                base: Optional[Mapping[str, str]] = None, messages: Optional[List[Any]] = None) -> InspectResult:
        """POST /v1/sessions/{session}/inspect: the status report of the
        conversation sent, and what the preset's deterministic passes and the
        budget ladder would reach; nothing is run or stored. Instead of the
        whole conversation, base ({"run_id", "sha256"} of the session's latest
        output) and messages (appended since) measure the conversation an
        incremental event would make; the answer's tokens and
        trigger_reached say whether to send one."""
        fields = {k: v for k, v in (("model", model), ("context_limit", context_limit), ("preset", preset),
                                    ("base", base), ("messages", messages))
                  if v is not None}
        _, data, _ = self._request("POST", "/v1/sessions/%s/inspect" % _seg(session),
                                   body=_with_conversation(fields, conversation))
        return _json(data, "inspection")

    # op: POST /v1/results:compress
    def compress_result(self, text: str, mode: str, *, tool_name: Optional[str] = None, model: Optional[str] = None,
                        session: Optional[str] = None, overrides: Optional[Mapping[str, Any]] = None,
                        wait_seconds: Optional[int] = None) -> CompressAnswer:
        """POST /v1/results:compress: one large tool result offloaded (mode
        "offload": stored, a reference answered) or summarized ("summarize",
        a run; 202 when it outlasts wait_seconds, wait_final gets it). A
        summarize is not retried after a connection error."""
        fields = {k: v for k, v in (("text", text), ("mode", mode), ("tool_name", tool_name), ("model", model),
                                    ("session", session), ("overrides", overrides),
                                    ("wait_seconds", wait_seconds)) if v is not None}
        status, data, _ = self._request("POST", "/v1/results:compress", body=json.dumps(fields).encode("utf-8"),
                                        timeout=self.timeout + (wait_seconds or 120),
                                        retry_connection=mode == "offload")
        doc = _json(data, "compression")
        if status == 202:
            return CompressAnswer(status, accepted=doc)
        return CompressAnswer(status, result=doc)

    # op: GET /v1/runs/{run}
    def wait_run(self, run_id: str, wait: Union[int, float, str, None] = 30) -> RunDetail:
        """GET /v1/runs/{run}?wait=: answers as soon as the run is final, or
        after wait (seconds, or a duration such as "30s"); check
        is_final(detail["run"]["status"])."""
        q: Dict[str, str] = {}
        timeout = self.timeout
        if wait:
            if isinstance(wait, str):
                q["wait"] = wait
                timeout += 600  # the server caps any wait at its maximum (10 minutes by default)
            else:
                q["wait"] = "%ds" % int(wait)
                timeout += float(wait)
        _, data, _ = self._request("GET", "/v1/runs/%s" % _seg(run_id), query=q, timeout=timeout)
        return _json(data, "run")

    def wait_final(self, run_id: str, timeout: float = 600, poll: int = 30) -> RunDetail:
        """Long-polls the run until it is final; raises TimeoutError after
        timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            d = self.wait_run(run_id, max(1, min(poll, int(left))))
            if is_final(d.get("run", {}).get("status", "")):
                return d
            if time.monotonic() >= deadline:
                raise TimeoutError("run %s is still %s" % (run_id, d.get("run", {}).get("status")))

    # op: GET /v1/runs/{run}/output
    def get_output(self, run_id: str) -> bytes:
        """GET /v1/runs/{run}/output: the compacted conversation byte for
        byte, checked against X-Content-SHA256. A run that is not finished
        (or failed) is an ApiError with status 409."""
        _, data, h = self._request("GET", "/v1/runs/%s/output" % _seg(run_id))
        _check_sha(h, data)
        return data

    # -- recovery -----------------------------------------------------------

    # op: GET /v1/sessions/{session}/offloads
    def list_offloads(self, session: str) -> List[Offload]:
        """GET /v1/sessions/{session}/offloads: the live offloads, oldest first."""
        _, data, _ = self._request("GET", "/v1/sessions/%s/offloads" % _seg(session))
        return _json(data, "offloads").get("offloads") or []

    # op: GET /v1/sessions/{session}/offloads/{id}
    def recover(self, session: str, id: str, lines: Optional[str] = None) -> Recovered:
        """GET /v1/sessions/{session}/offloads/{id}: what a recover id names
        (an offload id, or an archive id such as "<sha256>.m3-57"), what
        the recover_context tool answers. lines "A-B" answers a slice; one
        that starts past the end is an ApiError with status 416 whose
        total_lines is the count."""
        q = {"lines": lines} if lines else None
        _, data, h = self._request("GET", "/v1/sessions/%s/offloads/%s" % (_seg(session), _seg(id)), query=q)
        if not lines:
            _check_sha(h, data)
        total = h.get("x-total-lines")
        return Recovered(data.decode("utf-8", errors="replace"),
                         int(total) if total and total.isdigit() else None, h.get("x-lines"))

    # op: GET /v1/sessions/{session}/snapshots
    def list_snapshots(self, session: str) -> List[Snapshot]:
        """GET /v1/sessions/{session}/snapshots: a proxy session's
        snapshots between compactions, oldest first."""
        _, data, _ = self._request("GET", "/v1/sessions/%s/snapshots" % _seg(session))
        return _json(data, "snapshots").get("snapshots") or []

    # op: GET /v1/sessions/{session}/snapshots/{seq}
    def get_snapshot(self, session: str, seq: int) -> SnapshotConversation:
        """GET /v1/sessions/{session}/snapshots/{seq}: the conversation the
        host sent at that snapshot."""
        _, data, _ = self._request("GET", "/v1/sessions/%s/snapshots/%d" % (_seg(session), int(seq)))
        return _json(data, "snapshot")

    # op: GET /v1/sessions/{session}/search
    def search(self, session: str, query: str, limit: Optional[int] = None) -> SearchResult:
        """GET /v1/sessions/{session}/search: hits in the session's offloads
        and archived originals, each with the id that recover() reads back."""
        q = {"q": query}
        if limit is not None:
            q["limit"] = str(limit)
        _, data, _ = self._request("GET", "/v1/sessions/%s/search" % _seg(session), query=q)
        return _json(data, "search")

    # op: GET /v1/tools
    def tools(self, format: str = "openai") -> List[Dict[str, Any]]:
        """GET /v1/tools: recover_context and search_context in a provider's
        schema ("openai" or "anthropic")."""
        _, data, _ = self._request("GET", "/v1/tools", query={"format": format})
        return _json(data, "tools").get("tools") or []

    # -- sessions -----------------------------------------------------------

    # op: GET /v1/sessions/{session}/status
    def session_status(self, session: str) -> SessionStatus:
        """GET /v1/sessions/{session}/status: the three-tier design's status
        report, from the session's last succeeded run (or promoted replay)."""
        _, data, _ = self._request("GET", "/v1/sessions/%s/status" % _seg(session))
        return _json(data, "status")

    # op: DELETE /v1/sessions/{session}
    def erase_session(self, session: str) -> Erasure:
        """DELETE /v1/sessions/{session}: starts (or joins) the session's
        erasure, answered while it runs ("erasing"); get_erasure reads it
        until "erased". Reads of the session then raise GoneError."""
        _, data, _ = self._request("DELETE", "/v1/sessions/%s" % _seg(session))
        return _json(data, "erasure")

    # op: GET /v1/erasures/{id}
    def get_erasure(self, erasure_id: str) -> Erasure:
        """GET /v1/erasures/{id}: the erasure, then its tombstone."""
        _, data, _ = self._request("GET", "/v1/erasures/%s" % _seg(erasure_id))
        return _json(data, "erasure")

    # -- retention ----------------------------------------------------------

    # op: GET /v1/retention
    def get_retention(self) -> Retention:
        """GET /v1/retention: {"days", "set"}; set False keeps runs for good."""
        _, data, _ = self._request("GET", "/v1/retention")
        return _json(data, "retention")

    # op: PUT /v1/retention
    def set_retention(self, days: int) -> Retention:
        """PUT /v1/retention: delete the tenant's final runs days after they
        ended (whole days, 1 to 36500)."""
        _, data, _ = self._request("PUT", "/v1/retention", body=json.dumps({"days": days}).encode("utf-8"))
        return _json(data, "retention")

    # op: DELETE /v1/retention
    def unset_retention(self) -> Retention:
        """DELETE /v1/retention: keep the tenant's runs for good again."""
        _, data, _ = self._request("DELETE", "/v1/retention")
        return _json(data, "retention")

    # -- webhooks -----------------------------------------------------------

    # op: POST /v1/webhooks
    def add_webhook(self, url: str, description: Optional[str] = None) -> WebhookRegistration:
        """POST /v1/webhooks: registers a completion webhook endpoint. A new
        URL is created (201) with its secret; one already registered answers
        the existing endpoint (200), without a secret."""
        fields = {"url": url}
        if description is not None:
            fields["description"] = description
        status, data, _ = self._request("POST", "/v1/webhooks", body=json.dumps(fields).encode("utf-8"))
        return WebhookRegistration(_json(data, "webhook"), status == 201)

    # op: GET /v1/webhooks
    def list_webhooks(self) -> List[WebhookEndpoint]:
        """GET /v1/webhooks: the live endpoints, oldest first, without secrets."""
        _, data, _ = self._request("GET", "/v1/webhooks")
        return _json(data, "webhooks").get("webhooks") or []

    # op: DELETE /v1/webhooks/{id}
    def delete_webhook(self, webhook_id: str) -> None:
        """DELETE /v1/webhooks/{id}: no more deliveries to it (its log stays)."""
        self._request("DELETE", "/v1/webhooks/%s" % _seg(webhook_id))

    # op: POST /v1/webhooks/{id}/rotate
    def rotate_webhook(self, webhook_id: str) -> WebhookEndpoint:
        """POST /v1/webhooks/{id}/rotate: a new secret (in the answer); the
        old one signs beside it until previous_expires_at. Not retried after
        a connection error: a second rotation would retire this one's."""
        _, data, _ = self._request("POST", "/v1/webhooks/%s/rotate" % _seg(webhook_id), retry_connection=False)
        return _json(data, "webhook")

    # op: GET /v1/runs/{run}/deliveries
    def list_deliveries(self, run_id: str) -> List[Delivery]:
        """GET /v1/runs/{run}/deliveries: the run's webhook deliveries, each
        with every attempt."""
        _, data, _ = self._request("GET", "/v1/runs/%s/deliveries" % _seg(run_id))
        return _json(data, "deliveries").get("deliveries") or []

    # op: POST /v1/deliveries/{id}/redeliver
    def redeliver(self, delivery_id: str) -> Redelivered:
        """POST /v1/deliveries/{id}/redeliver: send a delivery again, with
        the same webhook-id. Not retried after a connection error."""
        _, data, _ = self._request("POST", "/v1/deliveries/%s/redeliver" % _seg(delivery_id), retry_connection=False)
        return _json(data, "redelivery")

    # -- replay -------------------------------------------------------------

    # op: GET /v1/runs/{run}/original
    def get_original(self, run_id: str) -> bytes:
        """GET /v1/runs/{run}/original: the run's original conversation byte
        for byte, checked against X-Content-SHA256."""
        _, data, h = self._request("GET", "/v1/runs/%s/original" % _seg(run_id))
        _check_sha(h, data)
        return data

    # op: POST /v1/runs/{run}/replay
    def replay_run(self, run_id: str, *, request_id: Optional[str] = None, preset: Optional[str] = None,
                   overrides: Optional[Mapping[str, Any]] = None, model: Optional[str] = None,
                   context_limit: Optional[int] = None) -> Submitted:
        """POST /v1/runs/{run}/replay: runs the run's original again,
        optionally with another preset, overrides, model or limit (202);
        wait_final reads the replay. request_id makes it idempotent; None
        gets a random one, fixed before the first attempt."""
        fields: Dict[str, Any] = {"request_id": request_id or "rpl-" + secrets.token_hex(12)}
        for k, v in (("preset", preset), ("overrides", overrides), ("model", model), ("context_limit", context_limit)):
            if v is not None:
                fields[k] = v
        _, data, _ = self._request("POST", "/v1/runs/%s/replay" % _seg(run_id), body=json.dumps(fields).encode("utf-8"))
        return _json(data, "replay")

    # op: POST /v1/runs/{run}/promote
    def promote_replay(self, run_id: str) -> PromoteResponse:
        """POST /v1/runs/{run}/promote: makes a replay that succeeded, of a
        run that failed or ended over_limit, its session's state. Refused
        with ApiError 409 naming the field (run, replay_of, session);
        promoting again answers the same promotion with existing True."""
        _, data, _ = self._request("POST", "/v1/runs/%s/promote" % _seg(run_id))
        return _json(data, "promotion")

    # -- audit --------------------------------------------------------------

    # op: GET /v1/runs
    def list_runs(self, *, session: Optional[str] = None, status: Optional[str] = None,
                  from_: Optional[str] = None, to: Optional[str] = None, limit: Optional[int] = None,
                  after: Optional[str] = None, degraded: bool = False) -> RunList:
        """GET /v1/runs: one page of the tenant's runs, newest first; from_
        and to (RFC 3339) bound when they started; pass next_after as after
        for the next page; degraded keeps the runs that went through a
        fallback only."""
        q = _filter(session, status, from_, to, limit, after)
        if degraded:
            q["degraded"] = "true"
        _, data, _ = self._request("GET", "/v1/runs", query=q)
        return _json(data, "runs")

    # op: GET /v1/export
    def export_runs(self, format: str = "jsonl", *, session: Optional[str] = None, status: Optional[str] = None,
                    from_: Optional[str] = None, to: Optional[str] = None, limit: Optional[int] = None,
                    after: Optional[str] = None, steps: bool = False, degraded: bool = False) -> str:
        """GET /v1/export: the runs as JSON lines (with steps, a line per
        step after each run) or CSV; degraded keeps the runs that went
        through a fallback only."""
        q = _filter(session, status, from_, to, limit, after)
        q["format"] = format
        if degraded:
            q["degraded"] = "true"
        if steps:
            q["steps"] = "true"
        _, data, _ = self._request("GET", "/v1/export", query=q)
        return data.decode("utf-8")

    # op: GET /v1/runs/{run}/diff
    def get_diff(self, run_id: str) -> Diff:
        """GET /v1/runs/{run}/diff: what the run did to each message."""
        _, data, _ = self._request("GET", "/v1/runs/%s/diff" % _seg(run_id))
        return _json(data, "diff")

    # op: GET /v1/sessions/{session}/watermarks
    def list_watermarks(self, session: str) -> WatermarkList:
        """GET /v1/sessions/{session}/watermarks: the watermark history,
        oldest first, and the current watermark."""
        _, data, _ = self._request("GET", "/v1/sessions/%s/watermarks" % _seg(session))
        return _json(data, "watermarks")

    # op: POST /v1/replays
    def replay_failed(self, from_: str, to: str, *, request_id: Optional[str] = None, preset: Optional[str] = None,
                      overrides: Optional[Mapping[str, Any]] = None, model: Optional[str] = None,
                      context_limit: Optional[int] = None, statuses: Optional[List[str]] = None) -> List[Submitted]:
        """POST /v1/replays: replays every failed (with statuses, also
        over_limit) run that started in [from_, to) (RFC 3339); request_id
        is made before the first attempt when None."""
        items = (("from", from_), ("to", to), ("request_id", request_id or "rpl-" + secrets.token_hex(12)),
                 ("preset", preset), ("overrides", overrides), ("model", model), ("context_limit", context_limit),
                 ("statuses", statuses))
        fields = {k: v for k, v in items if v is not None}
        _, data, _ = self._request("POST", "/v1/replays", body=json.dumps(fields).encode("utf-8"))
        return _json(data, "replays").get("runs") or []

    # -- transport ----------------------------------------------------------

    def _request(self, method: str, path: str, query: Optional[Mapping[str, str]] = None,
                 body: Optional[bytes] = None, timeout: Optional[float] = None,
                 retry_connection: bool = True) -> Tuple[int, bytes, Dict[str, str]]:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Authorization": "Bearer " + self.api_key, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=body, method=method, headers=headers)
            wait: Optional[float] = None
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    return resp.status, resp.read(), _headers(resp.headers)
            except urllib.error.HTTPError as e:
                err = ApiError.from_response(e.code, e.read(), _headers(e.headers))
                if e.code not in _RETRY_STATUSES or attempt >= self.max_retries:
                    raise err from None
                wait = err.retry_after
            except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
                if attempt >= self.max_retries or not retry_connection:
                    raise CtxcompactError("%s %s: %s" % (method, path, getattr(e, "reason", e))) from e
            if wait is None or wait <= 0:
                wait = 0.2 * (2 ** attempt)
            time.sleep(min(wait, self.max_retry_wait))
            attempt += 1


def is_final(status: str) -> bool:
    """Whether a run with this status will not change any more."""
    return status in FINAL_STATUSES


def _with_conversation(fields: Mapping[str, Any], conversation: Any) -> bytes:
    """The JSON of fields and conversation, the conversation's text as it is
    when it is a RawJSON."""
    body = json.dumps(fields)
    if conversation is not None:
        conv = conversation.text if isinstance(conversation, RawJSON) else json.dumps(conversation)
        body = (body[:-1] + ", " if fields else "{") + '"conversation": ' + conv + "}"
    return body.encode("utf-8")


def _filter(session: Optional[str], status: Optional[str], from_: Optional[str], to: Optional[str],
            limit: Optional[int], after: Optional[str]) -> Dict[str, str]:
    return {k: str(v) for k, v in (("session", session), ("status", status), ("from", from_), ("to", to),
                                   ("limit", limit), ("after", after)) if v is not None}


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _headers(h: Any) -> Dict[str, str]:
    return {k.lower(): v for k, v in h.items()} if h is not None else {}


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:
        raise CtxcompactError("decode %s: %s" % (what, e)) from None


def _check_sha(h: Mapping[str, str], data: bytes) -> None:
    want = h.get("x-content-sha256")
    if want and hashlib.sha256(data).hexdigest() != want:
        raise CtxcompactError("answer's SHA-256 %s does not match X-Content-SHA256 %s"
                              % (hashlib.sha256(data).hexdigest(), want))
