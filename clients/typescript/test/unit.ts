// Unit checks of the TypeScript client without a network (a fake fetch):
// error decoding, retries, the request it sends, and webhook verification
// against a vector the reference library (standardwebhooks) signed. Run by
// e2e/clients_test.go (TestClientsTypeScriptUnit) after tsc; sets a
// non-zero exit code on any failure.

import { ApiError, BaseHeldError, Client, CtxcompactError, GoneError, RawJSON, verifyWebhook, WebhookVerificationError } from "../src/index.js";

function check(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error(what);
}

async function rejects(call: () => Promise<unknown> | unknown): Promise<unknown> {
  try {
    await call();
  } catch (e) {
    return e;
  }
  throw new Error("expected an error");
}

interface Sent {
  url: string;
  init: RequestInit;
}

function fakeFetch(answers: Response[], sent: Sent[]): typeof fetch {
  return async (input, init) => {
    sent.push({ url: String(input), init: init ?? {} });
    const a = answers.shift();
    if (!a) throw new Error("no more answers");
    return a;
  };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });

async function main(): Promise<void> {
  // The common error shape.
  let e = ApiError.fromResponse(400, JSON.stringify({ error: { code: "bad_request", message: "bad tool_use_id",
    field: "conversation", index: 3, path: "content[0].tool_use_id" } }));
  check(e.status === 400 && e.code === "bad_request" && e.apiMessage === "bad tool_use_id", e.message);
  check(e.field === "conversation" && e.index === 3 && e.path === "content[0].tool_use_id", e.message);
  check(e.message === "400 bad_request (conversation[3].content[0].tool_use_id): bad tool_use_id", e.message);
  e = ApiError.fromResponse(416, '{"error":{"code":"range_not_satisfiable","message":"the text has 12 lines","field":"lines"}}',
    new Headers({ "X-Total-Lines": "12" }));
  check(e.totalLines === 12 && e.retryAfter === undefined && e.field === "lines", e.message);
  e = ApiError.fromResponse(502, "<html>Bad Gateway</html>\n");
  check(e.code === "http_502" && e.apiMessage === "<html>Bad Gateway</html>", e.message);

  // A 429 is retried after Retry-After, with the same event; a 404 is not.
  const sent: Sent[] = [];
  const c = new Client("http://api/", "k", { maxRetryWaitMs: 0, fetch: fakeFetch([
    json(429, { error: { code: "rate_limited", message: "slow down" } }, { "Retry-After": "1" }),
    json(202, { run_id: "r-9", existing: false, status: "pending", status_url: "/v1/runs/r-9" }),
    json(404, { error: { code: "not_found", message: "run not found" } }),
  ], sent) });
  const a = await c.submitEvent("s/1", { conversation: new RawJSON('{"messages": []}'), preset: "offload-compact" });
  check(!a.finished && a.runId === "r-9", JSON.stringify(a));
  check(sent.length === 2 && sent[0]!.url === "http://api/v1/sessions/s%2F1/events", JSON.stringify(sent.map((s) => s.url)));
  check(sent[0]!.init.body === sent[1]!.init.body, "the retry is the same event");
  const body = JSON.parse(String(sent[0]!.init.body)) as Record<string, unknown>;
  check(String(body["event_id"]).startsWith("evt-") && String(sent[0]!.init.body).includes('"conversation":{"messages": []}'),
    String(sent[0]!.init.body));
  check((sent[0]!.init.headers as Record<string, string>)["Authorization"] === "Bearer k", "bearer key");
  const nf = await rejects(() => c.waitRun("r-1", 0));
  check(nf instanceof ApiError && nf.status === 404 && nf.code === "not_found", String(nf));
  check((sent.length as number) === 3 && sent[2]!.url === "http://api/v1/runs/r-1", "one attempt for a 404");

  // A body that does not match its X-Content-SHA256.
  const bad = new Client("http://api", "k", { fetch: fakeFetch([
    new Response('{"messages":[]}', { status: 200, headers: { "X-Content-SHA256": "00".repeat(32) } })], []) });
  const mismatch = await rejects(() => bad.getOutput("r-1"));
  check(mismatch instanceof CtxcompactError && !(mismatch instanceof ApiError), String(mismatch));

  // Signed by the reference library:
  //   new Webhook(secret).sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", new Date(1700000000 * 1000), body)
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const payload = '{"type":"run.finished","data":{"run_id":"r-1","status":"succeeded"}}';
  const headers = { "Webhook-Id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "webhook-timestamp": "1700000000",
    "webhook-signature": "v1,Kxy1ml2KTKEpQublADUr+2qx3BQMu+vVWCA96QEMhz4=" };
  const at = new Date(1700000000 * 1000);
  const got = verifyWebhook<{ data: { run_id: string } }>(secret, headers, payload, { now: at });
  check(got.data.run_id === "r-1", JSON.stringify(got));
  for (const [name, call] of [
    ["tampered body", () => verifyWebhook(secret, headers, payload.replace("succeeded", "failed"), { now: at })],
    ["old timestamp", () => verifyWebhook(secret, headers, payload, { now: new Date(at.getTime() + 301_000) })],
    ["wrong secret", () => verifyWebhook("whsec_" + btoa("another secret"), headers, payload, { now: at })],
    ["missing header", () => verifyWebhook(secret, { "webhook-id": "x", "webhook-timestamp": "1700000000" }, payload, { now: at })],
  ] as const) {
    const err = await rejects(call);
    check(err instanceof WebhookVerificationError, `${name}: ${String(err)}`);
  }

  // A 410 of an erased session is a GoneError naming the erasure, not retried.
  const goneSent: Sent[] = [];
  const goneClient = new Client("http://api", "k", { fetch: fakeFetch([json(410, { error: { code: "gone",
    message: "session s1 was erased", erasure_id: "era-1", erased_at: "2026-11-27T03:00:00Z" } })], goneSent) });
  const gone = await rejects(() => goneClient.sessionStatus("s1"));
  check(gone instanceof GoneError && gone instanceof ApiError && gone.status === 410 && gone.code === "gone", String(gone));
  check(gone.erasureId === "era-1" && gone.erasedAt === "2026-11-27T03:00:00Z" && goneSent.length === 1, String(gone));
  check(!(ApiError.fromResponse(410, "gone away") instanceof GoneError), "another 410 is an ApiError");

  // A 409 on an incremental event's base names the run that holds it.
  const held = ApiError.fromResponse(409, JSON.stringify({ error: { code: "conflict", field: "base.run_id", run_id: "run-b",
    message: "the output of run run-a is already continued by run run-b" } }));
  check(held instanceof BaseHeldError && held.runId === "run-b" && held.field === "base.run_id", String(held));
  check(!(ApiError.fromResponse(409, JSON.stringify({ error: { code: "conflict", field: "event_id", run_id: "run-a",
    message: "reused" } })) instanceof BaseHeldError), "a 409 on the event id is an ApiError");

  // Webhook registration: 201 created with a secret, 200 the existing endpoint.
  const whSent: Sent[] = [];
  const wh = new Client("http://api", "k", { fetch: fakeFetch([
    json(201, { id: "wh-1", url: "https://h/x", secret: "whsec_eA==" }),
    json(200, { id: "wh-1", url: "https://h/x" }),
  ], whSent) });
  const first = await wh.addWebhook("https://h/x", "mine");
  const again = await wh.addWebhook("https://h/x");
  check(first.created && first.endpoint.secret === "whsec_eA==", JSON.stringify(first));
  check(!again.created && again.endpoint.id === "wh-1" && again.endpoint.secret === undefined, JSON.stringify(again));
  check(whSent[0]!.init.method === "POST" && whSent[0]!.url === "http://api/v1/webhooks" &&
    whSent[0]!.init.body === '{"url":"https://h/x","description":"mine"}', JSON.stringify(whSent[0]));

  // Every management call sends its method and path.
  const routes: [string, string, (c: Client) => Promise<unknown>, unknown][] = [
    ["DELETE", "/v1/webhooks/wh%2F1", (c) => c.deleteWebhook("wh/1"), null],
    ["POST", "/v1/webhooks/wh-1/rotate", (c) => c.rotateWebhook("wh-1"), { id: "wh-1", url: "u" }],
    ["GET", "/v1/webhooks", (c) => c.listWebhooks(), { webhooks: [] }],
    ["DELETE", "/v1/sessions/s1", (c) => c.eraseSession("s1"), { id: "e1", session: "s1", status: "erasing" }],
    ["GET", "/v1/erasures/e1", (c) => c.getErasure("e1"), { id: "e1", session: "s1", status: "erased" }],
    ["GET", "/v1/retention", (c) => c.getRetention(), { days: 0, set: false }],
    ["PUT", "/v1/retention", (c) => c.setRetention(30), { days: 30, set: true }],
    ["DELETE", "/v1/retention", (c) => c.unsetRetention(), { days: 0, set: false }],
    ["POST", "/v1/runs/r-2/promote", (c) => c.promoteReplay("r-2"), { run_id: "r-2", replay_of: "r-1", existing: false }],
    ["GET", "/v1/runs/r-2/deliveries", (c) => c.listDeliveries("r-2"), { deliveries: [] }],
    ["POST", "/v1/deliveries/d-1/redeliver", (c) => c.redeliver("d-1"), { delivery_id: "d-1" }],
    ["GET", "/v1/sessions/s1/status", (c) => c.sessionStatus("s1"), { session: "s1" }],
    ["GET", "/v1/runs?session=s1&limit=2", (c) => c.listRuns({ session: "s1", limit: 2 }), { runs: [] }],
    ["GET", "/v1/export?format=csv&steps=true", (c) => c.exportRuns("csv", {}, true), { id: 1 }],
    ["GET", "/v1/runs/r-1/diff", (c) => c.getDiff("r-1"), { run_id: "r-1" }],
    ["GET", "/v1/sessions/s1/watermarks", (c) => c.listWatermarks("s1"), { current: "" }],
    ["POST", "/v1/sessions/s1/inspect", (c) => c.inspect("s1", { conversation: { messages: [] } }), { format: "openai" }],
    ["POST", "/v1/results:compress", (c) => c.compressResult({ text: "t", mode: "offload" }), { mode: "offload", status: "stored" }],
    ["POST", "/v1/sessions/s1/compact", (c) => c.compact("s1", { conversation: { messages: [] } }), { run_id: "r", status: "succeeded" }],
    ["POST", "/v1/replays", (c) => c.replayFailed({ from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" }), { runs: [] }],
  ];
  for (const [method, path, call, answer] of routes) {
    const rs: Sent[] = [];
    const resp = answer === null ? new Response(null, { status: 204 }) : json(200, answer);
    await call(new Client("http://api", "k", { fetch: fakeFetch([resp], rs) }));
    check(rs.length === 1 && rs[0]!.init.method === method && rs[0]!.url === "http://api" + path,
      `${method} ${path}: ${JSON.stringify(rs)}`);
  }

  // A replay's request id is fixed before the first attempt.
  const rpSent: Sent[] = [];
  const rp = new Client("http://api", "k", { maxRetryWaitMs: 0, fetch: fakeFetch([
    json(503, { error: { code: "unavailable", message: "down" } }),
    json(202, { run_id: "r-3", existing: false, status_url: "/v1/runs/r-3" }),
  ], rpSent) });
  const sub = await rp.replayRun("r-1", { context_limit: 200000 });
  check(sub.run_id === "r-3" && rpSent.length === 2 && rpSent[0]!.init.body === rpSent[1]!.init.body, JSON.stringify(rpSent));
  check(String((JSON.parse(String(rpSent[0]!.init.body)) as { request_id: string }).request_id).startsWith("rpl-"), "request id");

  console.log("typescript unit: ok");
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack ?? e.message : e);
  process.exitCode = 1;
});
