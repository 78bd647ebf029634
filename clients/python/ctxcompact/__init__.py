"""Client of the ctxcompact orchestrator's HTTP API (api/openapi.yaml),
standard library only: submit compaction events, wait for runs, read
their output, recover what was cut, read a session's status, erase it,
set the tenant's retention, manage webhooks and verify them (Standard
Webhooks), replay and promote runs."""

from .client import Client, EventAnswer, RawJSON, Recovered, WebhookRegistration, is_final
from .errors import ApiError, CtxcompactError, GoneError, WebhookVerificationError
from .types import (
    FINAL_STATUSES,
    Accepted,
    Delivery,
    DeliveryAttempt,
    DeliveryList,
    DeliveryStatus,
    DriftRecord,
    Erasure,
    ErasureStatus,
    ErrorBody,
    ErrorClass,
    ErrorCode,
    ErrorResponse,
    HistoryRow,
    Hit,
    Offload,
    OffloadList,
    PassStat,
    PreviousErasure,
    PromoteResponse,
    Promotion,
    Redelivered,
    Retention,
    RunDetail,
    RunOutcome,
    RunRecord,
    RunResult,
    RunStatus,
    SearchResult,
    SessionStatus,
    StepRecord,
    Submitted,
    TokenCounting,
    WebhookEndpoint,
    WebhookList,
)
from .webhook import TOLERANCE_SECONDS, verify_webhook

__all__ = [
    "Accepted", "ApiError", "Client", "CtxcompactError", "Delivery", "DeliveryAttempt", "DeliveryList",
    "DeliveryStatus", "DriftRecord", "Erasure", "ErasureStatus", "ErrorBody", "ErrorClass", "ErrorCode",
    "ErrorResponse", "EventAnswer", "FINAL_STATUSES", "GoneError", "HistoryRow", "Hit", "is_final", "Offload",
    "OffloadList", "PassStat", "PreviousErasure", "PromoteResponse", "Promotion", "RawJSON", "Recovered",
    "Redelivered", "Retention", "RunDetail", "RunOutcome", "RunRecord", "RunResult", "RunStatus", "SearchResult",
    "SessionStatus", "StepRecord", "Submitted", "TokenCounting", "TOLERANCE_SECONDS", "verify_webhook",
    "WebhookEndpoint", "WebhookList", "WebhookRegistration", "WebhookVerificationError",
]
__version__ = "1.0.0"
