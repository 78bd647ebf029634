// Integration check of the TypeScript client against a running server, run
// by e2e/clients_test.go (TestClientsIntegration) after tsc, with
// CTXCOMPACT_URL, CTXCOMPACT_API_KEY, CTXCOMPACT_CONVERSATION (a file) and
// CTXCOMPACT_SESSION. Submit (202), wait, output, submit again with
// wait_seconds (200, the same run), list offloads, recover one (whole, a
// slice, past the end), search and read a hit back, error answers. Sets a
// non-zero exit code on any failure.

import { readFileSync } from "node:fs";
import { ApiError, Client, isFinal, RawJSON, type EventRequest } from "../src/index.js";

function check(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error(what);
}

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

async function expectApiError(call: () => Promise<unknown>, status: number, code: string): Promise<ApiError> {
  try {
    await call();
  } catch (e) {
    check(e instanceof ApiError, `ApiError expected, got ${String(e)}`);
    check(e.status === status && e.code === code, `${status} ${code} expected, got ${e.message}`);
    return e;
  }
  throw new Error(`${status} ${code} expected, got success`);
}

async function main(): Promise<void> {
  const url = env("CTXCOMPACT_URL");
  const key = env("CTXCOMPACT_API_KEY");
  const session = process.env["CTXCOMPACT_SESSION"] ?? "ts-client";
  const conv = readFileSync(env("CTXCOMPACT_CONVERSATION"), "utf8");
  const c = new Client(url, key);
  const event: EventRequest = {
    event_id: "ev-" + session, model: "gpt-4o", context_limit: 200000, preset: "offload-compact",
    overrides: { offload: { trigger_usage: 0, min_tokens: 300 } }, conversation: new RawJSON(conv),
  };

  // Submit without waiting: 202 with the run id.
  const a = await c.submitEvent(session, { ...event, wait_seconds: 0 });
  check(!a.finished && a.httpStatus === 202, `202 expected, got ${a.httpStatus}`);
  check(a.accepted.status_url === "/v1/runs/" + a.runId && a.accepted.existing === false, JSON.stringify(a.accepted));

  // Wait for it.
  const d = await c.waitFinal(a.runId, 240_000);
  check(d.run.id === a.runId && d.run.session === session, JSON.stringify(d.run));
  check(isFinal(d.run.status) && d.run.status === "succeeded", `run ${a.runId}: ${d.run.status} ${d.run.error ?? ""}`);
  // The run's answer carries the finished run's outcome too.
  check(d.run_id === a.runId && d.status === "succeeded", `outcome ${d.run_id} ${d.status}`);

  // Its output parses as JSON, in the caller's format.
  const outText = await c.getOutput(a.runId);
  const out = JSON.parse(outText) as { messages?: unknown[] };
  check(Array.isArray(out.messages) && out.messages.length > 0, "output has messages");
  check(outText.includes("recover_context"), "the output names offloads to recover");

  // The same event again, waiting: 200 with the same run's result.
  const r = await c.submitEvent(session, { ...event, wait_seconds: 60 });
  check(r.finished && r.httpStatus === 200, `200 expected, got ${r.httpStatus}`);
  const res = r.result;
  check(res.run_id === a.runId && res.existing === true, `the same run: ${res.run_id}`);
  check(res.status === "succeeded" && res.format === "openai", `result ${res.status} ${res.format ?? ""}`);
  check((res.tokens_after ?? 0) < (res.tokens_before ?? 0), `tokens ${res.tokens_before} -> ${res.tokens_after}`);
  check((res.passes ?? []).some((p) => p.applied), "a pass applied");
  check(JSON.stringify(res.conversation) === JSON.stringify(out), "the result's conversation is the output");

  // Recovery: the live offloads, one read back.
  const offloads = await c.listOffloads(session);
  check(offloads.length > 0, "offloads listed");
  const o = offloads[0]!;
  check(/^[0-9a-f]{64}$/.test(o.id) && (o.tokens ?? 0) > 0, JSON.stringify(o));
  check(outText.includes(o.id), `the output names offload ${o.id}`);
  const rec = await c.recover(session, o.id);
  check(rec.text.trim() !== "", "recovered text is empty");
  const total = rec.totalLines;
  check(total !== undefined && total > 0, `X-Total-Lines ${total}`);
  const part = await c.recover(session, o.id, "1-1");
  check(part.lines !== undefined && part.text !== "" && rec.text.startsWith(part.text.replace(/\n$/, "")), JSON.stringify(part));
  const past = await expectApiError(() => c.recover(session, o.id, `${total + 1}-${total + 5}`),
    416, "range_not_satisfiable");
  check(past.totalLines === total && past.field === "lines", `416: ${past.message}`);

  // Search finds the recovered text, and a hit reads back.
  const word = rec.text.match(/[A-Za-z_]{6,}/)?.[0];
  check(word !== undefined, `a word to search for in ${rec.text.slice(0, 200)}`);
  const found = await c.search(session, word, 10);
  const hits = found.hits ?? [];
  check(hits.length > 0, `no hit for ${word}`);
  const withId = hits.find((h) => h.id);
  check(withId?.id !== undefined, `a hit with an id: ${JSON.stringify(hits)}`);
  const back = await c.recover(session, withId.id);
  check(back.text.toLowerCase().includes(word.toLowerCase()), `hit ${JSON.stringify(withId)} reads back`);

  // Errors carry the API's code.
  await expectApiError(() => c.waitRun("no-such-run", 0), 404, "not_found");
  await expectApiError(() => c.recover(session, "0".repeat(64)), 404, "not_found");
  await expectApiError(() => new Client(url, "wrong-key-0123456789").listOffloads(session), 401, "unauthorized");
  await expectApiError(() => c.submitEvent(session, { event_id: "ev-" + session, conversation: { messages: [] } }),
    409, "conflict");

  console.log(`typescript client: ok (run ${a.runId}, ${offloads.length} offloads, ${hits.length} hits)`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack ?? e.message : e);
  process.exitCode = 1;
});
