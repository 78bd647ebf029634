"""The API's answer types (api/openapi.yaml, components/schemas).

Every TypedDict is total=False: the server omits empty optional fields,
so read them with .get(). One field per line, in the schema's order;
e2e/clients_test.go checks these declarations against api/openapi.yaml.
"""

from typing import Any, Dict, List, Literal, TypedDict

# RunStatus: succeeded is under the model's limit; over_limit committed its
# best output but is still over (see over_limit_reason).
RunStatus = Literal["pending", "running", "succeeded", "over_limit", "failed"]

# ErrorClass: what kind of failure a failed run had.
ErrorClass = Literal["bad_input", "config", "summarizer", "dependency", "timeout", "canceled", "interrupted", "internal"]

# ErrorCode: the stable code of every error answer.
ErrorCode = Literal["bad_request", "unauthorized", "not_found", "gone", "method_not_allowed", "conflict", "breaker_open", "too_large", "rate_limited", "unavailable", "range_not_satisfiable", "internal"]

# FINAL_STATUSES are the statuses a run never leaves.
FINAL_STATUSES = frozenset({"succeeded", "over_limit", "failed"})


class PassStat(TypedDict, total=False):
    name: str
    applied: bool
    count: int
    tokens_saved: int
    note: str


class CacheFigures(TypedDict, total=False):
    # How much of the agent's prompt cache a run kept.
    prefix_tokens: int
    rewrite_tokens: int
    prefix_share: float


class LogFigures(TypedDict, total=False):
    # The session's append-only summary log after a run.
    blocks: int
    tokens: int
    appended: int
    reflected: bool


class CostFigures(TypedDict, total=False):
    # What a run cost and saves, in US dollars, after prompt-cache effects.
    summarizer_input_tokens: int
    summarizer_output_tokens: int
    summarizer_usd: float
    cache_rewrite_tokens: int
    tokens_shed: int
    net_saving_usd: float
    turns: int
    # "observed" (the agent's calls since the session's previous
    # compaction, as an incremental event showed them) or "default"
    # (COST_TURNS).
    turns_source: Literal["observed", "default"]
    priced: bool


# TokenCounting: how tokens_after, the size checked against the limit, was
# counted (an exact local encoding, the provider's endpoint, an estimate).
TokenCounting = Literal["encoding", "provider", "estimate"]


class PreviousErasure(TypedDict, total=False):
    # The erasure a session generation follows.
    id: str
    erased_at: str


class RunOutcome(TypedDict, total=False):
    # A run's outcome: the fields RunResult and RunDetail share.
    run_id: str
    existing: bool
    status: RunStatus
    error: str
    error_class: ErrorClass
    # Why the dependency call behind a failed run's error failed: refused,
    # timeout, dns, tls, connection reset, connection failed, "http 503".
    error_cause: str
    format: str
    tokens_before: int
    tokens_after: int
    ratio: float
    level_before: str
    level_after: str
    drift: str
    behaviour_drift: List[str]
    goal_drift_warning: bool
    history_failed: bool
    degraded: bool
    degraded_reasons: List[str]
    success: bool
    over_limit: bool
    over_limit_reason: str
    level_reason: str
    unit: str
    context_limit: int
    counter: str
    token_counting: TokenCounting
    freed_tokens: int
    preserved_count: int
    deleted_offloads: int
    context_compression: Dict[str, Any]
    recommendation: str
    handoff: Any
    handoff_key: str
    handoff_sha256: str
    archive_key: str
    output_key: str
    output_sha256: str
    passes: List[PassStat]
    cache: CacheFigures
    session_log: LogFigures
    summary_log: LogFigures
    cost: CostFigures
    conversation: Any


class RunResult(RunOutcome, total=False):
    # The answer of a finished run (200 of POST .../events): its outcome,
    # and the session's generation (above 1 after an erasure of the name).
    session_generation: int
    previous_erasure: PreviousErasure


class Accepted(TypedDict, total=False):
    # The answer while a run is not finished (202).
    run_id: str
    existing: bool
    status: RunStatus
    status_url: str
    input_key: str
    session_generation: int
    previous_erasure: PreviousErasure


class RunRecord(TypedDict, total=False):
    id: str
    tenant: str
    session: str
    event_id: str
    trigger: str
    preset: str
    model: str
    prompt_version: str
    status: RunStatus
    level: str
    tokens_before: int
    tokens_after: int
    chars_before: int
    chars_after: int
    ratio: float
    duration_ms: int
    started_at: str
    finished_at: str
    error: str
    error_class: ErrorClass
    error_cause: str
    replay_of: str
    input_key: str
    archive_key: str
    archive_sha256: str
    output_key: str
    output_sha256: str
    stats: Dict[str, Any]
    agent_model: str
    context_limit: int
    overrides: Dict[str, Any]
    input_sha256: str
    resolved_preset: Dict[str, Any]
    degraded: bool
    degraded_reasons: List[str]


class StepRecord(TypedDict, total=False):
    name: str
    attempt: int
    kind: str
    input_size: int
    output_size: int
    prompt_tokens: int
    completion_tokens: int
    model: str
    prompt_version: str
    duration_ms: int
    error: str
    at: str


# DriftRecord has a key named "pass", a Python keyword: functional syntax.
DriftRecord = TypedDict("DriftRecord", {
    "step": str,
    "pass": int,
    "score": float,
    "passed": bool,
    "missing": List[str],
    "verdict": str,
    "at": str,
}, total=False)


class RunDetail(RunOutcome, total=False):
    # GET /v1/runs/{run}: a finished run's answer (RunResult; status and
    # error while live) plus the audit detail.
    run: RunRecord
    steps: List[StepRecord]
    drift_verdicts: List[DriftRecord]
    duration_ms: int
    prompt_tokens: int
    completion_tokens: int


class Offload(TypedDict, total=False):
    # One live offloaded tool result (OffloadList.offloads[]).
    id: str
    tool_call_id: str
    tool_name: str
    tokens: int
    run_id: str
    created_at: str
    # When a released offload was deleted (listed with deleted=true only).
    deleted_at: str


class OffloadList(TypedDict, total=False):
    offloads: List[Offload]


class Snapshot(TypedDict, total=False):
    # One record of a proxy session's state between compactions
    # (SnapshotList.snapshots[]): the host's messages from_message to
    # to_message (from 1), added to the snapshot extends (absent: it
    # starts a chain).
    seq: int
    # The host's API: anthropic-messages, openai-chat or openai-responses.
    wire: str
    from_message: int
    to_message: int
    extends: int
    sha256: str
    bytes: int
    created_at: str


class SnapshotList(TypedDict, total=False):
    snapshots: List[Snapshot]


class SnapshotConversation(TypedDict, total=False):
    # The conversation the host sent at a snapshot: its chain's records
    # joined; complete is false when the first ones went under retention.
    seq: int
    wire: str
    complete: bool
    from_message: int
    system: Any
    messages: List[Any]
    records: List[int]


class Hit(TypedDict, total=False):
    # One recovery search hit; id reads it back with recover().
    kind: Literal["archive", "offload"]
    run_id: str
    message: int
    matches: int
    excerpt: str
    matches_capped: bool
    id: str


class SearchResult(TypedDict, total=False):
    hits: List[Hit]
    truncated: bool


class ErrorBody(TypedDict, total=False):
    # The "error" object of every error answer.
    code: ErrorCode
    message: str
    field: str
    index: int
    path: str
    # run_id: a 409's run holding the event id; erasure_id and erased_at: a
    # 410's erasure of the session.
    run_id: str
    erasure_id: str
    erased_at: str


class ErrorResponse(TypedDict, total=False):
    error: ErrorBody


class HistoryRow(TypedDict, total=False):
    # One pass of a run of the session (SessionStatus.history[]).
    time: str
    run_id: str
    type: str
    count: int
    tokens_saved: int
    # replay: of a replay not promoted (a what-if); promoted: of a promoted
    # replay (the session's state); superseded: of a run a promoted replay
    # repaired.
    replay: bool
    promoted: bool
    superseded: bool


class Promotion(TypedDict, total=False):
    # A replay made its session's state: run_id the replay, replay_of the
    # failed or over_limit run it repairs.
    tenant: str
    session: str
    run_id: str
    replay_of: str
    watermark: str
    promoted_by: str
    promoted_at: str


class PromoteResponse(Promotion, total=False):
    # POST /v1/runs/{run}/promote: existing when promoted before.
    existing: bool


class SessionStatus(TypedDict, total=False):
    # GET /v1/sessions/{session}/status: from the session's last succeeded
    # run (or promoted replay); usage is a fraction.
    tenant: str
    session: str
    last_run_id: str
    time: str
    tokens: int
    context_limit: int
    usage: float
    level: str
    recommendation: str
    offloads: int
    offload_tokens: int
    truncations: int
    truncated_tokens: int
    summarisations: int
    runs: Dict[str, int]
    replays: int
    promoted_replays: int
    promotions: List[Promotion]
    # The session's loop breaker while open: {"open", "reason", "until"}.
    breaker: Dict[str, Any]
    history: List[HistoryRow]
    watermark: str


class Submitted(TypedDict, total=False):
    # A started (or joined, existing) replay run.
    run_id: str
    existing: bool
    status_url: str


# ErasureStatus: erasing, then erased with the tombstone's figures.
ErasureStatus = Literal["erasing", "erased"]


class Erasure(TypedDict, total=False):
    # A session's erasure and its tombstone.
    id: str
    session: str
    status: ErasureStatus
    workflow_id: str
    requested_by: str
    requested_at: str
    finished_at: str
    runs: int
    rows_deleted: int
    objects_deleted: int
    objects_kept: int
    deleted_sha256: List[str]


class Retention(TypedDict, total=False):
    # The tenant's retention; set False keeps runs for good.
    days: float
    set: bool


class WebhookEndpoint(TypedDict, total=False):
    # secret is only in the answers of a registration that created the
    # endpoint and of a rotation.
    id: str
    url: str
    description: str
    secret: str
    created_at: str
    rotated_at: str
    previous_expires_at: str


class WebhookList(TypedDict, total=False):
    webhooks: List[WebhookEndpoint]


class DeliveryAttempt(TypedDict, total=False):
    # One POST of a delivery; code is absent when there was no answer.
    attempt: int
    at: str
    code: int
    error: str
    response_prefix: str
    duration_ms: int


DeliveryStatus = Literal["pending", "delivered", "failed"]


class Delivery(TypedDict, total=False):
    # One webhook delivery of a run; id is the webhook-id header.
    id: str
    endpoint_id: str
    run_id: str
    event_type: str
    status: DeliveryStatus
    attempts: int
    last_code: int
    last_error: str
    created_at: str
    delivered_at: str
    log: List[DeliveryAttempt]


class DeliveryList(TypedDict, total=False):
    deliveries: List[Delivery]


class Redelivered(TypedDict, total=False):
    delivery_id: str
    workflow_id: str


class RunList(TypedDict, total=False):
    # One page of runs, newest first; next_after is absent on the last.
    runs: List[RunRecord]
    next_after: str


class Change(TypedDict, total=False):
    # What a run did to one message; index and out_index are -1 for none.
    index: int
    out_index: int
    at: str
    out_at: str
    role: str
    action: Literal["kept", "replaced", "removed", "summarized", "added"]
    before: int
    after: int
    note: str


class Diff(TypedDict, total=False):
    run_id: str
    changes: List[Change]
    removed: int
    summarized: int
    replaced: int
    kept: int
    added: int


class Watermark(TypedDict, total=False):
    # One watermark of a session and the run that moved it there.
    tool_use_id: str
    run_id: str
    at: str


class WatermarkList(TypedDict, total=False):
    current: str
    watermarks: List[Watermark]


class InspectReport(TypedDict, total=False):
    # The level now, and what the deterministic passes and the budget
    # ladder would reach.
    preset: str
    encoding: str
    context_limit: int
    size_before: int
    usage: float
    level: str
    passes: List[PassStat]
    size_after_deterministic: int
    usage_after_deterministic: float
    large_results: int
    global_results: int
    history: bool
    history_note: str
    summarized_messages: int
    recommendation: str
    budget: str
    error: str


class InspectResult(TypedDict, total=False):
    format: str
    messages: int
    report: InspectReport
    tokens: int
    trigger_usage: float
    trigger_reached: bool


class CompressResult(TypedDict, total=False):
    # A tool result offloaded (reference, id, sha256, tokens) or summarized
    # (run_id, text and the sizes).
    mode: Literal["summarize", "offload"]
    status: str
    error: str
    error_class: ErrorClass
    reference: str
    id: str
    sha256: str
    tokens: int
    run_id: str
    text: str
    chars_before: int
    chars_after: int
    drift: str


class ReplaysResult(TypedDict, total=False):
    runs: List[Submitted]
