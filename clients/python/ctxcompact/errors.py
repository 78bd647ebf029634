"""Errors: ApiError for the API's answers (GoneError for an erased
session's), WebhookVerificationError for webhooks that do not verify."""

import json
from typing import Any, Dict, Mapping, Optional


class CtxcompactError(Exception):
    """Base class of this package's errors."""


class ApiError(CtxcompactError):
    """An answer other than 2xx, in the API's one error shape:
    {"error": {"code", "message", "field"?, "index"?, "path"?}}.

    code is stable (bad_request, unauthorized, not_found, gone, conflict,
    rate_limited, unavailable, range_not_satisfiable, ...); a 410 of an
    erased session is a GoneError. An answer that
    is not in that shape (a proxy's 502, say) gets code "http_<status>" and
    its body as the message. retry_after is the Retry-After header in
    seconds, when the server sent one.
    """

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None,
                 index: Optional[int] = None, path: Optional[str] = None,
                 retry_after: Optional[int] = None, total_lines: Optional[int] = None,
                 run_id: Optional[str] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.index = index
        self.path = path
        self.retry_after = retry_after
        # total_lines is X-Total-Lines of a 416 (a line range past the end).
        self.total_lines = total_lines
        # run_id is the run holding an event id (a 409 naming event_id).
        self.run_id = run_id
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.field:
            where = " (" + self.field
            if self.index is not None:
                where += "[%d]" % self.index
            if self.path:
                where += "." + self.path
            where += ")"
        return "%d %s%s: %s" % (self.status, self.code, where, self.message)

    @classmethod
    def from_response(cls, status: int, body: bytes, headers: Optional[Mapping[str, str]] = None) -> "ApiError":
        """Decodes an error answer: its status, body and headers."""
        h = {k.lower(): v for k, v in (headers or {}).items()}
        retry_after = _int_or_none(h.get("retry-after"))
        total_lines = _int_or_none(h.get("x-total-lines"))
        text = body.decode("utf-8", errors="replace")
        try:
            doc: Any = json.loads(text)
        except ValueError:
            doc = None
        e = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(e, dict) and isinstance(e.get("code"), str):
            index = e.get("index")
            kwargs: Dict[str, Any] = dict(field=e.get("field") or None, index=index if isinstance(index, int) else None,
                                          path=e.get("path") or None, retry_after=retry_after,
                                          total_lines=total_lines, run_id=e.get("run_id") or None)
            if status == 410 and e["code"] == "gone":
                return GoneError(status, e["code"], str(e.get("message", "")), erasure_id=e.get("erasure_id") or None,
                                 erased_at=e.get("erased_at") or None, **kwargs)
            if status == 409 and e.get("field") == "base.run_id" and e.get("run_id"):
                return BaseHeldError(status, e["code"], str(e.get("message", "")), **kwargs)
            return cls(status, e["code"], str(e.get("message", "")), **kwargs)
        return cls(status, "http_%d" % status, text.strip(), retry_after=retry_after, total_lines=total_lines)


class GoneError(ApiError):
    """A read of an erased session: HTTP 410, code "gone". erasure_id
    names the erasure (Client.get_erasure reads its tombstone) and
    erased_at (RFC 3339) when it finished."""

    def __init__(self, status: int, code: str, message: str, erasure_id: Optional[str] = None,
                 erased_at: Optional[str] = None, **kwargs: Any) -> None:
        self.erasure_id = erasure_id
        self.erased_at = erased_at
        super().__init__(status, code, message, **kwargs)


class BaseHeldError(ApiError):
    """An incremental event whose base another event already continues:
    HTTP 409, field base.run_id. run_id names the run that holds the
    base: continue from its output (wait for it, then send the turns
    appended since on that output)."""


class WebhookVerificationError(CtxcompactError):
    """A webhook whose headers, timestamp or signature do not verify."""


def _int_or_none(v: Optional[str]) -> Optional[int]:
    if v is None:
        return None
    try:
        return int(v.strip())
    except ValueError:
        return None
