// Thin client of the ctxcompact orchestrator's HTTP API (api/openapi.yaml):
// submit compaction events, wait for runs, read their output, recover what
// was cut, read a session's status, erase it, set the tenant's retention,
// manage webhooks and verify them (Standard Webhooks), replay and promote. No runtime dependencies:
// Node 18+'s global fetch and node:crypto.

import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";

// ---------------------------------------------------------------------------
// Types: the API's schemas (components/schemas), one property per line.
// e2e/clients_test.go checks these declarations against api/openapi.yaml.
// ---------------------------------------------------------------------------

/** succeeded is under the model's limit; over_limit committed its best output but is still over. */
export type RunStatus = "pending" | "running" | "succeeded" | "over_limit" | "failed";

/** What kind of failure a failed run had. */
export type ErrorClass = "bad_input" | "config" | "summarizer" | "dependency" | "timeout" | "canceled" | "interrupted" | "internal";

/** The stable code of every error answer. */
export type ErrorCode = "bad_request" | "unauthorized" | "not_found" | "gone" | "method_not_allowed" | "conflict" | "breaker_open" | "too_large" | "rate_limited" | "unavailable" | "range_not_satisfiable" | "internal";

export type Preset = "react-two-layer" | "watermark" | "offload-compact" | "auto-summarize" | "three-tier" | "adaptive";

/** A conversation in any supported format (OpenAI, Anthropic, ReAct), as a JSON value. */
export type Conversation = unknown;

/** The body of POST /v1/sessions/{session}/events. */
export interface EventRequest {
  /** Idempotency key; omitted, the client makes one before the first attempt. */
  event_id?: string;
  kind?: "threshold" | "checkpoint" | "manual";
  model?: string;
  context_limit?: number;
  /** A JSON value, or a RawJSON to send its text unchanged. */
  conversation?: Conversation | RawJSON;
  conversation_key?: string;
  /** An incremental event: the session's latest output it continues (with messages instead of conversation). */
  base?: Base;
  /** With base: the messages appended since that output, in its wire format. */
  messages?: unknown[];
  preset?: Preset;
  overrides?: Record<string, unknown>;
  /** Wait this long (seconds) for the run: 200 with its result when it finishes in time. */
  wait_seconds?: number;
}

/** The output an incremental event continues: its run and SHA-256. */
export interface Base {
  run_id: string;
  sha256: string;
}

export interface PassStat {
  name: string;
  applied: boolean;
  count: number;
  tokens_saved: number;
  note?: string;
}

/** How much of the agent's prompt cache a run kept. */
export interface CacheFigures {
  prefix_tokens: number;
  rewrite_tokens: number;
  prefix_share: number;
}

/** The session's append-only summary log after a run. */
export interface LogFigures {
  blocks: number;
  tokens: number;
  appended: number;
  reflected: boolean;
}

/** What a run cost and saves, in US dollars, after prompt-cache effects. */
export interface CostFigures {
  summarizer_input_tokens: number;
  summarizer_output_tokens: number;
  summarizer_usd: number;
  cache_rewrite_tokens: number;
  tokens_shed: number;
  net_saving_usd: number;
  turns: number;
  /** "observed": the agent's calls since the session's previous compaction, as an incremental event showed them; "default": COST_TURNS. */
  turns_source?: "observed" | "default";
  priced: boolean;
}

/** How tokens_after, the size checked against the limit, was counted. */
export type TokenCounting = "encoding" | "provider" | "estimate";

/** The erasure a session generation follows. */
export interface PreviousErasure {
  id: string;
  erased_at: string;
}

/** A run's outcome: the fields RunResult and RunDetail share. */
export interface RunOutcome {
  run_id: string;
  existing?: boolean;
  status: RunStatus;
  error?: string;
  error_class?: ErrorClass;
  /** Why the dependency call behind a failed run's error failed: refused, timeout, dns, tls, connection reset, connection failed, or "http 503". */
  error_cause?: string;
  format?: "openai" | "anthropic" | "react";
  tokens_before?: number;
  tokens_after?: number;
  ratio?: number;
  level_before?: string;
  level_after?: string;
  drift?: string;
  /** Signs that the agent drifted from its task since the previous compaction. */
  behaviour_drift?: Array<"clarification" | "premature-completion" | "off-target">;
  /** A Goal Drift Warning was appended at the output's tail. */
  goal_drift_warning?: boolean;
  history_failed?: boolean;
  /** The run reached its result through a fallback; degraded_reasons say which. */
  degraded?: boolean;
  degraded_reasons?: string[];
  success?: boolean;
  over_limit?: boolean;
  over_limit_reason?: string;
  level_reason?: string;
  unit?: "tokens" | "chars";
  context_limit?: number;
  counter?: string;
  token_counting?: TokenCounting;
  freed_tokens?: number;
  preserved_count?: number;
  deleted_offloads?: number;
  context_compression?: Record<string, unknown>;
  recommendation?: string;
  handoff?: Conversation;
  handoff_key?: string;
  handoff_sha256?: string;
  archive_key?: string;
  output_key?: string;
  output_sha256?: string;
  passes?: PassStat[];
  cache?: CacheFigures;
  session_log?: LogFigures;
  /** session_log under the name the docs use. */
  summary_log?: LogFigures;
  cost?: CostFigures;
  conversation?: Conversation;
}

/** The answer of a finished run (200 of POST .../events): its outcome and the session's generation. */
export interface RunResult extends RunOutcome {
  /** 1 for a session name never erased; above 1 after an erasure (previous_erasure). */
  session_generation?: number;
  previous_erasure?: PreviousErasure;
}

/** The answer while a run is not finished (202). */
export interface Accepted {
  run_id: string;
  existing: boolean;
  status: RunStatus;
  status_url: string;
  input_key?: string;
  session_generation?: number;
  previous_erasure?: PreviousErasure;
}

export interface RunRecord {
  id: string;
  tenant?: string;
  session: string;
  event_id?: string;
  trigger?: string;
  preset?: string;
  model?: string;
  prompt_version?: string;
  status: RunStatus;
  level?: string;
  tokens_before?: number;
  tokens_after?: number;
  chars_before?: number;
  chars_after?: number;
  ratio?: number;
  duration_ms?: number;
  started_at?: string;
  finished_at?: string;
  error?: string;
  error_class?: ErrorClass;
  error_cause?: string;
  replay_of?: string;
  input_key?: string;
  archive_key?: string;
  archive_sha256?: string;
  output_key?: string;
  output_sha256?: string;
  stats?: Record<string, unknown>;
  agent_model?: string;
  context_limit?: number;
  overrides?: Record<string, unknown>;
  input_sha256?: string;
  resolved_preset?: Record<string, unknown>;
  /** The run reached its result through a fallback; degraded_reasons say which. */
  degraded?: boolean;
  degraded_reasons?: string[];
}

export interface StepRecord {
  name: string;
  attempt?: number;
  kind?: string;
  input_size?: number;
  output_size?: number;
  prompt_tokens?: number;
  completion_tokens?: number;
  model?: string;
  prompt_version?: string;
  duration_ms?: number;
  error?: string;
  at?: string;
}

export interface DriftRecord {
  step?: string;
  pass?: number;
  score?: number;
  passed?: boolean;
  missing?: string[];
  verdict?: string;
  at?: string;
}

/** GET /v1/runs/{run}: a finished run's answer (RunResult; status and error while live) plus the audit detail. */
export interface RunDetail extends RunOutcome {
  run: RunRecord;
  steps?: StepRecord[];
  /** The run's drift checks, oldest first (drift is the last verdict). */
  drift_verdicts?: DriftRecord[];
  duration_ms?: number;
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** One live offloaded tool result (OffloadList.offloads[]). */
export interface Offload {
  id: string;
  tool_call_id?: string;
  tool_name?: string;
  tokens?: number;
  run_id?: string;
  created_at?: string;
  /** When a released offload was deleted (listed with deleted=true only). */
  deleted_at?: string;
}

export interface OffloadList {
  offloads?: Offload[];
}

/**
 * One record of a proxy session's state between compactions: the host's
 * messages from_message to to_message (from 1), added to the snapshot
 * extends (absent: it starts a chain).
 */
export interface Snapshot {
  seq: number;
  /** The host's API: anthropic-messages, openai-chat or openai-responses. */
  wire: string;
  from_message: number;
  to_message: number;
  extends?: number;
  sha256: string;
  bytes: number;
  created_at: string;
}

export interface SnapshotList {
  snapshots?: Snapshot[];
}

/**
 * The conversation the host sent at a snapshot: its chain's records
 * joined; complete is false when the first ones went under retention.
 */
export interface SnapshotConversation {
  seq: number;
  wire: string;
  complete: boolean;
  from_message: number;
  system?: unknown;
  messages: unknown[];
  records: number[];
}

/** One recovery search hit; id reads it back with recover(). */
export interface Hit {
  kind: "archive" | "offload";
  run_id?: string;
  message?: number;
  matches?: number;
  excerpt?: string;
  matches_capped?: boolean;
  id?: string;
}

export interface SearchResult {
  hits?: Hit[];
  truncated?: boolean;
}

/** The "error" object of every error answer. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  field?: string;
  index?: number;
  path?: string;
  /** A 409's run holding the event id. */
  run_id?: string;
  /** A 410's erasure of the session, and when it finished. */
  erasure_id?: string;
  erased_at?: string;
}

export interface ErrorResponse {
  error: ErrorBody;
}

/** One pass of a run of the session (SessionStatus.history[]). */
export interface HistoryRow {
  time?: string;
  run_id?: string;
  type?: string;
  count?: number;
  tokens_saved?: number;
  /** A pass of a replay not promoted (a what-if, audit data). */
  replay?: boolean;
  /** A pass of a promoted replay, the session's state. */
  promoted?: boolean;
  /** A pass of a run a promoted replay repaired (the replay's passes count instead). */
  superseded?: boolean;
}

/** A replay made its session's state: run_id the replay, replay_of the run it repairs. */
export interface Promotion {
  tenant?: string;
  session?: string;
  run_id: string;
  replay_of: string;
  watermark?: string;
  promoted_by?: string;
  promoted_at?: string;
}

/** POST /v1/runs/{run}/promote: the promotion, existing when promoted before. */
export interface PromoteResponse extends Promotion {
  existing: boolean;
}

/** GET /v1/sessions/{session}/status: from the last succeeded run (or promoted replay); usage is a fraction. */
export interface SessionStatus {
  tenant?: string;
  session: string;
  last_run_id?: string;
  time?: string;
  tokens?: number;
  context_limit?: number;
  usage?: number;
  level?: string;
  recommendation?: string;
  offloads?: number;
  offload_tokens?: number;
  truncations?: number;
  truncated_tokens?: number;
  summarisations?: number;
  runs?: Record<string, number>;
  /** Replays not promoted (what-ifs); promoted_replays the promoted ones. */
  replays?: number;
  promoted_replays?: number;
  promotions?: Promotion[];
  /** The session's loop breaker, present while open. */
  breaker?: { open: boolean; reason?: string; until?: string };
  history?: HistoryRow[];
  watermark?: string;
}

/** The body of POST /v1/runs/{run}/replay. */
export interface ReplayRequest {
  /** Idempotency key; omitted, the client makes one before the first attempt. */
  request_id?: string;
  preset?: Preset;
  overrides?: Record<string, unknown>;
  model?: string;
  context_limit?: number;
}

/** A started (or joined, existing) replay run. */
export interface Submitted {
  run_id: string;
  existing: boolean;
  status_url: string;
}

/** An erasure is erasing, then erased with its tombstone's figures. */
export type ErasureStatus = "erasing" | "erased";

/** A session's erasure and its tombstone. */
export interface Erasure {
  id: string;
  session: string;
  status: ErasureStatus;
  workflow_id?: string;
  requested_by?: string;
  requested_at?: string;
  finished_at?: string;
  runs?: number;
  rows_deleted?: number;
  objects_deleted?: number;
  /** Objects another session of the tenant still holds (the same bytes). */
  objects_kept?: number;
  deleted_sha256?: string[];
}

/** The tenant's retention; set false keeps runs for good. */
export interface Retention {
  days: number;
  set: boolean;
}

/** A webhook endpoint; secret only in the answers of a registration that created it and of a rotation. */
export interface WebhookEndpoint {
  id: string;
  url: string;
  description?: string;
  secret?: string;
  created_at?: string;
  rotated_at?: string;
  previous_expires_at?: string;
}

export interface WebhookList {
  webhooks?: WebhookEndpoint[];
}

/** What addWebhook answers: created (201, with the secret) or the URL's existing endpoint (200, no secret). */
export interface WebhookRegistration {
  created: boolean;
  endpoint: WebhookEndpoint;
}

/** One POST of a delivery; code is absent when there was no answer. */
export interface DeliveryAttempt {
  attempt: number;
  at?: string;
  code?: number;
  error?: string;
  response_prefix?: string;
  duration_ms?: number;
}

export type DeliveryStatus = "pending" | "delivered" | "failed";

/** One webhook delivery of a run; id is the webhook-id header. */
export interface Delivery {
  id: string;
  endpoint_id?: string;
  run_id?: string;
  event_type?: string;
  status: DeliveryStatus;
  attempts?: number;
  last_code?: number;
  last_error?: string;
  created_at?: string;
  delivered_at?: string;
  log?: DeliveryAttempt[];
}

export interface DeliveryList {
  deliveries?: Delivery[];
}

export interface Redelivered {
  delivery_id: string;
  workflow_id?: string;
}

/** One page of runs, newest first; next_after is absent on the last. */
export interface RunList {
  runs?: RunRecord[];
  next_after?: string;
}

/** Which runs listRuns and exportRuns select; from and to (RFC 3339) bound when they started. */
export interface RunFilter {
  session?: string;
  status?: RunStatus;
  from?: string;
  to?: string;
  limit?: number;
  after?: string;
  /** Only the runs that reached their result through a fallback. */
  degraded?: boolean;
}

/** What a run did to one message; index and out_index are -1 for none. */
export interface Change {
  index: number;
  out_index: number;
  at?: string;
  out_at?: string;
  role?: string;
  action: "kept" | "replaced" | "removed" | "summarized" | "added";
  before?: number;
  after?: number;
  note?: string;
}

export interface Diff {
  run_id: string;
  changes?: Change[];
  removed?: number;
  summarized?: number;
  replaced?: number;
  kept?: number;
  added?: number;
}

/** One watermark of a session and the run that moved it there. */
export interface Watermark {
  tool_use_id: string;
  run_id?: string;
  at?: string;
}

export interface WatermarkList {
  current?: string;
  watermarks?: Watermark[];
}

/** The body of POST /v1/sessions/{session}/inspect. */
export interface InspectRequest {
  model?: string;
  context_limit?: number;
  preset?: Preset;
  /** The whole conversation; or base and messages, as an incremental event carries them. */
  conversation?: Conversation | RawJSON;
  base?: Base;
  messages?: unknown[];
}

/** The level now, and what the deterministic passes and the budget ladder would reach. */
export interface InspectReport {
  preset?: string;
  encoding?: string;
  context_limit?: number;
  size_before?: number;
  usage?: number;
  level?: string;
  passes?: PassStat[];
  size_after_deterministic?: number;
  usage_after_deterministic?: number;
  large_results?: number;
  global_results?: number;
  history?: boolean;
  history_note?: string;
  summarized_messages?: number;
  recommendation?: string;
  budget?: string;
  error?: string;
}

export interface InspectResult {
  format?: string;
  messages?: number;
  report?: InspectReport;
  /** The conversation's size; trigger_reached: its usage reaches trigger_usage, where the preset starts compacting. */
  tokens?: number;
  trigger_usage?: number;
  trigger_reached?: boolean;
}

/** The body of POST /v1/sessions/{session}/compact: an event of kind manual. */
export type CompactRequest = Omit<EventRequest, "kind">;

/** The body of POST /v1/results:compress. */
export interface CompressRequest {
  text: string;
  tool_name?: string;
  model?: string;
  mode: "summarize" | "offload";
  session?: string;
  overrides?: Record<string, unknown>;
  wait_seconds?: number;
}

/** A tool result offloaded (reference, id, sha256, tokens) or summarized (run_id, text and the sizes). */
export interface CompressResult {
  mode: "summarize" | "offload";
  status: string;
  error?: string;
  error_class?: ErrorClass;
  reference?: string;
  id?: string;
  sha256?: string;
  tokens?: number;
  run_id?: string;
  text?: string;
  chars_before?: number;
  chars_after?: number;
  drift?: string;
}

/** What compressResult answers: the result (200) or, for a summarize run that outlasted wait_seconds, its Accepted (202). */
export type CompressAnswer =
  | { finished: true; httpStatus: 200; result: CompressResult }
  | { finished: false; httpStatus: 202; accepted: Accepted };

/** The body of POST /v1/replays: every failed (with statuses, also over_limit) run that started in [from, to). */
export interface ReplaysRequest {
  from: string;
  to: string;
  /** Idempotency key; omitted, the client makes one before the first attempt. */
  request_id?: string;
  preset?: Preset;
  overrides?: Record<string, unknown>;
  model?: string;
  context_limit?: number;
  statuses?: ("failed" | "over_limit")[];
}

export interface ReplaysResult {
  runs?: Submitted[];
}

/** What submitEvent answers: the finished run (200) or the accepted one (202). */
export type EventAnswer =
  | { finished: true; httpStatus: 200; runId: string; result: RunResult }
  | { finished: false; httpStatus: 202; runId: string; accepted: Accepted };

/** What a recover id names, with X-Total-Lines and (with lines) X-Lines. */
export interface Recovered {
  text: string;
  totalLines?: number;
  lines?: string;
}

export const FINAL_STATUSES: readonly RunStatus[] = ["succeeded", "over_limit", "failed"];

/** Whether a run with this status will not change any more. */
export function isFinal(status: string): boolean {
  return (FINAL_STATUSES as readonly string[]).includes(status);
}

/** A JSON text sent as it is (e.g. a conversation whose bytes the archive must keep). */
export class RawJSON {
  constructor(readonly text: string) {}
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** The code of the answer to a read of an erased session (410, a GoneError). */
export const CODE_GONE: ErrorCode = "gone";

/** Base class of this package's errors. */
export class CtxcompactError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * An answer other than 2xx, in the API's one error shape. code is stable;
 * an answer not in that shape gets code "http_<status>" and its body as the
 * message. retryAfter is Retry-After in seconds; totalLines X-Total-Lines
 * (a 416's line count).
 */
export class ApiError extends CtxcompactError {
  readonly status: number;
  readonly code: ErrorCode | `http_${number}`;
  /** The message the server sent (message adds status, code and field). */
  readonly apiMessage: string;
  readonly field: string | undefined;
  readonly index: number | undefined;
  readonly path: string | undefined;
  readonly retryAfter: number | undefined;
  readonly totalLines: number | undefined;
  /** The run holding an event id (a 409 naming event_id). */
  readonly runId: string | undefined;

  constructor(status: number, body: ErrorBody | { code: `http_${number}`; message: string }, headers?: Headers) {
    const b: Partial<ErrorBody> = body as Partial<ErrorBody>;
    let where = "";
    if (b.field) {
      where = ` (${b.field}${b.index !== undefined ? `[${b.index}]` : ""}${b.path ? "." + b.path : ""})`;
    }
    super(`${status} ${body.code}${where}: ${body.message}`);
    this.status = status;
    this.code = body.code;
    this.apiMessage = body.message;
    this.field = b.field || undefined;
    this.index = typeof b.index === "number" ? b.index : undefined;
    this.path = b.path || undefined;
    this.retryAfter = intHeader(headers, "retry-after");
    this.totalLines = intHeader(headers, "x-total-lines");
    this.runId = b.run_id || undefined;
  }


  /** Decodes an error answer from its status, body and headers. */
  static fromResponse(status: number, bodyText: string, headers?: Headers): ApiError {
    let doc: unknown;
    try {
      doc = JSON.parse(bodyText);
    } catch {
      doc = undefined;
    }
    const e = isObject(doc) ? doc["error"] : undefined;
    if (isObject(e) && typeof e["code"] === "string") {
      const body: ErrorBody = { code: e["code"] as ErrorCode, message: String(e["message"] ?? "") };
      if (typeof e["field"] === "string" && e["field"]) body.field = e["field"];
      if (typeof e["index"] === "number") body.index = e["index"];
      if (typeof e["path"] === "string" && e["path"]) body.path = e["path"];
      if (typeof e["run_id"] === "string" && e["run_id"]) body.run_id = e["run_id"];
      if (status === 410 && e["code"] === CODE_GONE) {
        return new GoneError(status, body, stringOrUndefined(e["erasure_id"]), stringOrUndefined(e["erased_at"]), headers);
      }
      if (status === 409 && body.field === "base.run_id" && body.run_id) {
        return new BaseHeldError(status, body, headers);
      }
      return new ApiError(status, body, headers);
    }
    return new ApiError(status, { code: `http_${status}`, message: bodyText.trim() }, headers);
  }
}

/**
 * A read of an erased session: HTTP 410, code "gone". erasureId names the
 * erasure (getErasure reads its tombstone), erasedAt (RFC 3339) when it
 * finished.
 */
export class GoneError extends ApiError {
  readonly erasureId: string | undefined;
  readonly erasedAt: string | undefined;

  constructor(status: number, body: ErrorBody, erasureId?: string, erasedAt?: string, headers?: Headers) {
    super(status, body, headers);
    this.erasureId = erasureId;
    this.erasedAt = erasedAt;
  }
}

/**
 * An incremental event whose base another event already continues: HTTP
 * 409, field base.run_id. runId names the run that holds the base:
 * continue from its output (wait for it, then send the turns appended
 * since on that output).
 */
export class BaseHeldError extends ApiError {}

export class WebhookVerificationError extends CtxcompactError {}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

export interface ClientOptions {
  /** Per request, on top of any wait it asks the server for (default 60 s). */
  timeoutMs?: number;
  /** Retries of a 429, a 503 or a connection error (default 4). */
  maxRetries?: number;
  /** Caps one wait between attempts, whatever Retry-After asks (default 30 s). */
  maxRetryWaitMs?: number;
  fetch?: typeof fetch;
}

interface Answer {
  status: number;
  body: Uint8Array;
  headers: Headers;
}

/**
 * A client of one deployment with one API key (one tenant). Retries 429 and
 * 503 answers after their Retry-After, and connection errors: calls are
 * safe to repeat, since submitEvent and replayRun fix their ids before the
 * first attempt (rotateWebhook and redeliver, which are not, are not
 * retried after a connection error). Each method that calls the API names
 * its operation on the line above it ("// op: METHOD /path");
 * e2e/clients_test.go checks them against api/openapi.yaml.
 */
export class Client {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly maxRetryWaitMs: number;
  private readonly fetchFn: typeof fetch;

  constructor(baseUrl: string, private readonly apiKey: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 4;
    this.maxRetryWaitMs = options.maxRetryWaitMs ?? 30_000;
    this.fetchFn = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /**
   * POST /v1/sessions/{session}/events. With wait_seconds > 0 the request
   * waits for the run: finished (200) answers its RunResult with the
   * compacted conversation, otherwise (202) its Accepted.
   */
  // op: POST /v1/sessions/{session}/events
  async submitEvent(session: string, event: EventRequest): Promise<EventAnswer> {
    const event_id = event.event_id || "evt-" + randomUUID();
    return this.postEvent(`/v1/sessions/${seg(session)}/events`, { ...event, event_id });
  }

  /**
   * POST /v1/sessions/{session}/compact: the offload-compact design's manual
   * /compact, an event of kind manual, answered as submitEvent. event_id
   * omitted gets a random one, fixed before the first attempt: each call is
   * a new event, and a retry is the same one.
   */
  // op: POST /v1/sessions/{session}/compact
  async compact(session: string, request: CompactRequest): Promise<EventAnswer> {
    const event_id = request.event_id || "cmp-" + randomUUID();
    return this.postEvent(`/v1/sessions/${seg(session)}/compact`, { ...request, event_id });
  }

  /**
   * POST /v1/sessions/{session}/inspect: the status report of the
   * conversation sent, and what the preset's deterministic passes and the
   * budget ladder would reach; nothing is run or stored.
   */
  // op: POST /v1/sessions/{session}/inspect
  async inspect(session: string, request: InspectRequest): Promise<InspectResult> {
    const a = await this.request("POST", `/v1/sessions/${seg(session)}/inspect`, undefined, withConversation(request));
    return decode(a.body, "inspection") as InspectResult;
  }

  /**
   * POST /v1/results:compress: one large tool result offloaded (stored, a
   * reference answered) or summarized (a run; 202 when it outlasts
   * wait_seconds, waitFinal gets it). A summarize is not retried after a
   * connection error.
   */
  // op: POST /v1/results:compress
  async compressResult(request: CompressRequest): Promise<CompressAnswer> {
    const a = await this.request("POST", "/v1/results:compress", undefined, JSON.stringify(request),
      (request.wait_seconds ?? 120) * 1000, request.mode === "offload");
    const doc = decode(a.body, "compression");
    if (a.status === 202) return { finished: false, httpStatus: 202, accepted: doc as Accepted };
    return { finished: true, httpStatus: 200, result: doc as CompressResult };
  }

  private async postEvent(path: string, event: EventRequest): Promise<EventAnswer> {
    const a = await this.request("POST", path, undefined, withConversation(event), (event.wait_seconds ?? 0) * 1000);
    const doc = decode(a.body, "event answer");
    if (a.status === 202) {
      const accepted = doc as Accepted;
      return { finished: false, httpStatus: 202, runId: accepted.run_id, accepted };
    }
    const result = doc as RunResult;
    return { finished: true, httpStatus: 200, runId: result.run_id, result };
  }

  /**
   * GET /v1/runs/{run}?wait=: answers as soon as the run is final, or after
   * wait (seconds, or a duration such as "30s"); check isFinal(d.run.status).
   */
  // op: GET /v1/runs/{run}
  async waitRun(runId: string, wait: number | string = 30): Promise<RunDetail> {
    const q: Record<string, string> = {};
    let extra = 0;
    if (typeof wait === "string" && wait !== "") {
      q["wait"] = wait;
      extra = 600_000; // the server caps any wait at its maximum (10 minutes by default)
    } else if (typeof wait === "number" && wait > 0) {
      q["wait"] = `${Math.floor(wait)}s`;
      extra = wait * 1000;
    }
    const a = await this.request("GET", `/v1/runs/${seg(runId)}`, q, undefined, extra);
    return decode(a.body, "run") as RunDetail;
  }

  /**
   * Long-polls the run until it is final; rejects after timeoutMs. Both
   * durations are milliseconds: `waitFinal(id, { timeoutMs, pollMs })`.
   * The positional form `waitFinal(id, timeoutMs, pollSeconds)` (a poll in
   * seconds) is kept for one release.
   */
  async waitFinal(
    runId: string,
    opts: { timeoutMs?: number; pollMs?: number } | number = {},
    pollSeconds?: number,
  ): Promise<RunDetail> {
    let timeoutMs = 600_000;
    let pollMs = 30_000;
    if (typeof opts === "number") {
      timeoutMs = opts;
      if (pollSeconds !== undefined) pollMs = pollSeconds * 1000;
    } else {
      timeoutMs = opts.timeoutMs ?? timeoutMs;
      pollMs = opts.pollMs ?? pollMs;
    }
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = Math.floor((deadline - Date.now()) / 1000);
      const d = await this.waitRun(runId, Math.max(1, Math.min(Math.ceil(pollMs / 1000), left)));
      if (isFinal(d.run.status)) return d;
      if (Date.now() >= deadline) throw new CtxcompactError(`run ${runId} is still ${d.run.status}`);
    }
  }

  /**
   * GET /v1/runs/{run}/output: the compacted conversation byte for byte (as
   * text), checked against X-Content-SHA256. A run not finished (or failed)
   * is an ApiError with status 409.
   */
  // op: GET /v1/runs/{run}/output
  async getOutput(runId: string): Promise<string> {
    const a = await this.request("GET", `/v1/runs/${seg(runId)}/output`);
    checkSHA(a);
    return new TextDecoder().decode(a.body);
  }

  /** GET /v1/sessions/{session}/offloads: the live offloads, oldest first. */
  // op: GET /v1/sessions/{session}/offloads
  async listOffloads(session: string): Promise<Offload[]> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/offloads`);
    return (decode(a.body, "offloads") as OffloadList).offloads ?? [];
  }

  /**
   * GET /v1/sessions/{session}/offloads/{id}: what a recover id names (an
   * offload id or an archive id such as "<sha256>.m3-57"), what the
   * recover_context tool answers. lines "A-B" answers a slice; one that
   * starts past the end is an ApiError with status 416 and totalLines.
   */
  // op: GET /v1/sessions/{session}/offloads/{id}
  async recover(session: string, id: string, lines?: string): Promise<Recovered> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/offloads/${seg(id)}`, lines ? { lines } : undefined);
    if (!lines) checkSHA(a);
    const r: Recovered = { text: new TextDecoder().decode(a.body) };
    const total = intHeader(a.headers, "x-total-lines");
    if (total !== undefined) r.totalLines = total;
    const got = a.headers.get("x-lines");
    if (got) r.lines = got;
    return r;
  }

  /** GET /v1/sessions/{session}/snapshots: a proxy session's snapshots between compactions, oldest first. */
  // op: GET /v1/sessions/{session}/snapshots
  async listSnapshots(session: string): Promise<Snapshot[]> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/snapshots`);
    return (decode(a.body, "snapshots") as SnapshotList).snapshots ?? [];
  }

  /** GET /v1/sessions/{session}/snapshots/{seq}: the conversation the host sent at that snapshot. */
  // op: GET /v1/sessions/{session}/snapshots/{seq}
  async getSnapshot(session: string, seq: number): Promise<SnapshotConversation> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/snapshots/${Math.trunc(seq)}`);
    return decode(a.body, "snapshot") as SnapshotConversation;
  }

  /** GET /v1/sessions/{session}/search: hits, each with the id recover() reads back. */
  // op: GET /v1/sessions/{session}/search
  async search(session: string, query: string, limit?: number): Promise<SearchResult> {
    const q: Record<string, string> = { q: query };
    if (limit !== undefined) q["limit"] = String(limit);
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/search`, q);
    return decode(a.body, "search") as SearchResult;
  }

  /** GET /v1/tools: recover_context and search_context in a provider's schema. */
  // op: GET /v1/tools
  async tools(format: "openai" | "anthropic" = "openai"): Promise<Record<string, unknown>[]> {
    const a = await this.request("GET", "/v1/tools", { format });
    return ((decode(a.body, "tools") as { tools?: Record<string, unknown>[] }).tools) ?? [];
  }

  /** GET /v1/sessions/{session}/status: the three-tier design's status report. */
  // op: GET /v1/sessions/{session}/status
  async sessionStatus(session: string): Promise<SessionStatus> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/status`);
    return decode(a.body, "status") as SessionStatus;
  }

  /**
   * DELETE /v1/sessions/{session}: starts (or joins) the session's erasure,
   * answered while it runs ("erasing"); getErasure reads it until "erased".
   * Reads of the session then throw GoneError.
   */
  // op: DELETE /v1/sessions/{session}
  async eraseSession(session: string): Promise<Erasure> {
    const a = await this.request("DELETE", `/v1/sessions/${seg(session)}`);
    return decode(a.body, "erasure") as Erasure;
  }

  /** GET /v1/erasures/{id}: the erasure, then its tombstone. */
  // op: GET /v1/erasures/{id}
  async getErasure(id: string): Promise<Erasure> {
    const a = await this.request("GET", `/v1/erasures/${seg(id)}`);
    return decode(a.body, "erasure") as Erasure;
  }

  /** GET /v1/retention: set false keeps the tenant's runs for good. */
  // op: GET /v1/retention
  async getRetention(): Promise<Retention> {
    const a = await this.request("GET", "/v1/retention");
    return decode(a.body, "retention") as Retention;
  }

  /** PUT /v1/retention: delete final runs days after they ended (whole days, 1 to 36500). */
  // op: PUT /v1/retention
  async setRetention(days: number): Promise<Retention> {
    const a = await this.request("PUT", "/v1/retention", undefined, JSON.stringify({ days }));
    return decode(a.body, "retention") as Retention;
  }

  /** DELETE /v1/retention: keep the tenant's runs for good again. */
  // op: DELETE /v1/retention
  async unsetRetention(): Promise<Retention> {
    const a = await this.request("DELETE", "/v1/retention");
    return decode(a.body, "retention") as Retention;
  }

  /**
   * POST /v1/webhooks: registers a completion webhook endpoint. A new URL is
   * created (201) with its secret; one already registered answers the
   * existing endpoint (200), without a secret.
   */
  // op: POST /v1/webhooks
  async addWebhook(url: string, description?: string): Promise<WebhookRegistration> {
    const body: Record<string, string> = { url };
    if (description !== undefined) body["description"] = description;
    const a = await this.request("POST", "/v1/webhooks", undefined, JSON.stringify(body));
    return { created: a.status === 201, endpoint: decode(a.body, "webhook") as WebhookEndpoint };
  }

  /** GET /v1/webhooks: the live endpoints, oldest first, without secrets. */
  // op: GET /v1/webhooks
  async listWebhooks(): Promise<WebhookEndpoint[]> {
    const a = await this.request("GET", "/v1/webhooks");
    return (decode(a.body, "webhooks") as WebhookList).webhooks ?? [];
  }

  /** DELETE /v1/webhooks/{id}: no more deliveries to it (its log stays). */
  // op: DELETE /v1/webhooks/{id}
  async deleteWebhook(id: string): Promise<void> {
    await this.request("DELETE", `/v1/webhooks/${seg(id)}`);
  }

  /**
   * POST /v1/webhooks/{id}/rotate: a new secret (in the answer); the old one
   * signs beside it until previous_expires_at. Not retried after a
   * connection error: a second rotation would retire this one's secret.
   */
  // op: POST /v1/webhooks/{id}/rotate
  async rotateWebhook(id: string): Promise<WebhookEndpoint> {
    const a = await this.request("POST", `/v1/webhooks/${seg(id)}/rotate`, undefined, undefined, 0, false);
    return decode(a.body, "webhook") as WebhookEndpoint;
  }

  /** GET /v1/runs/{run}/deliveries: the run's webhook deliveries, each with every attempt. */
  // op: GET /v1/runs/{run}/deliveries
  async listDeliveries(runId: string): Promise<Delivery[]> {
    const a = await this.request("GET", `/v1/runs/${seg(runId)}/deliveries`);
    return (decode(a.body, "deliveries") as DeliveryList).deliveries ?? [];
  }

  /** POST /v1/deliveries/{id}/redeliver: sends a delivery again, same webhook-id. Not retried after a connection error. */
  // op: POST /v1/deliveries/{id}/redeliver
  async redeliver(deliveryId: string): Promise<Redelivered> {
    const a = await this.request("POST", `/v1/deliveries/${seg(deliveryId)}/redeliver`, undefined, undefined, 0, false);
    return decode(a.body, "redelivery") as Redelivered;
  }

  /** GET /v1/runs/{run}/original: the run's original conversation byte for byte (as text), SHA-256 checked. */
  // op: GET /v1/runs/{run}/original
  async getOriginal(runId: string): Promise<string> {
    const a = await this.request("GET", `/v1/runs/${seg(runId)}/original`);
    checkSHA(a);
    return new TextDecoder().decode(a.body);
  }

  /**
   * POST /v1/runs/{run}/replay: runs the run's original again, optionally
   * with another preset, overrides, model or limit (202); waitFinal reads
   * the replay. request_id is made before the first attempt when omitted.
   */
  // op: POST /v1/runs/{run}/replay
  async replayRun(runId: string, replay: ReplayRequest = {}): Promise<Submitted> {
    const body = { ...replay, request_id: replay.request_id || "rpl-" + randomUUID() };
    const a = await this.request("POST", `/v1/runs/${seg(runId)}/replay`, undefined, JSON.stringify(body));
    return decode(a.body, "replay") as Submitted;
  }

  /**
   * POST /v1/runs/{run}/promote: makes a replay that succeeded, of a run that
   * failed or ended over_limit, its session's state. Refused with an
   * ApiError 409 naming the field (run, replay_of, session); promoting again
   * answers the same promotion with existing true.
   */
  // op: POST /v1/runs/{run}/promote
  async promoteReplay(runId: string): Promise<PromoteResponse> {
    const a = await this.request("POST", `/v1/runs/${seg(runId)}/promote`);
    return decode(a.body, "promotion") as PromoteResponse;
  }

  /** GET /v1/runs: one page of the tenant's runs, newest first; pass next_after as after for the next. */
  // op: GET /v1/runs
  async listRuns(filter: RunFilter = {}): Promise<RunList> {
    const a = await this.request("GET", "/v1/runs", filterQuery(filter));
    return decode(a.body, "runs") as RunList;
  }

  /** GET /v1/export: the runs as JSON lines (with steps, a line per step after each run) or CSV. */
  // op: GET /v1/export
  async exportRuns(format: "jsonl" | "csv" = "jsonl", filter: RunFilter = {}, steps = false): Promise<string> {
    const q: Record<string, string> = { ...filterQuery(filter), format };
    if (steps) q["steps"] = "true";
    const a = await this.request("GET", "/v1/export", q);
    return new TextDecoder().decode(a.body);
  }

  /** GET /v1/runs/{run}/diff: what the run did to each message. */
  // op: GET /v1/runs/{run}/diff
  async getDiff(runId: string): Promise<Diff> {
    const a = await this.request("GET", `/v1/runs/${seg(runId)}/diff`);
    return decode(a.body, "diff") as Diff;
  }

  /** GET /v1/sessions/{session}/watermarks: the watermark history, oldest first, and the current one. */
  // op: GET /v1/sessions/{session}/watermarks
  async listWatermarks(session: string): Promise<WatermarkList> {
    const a = await this.request("GET", `/v1/sessions/${seg(session)}/watermarks`);
    return decode(a.body, "watermarks") as WatermarkList;
  }

  /** POST /v1/replays: replays every failed (with statuses, also over_limit) run that started in [from, to). */
  // op: POST /v1/replays
  async replayFailed(request: ReplaysRequest): Promise<Submitted[]> {
    const body = { ...request, request_id: request.request_id || "rpl-" + randomUUID() };
    const a = await this.request("POST", "/v1/replays", undefined, JSON.stringify(body));
    return (decode(a.body, "replays") as ReplaysResult).runs ?? [];
  }

  private async request(method: string, path: string, query?: Record<string, string>, body?: string,
    extraTimeoutMs = 0, retryConnection = true): Promise<Answer> {
    let url = this.baseUrl + path;
    if (query && Object.keys(query).length > 0) url += "?" + new URLSearchParams(query).toString();
    const headers: Record<string, string> = { Authorization: `Bearer ${this.apiKey}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    for (let attempt = 0; ; attempt++) {
      let wait: number | undefined;
      try {
        const init: RequestInit = { method, headers, signal: AbortSignal.timeout(this.timeoutMs + extraTimeoutMs) };
        if (body !== undefined) init.body = body;
        const resp = await this.fetchFn(url, init);
        const data = new Uint8Array(await resp.arrayBuffer());
        if (resp.status >= 200 && resp.status < 300) {
          return { status: resp.status, body: data, headers: resp.headers };
        }
        const err = ApiError.fromResponse(resp.status, new TextDecoder().decode(data), resp.headers);
        if ((resp.status !== 429 && resp.status !== 503) || attempt >= this.maxRetries) throw err;
        wait = err.retryAfter !== undefined ? err.retryAfter * 1000 : undefined;
      } catch (e) {
        if (e instanceof ApiError) throw e;
        if (attempt >= this.maxRetries || !retryConnection) {
          throw new CtxcompactError(`${method} ${path}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
        }
      }
      if (wait === undefined || wait <= 0) wait = 200 * 2 ** attempt;
      const ms = Math.min(wait, this.maxRetryWaitMs);
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }
}

// ---------------------------------------------------------------------------
// Webhooks (https://www.standardwebhooks.com)
// ---------------------------------------------------------------------------

/** A timestamp further than this from now is refused. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** The time to check the timestamp against (default: now). */
  now?: Date;
}

/**
 * Verifies a webhook and returns its parsed JSON payload. secret is the
 * endpoint's secret ("whsec_" + base64); headers the request's (Node's
 * IncomingHttpHeaders or a fetch Headers): webhook-id, webhook-timestamp
 * (unix seconds), webhook-signature (space-separated "v1,<base64>"); body
 * the raw body exactly as received. Throws WebhookVerificationError unless
 * one v1 signature is HMAC-SHA256(secret, "{id}.{timestamp}.{body}") and
 * the timestamp is within 5 minutes of now.
 */
export function verifyWebhook<T = unknown>(secret: string, headers: WebhookHeaders, body: string | Uint8Array,
  options: VerifyOptions = {}): T {
  const key = secretKey(secret);
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!/^\d+$/.test(ts)) throw new WebhookVerificationError(`webhook-timestamp ${JSON.stringify(ts)} is not unix seconds`);
  const timestamp = Number(ts);
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (timestamp < now - WEBHOOK_TOLERANCE_SECONDS) throw new WebhookVerificationError("webhook-timestamp is too old");
  if (timestamp > now + WEBHOOK_TOLERANCE_SECONDS) throw new WebhookVerificationError("webhook-timestamp is too new");
  const raw = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const expected = new TextEncoder().encode(createHmac("sha256", key).update(`${id}.${ts}.`).update(raw).digest("base64"));
  let ok = false;
  for (const sig of signatures.split(" ")) {
    const comma = sig.indexOf(",");
    if (comma < 0 || sig.slice(0, comma) !== "v1") continue;
    const got = new TextEncoder().encode(sig.slice(comma + 1));
    // Every v1 signature is compared (no early exit), in constant time.
    if (got.length === expected.length && timingSafeEqual(got, expected)) ok = true;
  }
  if (!ok) throw new WebhookVerificationError("no matching signature");
  try {
    return JSON.parse(new TextDecoder().decode(raw)) as T;
  } catch (e) {
    throw new WebhookVerificationError(`payload is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function secretKey(secret: string): Uint8Array {
  const s = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  let bin: string;
  try {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw new Error("not base64");
    bin = atob(s);
  } catch {
    throw new WebhookVerificationError("the secret is not base64 (whsec_...)");
  }
  if (bin.length === 0) throw new WebhookVerificationError("the secret is empty");
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function header(headers: WebhookHeaders, name: string): string {
  let v: string | string[] | null | undefined;
  if (headers instanceof Headers) {
    v = headers.get(name);
  } else {
    v = headers[name];
    if (v === undefined) {
      for (const k of Object.keys(headers)) {
        if (k.toLowerCase() === name) {
          v = headers[k];
          break;
        }
      }
    }
  }
  if (Array.isArray(v)) v = v.join(" ");
  if (!v) throw new WebhookVerificationError(`missing header ${name}`);
  return v;
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

function seg(s: string): string {
  return encodeURIComponent(s);
}

/** A request's JSON with its conversation's text as it is (a RawJSON is sent unchanged). */
function withConversation(request: { conversation?: Conversation | RawJSON }): string {
  const { conversation, ...fields } = request;
  const head = JSON.stringify(fields);
  if (conversation === undefined) return head;
  const conv = conversation instanceof RawJSON ? conversation.text : JSON.stringify(conversation);
  return (head === "{}" ? "{" : head.slice(0, -1) + ",") + '"conversation":' + conv + "}";
}

function filterQuery(f: RunFilter): Record<string, string> {
  const q: Record<string, string> = {};
  for (const [k, v] of Object.entries(f)) if (v !== undefined) q[k] = String(v);
  return q;
}

function stringOrUndefined(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function intHeader(h: Headers | undefined, name: string): number | undefined {
  const v = h?.get(name);
  if (v == null || !/^\s*\d+\s*$/.test(v)) return undefined;
  return Number(v);
}

function decode(data: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch (e) {
    throw new CtxcompactError(`decode ${what}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function checkSHA(a: Answer): void {
  const want = a.headers.get("x-content-sha256");
  if (!want) return;
  const got = createHash("sha256").update(a.body).digest("hex");
  if (got !== want) throw new CtxcompactError(`answer's SHA-256 ${got} does not match X-Content-SHA256 ${want}`);
}
