"""Client of the ctxcompact orchestrator's HTTP API (api/openapi.yaml),
standard library only: submit compaction events, wait for runs, read
their output, recover what was cut, and verify webhooks (Standard
Webhooks)."""

from .client import Client, EventAnswer, RawJSON, Recovered, is_final
from .errors import ApiError, CtxcompactError, WebhookVerificationError
from .types import (
    FINAL_STATUSES,
    Accepted,
    DriftRecord,
    ErrorBody,
    ErrorClass,
    ErrorCode,
    ErrorResponse,
    Hit,
    Offload,
    OffloadList,
    PassStat,
    RunDetail,
    RunRecord,
    RunResult,
    RunStatus,
    SearchResult,
    StepRecord,
)
from .webhook import TOLERANCE_SECONDS, verify_webhook

__all__ = [
    "Accepted", "ApiError", "Client", "CtxcompactError", "DriftRecord", "ErrorBody", "ErrorClass", "ErrorCode",
    "ErrorResponse", "EventAnswer", "FINAL_STATUSES", "Hit", "Offload", "OffloadList", "PassStat", "RawJSON",
    "Recovered", "RunDetail", "RunRecord", "RunResult", "RunStatus", "SearchResult", "StepRecord",
    "TOLERANCE_SECONDS", "WebhookVerificationError", "is_final", "verify_webhook",
]
__version__ = "1.0.0"
