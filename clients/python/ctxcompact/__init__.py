"""Client of the ctxcompact orchestrator's HTTP API (api/openapi.yaml),
standard library only: submit compaction events, wait for runs, read
their output, recover what was cut, read a session's status, erase it,
set the tenant's retention, manage webhooks and verify them (Standard
Webhooks), replay and promote runs."""

from .client import Client, CompressAnswer, EventAnswer, RawJSON, Recovered, WebhookRegistration, is_final
from .errors import ApiError, BaseHeldError, CtxcompactError, GoneError, WebhookVerificationError
from .types import (
    Accepted,
    Change,
    CompressResult,
    Delivery,
    DeliveryAttempt,
    DeliveryList,
    DeliveryStatus,
    Diff,
    DriftRecord,
    Erasure,
    ErasureStatus,
    ErrorBody,
    ErrorClass,
    ErrorCode,
    ErrorResponse,
    FINAL_STATUSES,
    HistoryRow,
    Hit,
    InspectReport,
    InspectResult,
    Offload,
    OffloadList,
    PassStat,
    PreviousErasure,
    PromoteResponse,
    Promotion,
    Redelivered,
    ReplaysResult,
    Retention,
    RunDetail,
    RunList,
    RunOutcome,
    RunRecord,
    RunResult,
    RunStatus,
    SearchResult,
    SessionStatus,
    StepRecord,
    Submitted,
    TokenCounting,
    Watermark,
    WatermarkList,
    WebhookEndpoint,
    WebhookList,
)
from .webhook import TOLERANCE_SECONDS, verify_webhook

__all__ = [
    "Accepted", "ApiError", "Change", "Client", "CompressAnswer", "CompressResult", "CtxcompactError", "Delivery",
    "DeliveryAttempt", "DeliveryList", "DeliveryStatus", "Diff", "DriftRecord", "Erasure", "ErasureStatus",
    "BaseHeldError", "ErrorBody", "ErrorClass", "ErrorCode", "ErrorResponse", "EventAnswer", "FINAL_STATUSES", "GoneError",
    "HistoryRow", "Hit", "InspectReport", "InspectResult", "is_final", "Offload", "OffloadList", "PassStat",
    "PreviousErasure", "PromoteResponse", "Promotion", "RawJSON", "Recovered", "Redelivered", "ReplaysResult",
    "Retention", "RunDetail", "RunList", "RunOutcome", "RunRecord", "RunResult", "RunStatus", "SearchResult",
    "SessionStatus", "StepRecord", "Submitted", "TokenCounting", "TOLERANCE_SECONDS", "verify_webhook", "Watermark",
    "WatermarkList", "WebhookEndpoint", "WebhookList", "WebhookRegistration", "WebhookVerificationError",
]
__version__ = "1.0.0"
