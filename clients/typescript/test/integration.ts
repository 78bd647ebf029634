// Integration check of the TypeScript client against a running server, run
// by e2e/clients_test.go (TestClientsIntegration) after tsc, with
// CTXCOMPACT_URL, CTXCOMPACT_API_KEY, CTXCOMPACT_CONVERSATION (a file) and
// CTXCOMPACT_SESSION. Submit (202), wait, output, submit again with
// wait_seconds (200, the same run), the original back byte for byte, list
// offloads, recover one (whole, a slice, past the end), search and read a
// hit back, an incremental event, the session's status; a run over its
// limit with its handoff, replayed with a larger limit and the replay
// promoted; a session erased, its tombstone read and the session then gone
// (410); the retention set and unset; a webhook registered twice (the same
// endpoint), listed, rotated and deleted; error answers. Sets a non-zero
// exit code on any failure.

import { readFileSync } from "node:fs";
import { ApiError, Client, GoneError, isFinal, RawJSON, type EventRequest } from "../src/index.js";

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
  const d = await c.waitFinal(a.runId, { timeoutMs: 240_000, pollMs: 30_000 });
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

  // The original, byte for byte.
  check(await c.getOriginal(a.runId) === conv, "the original reads back byte for byte");

  // An incremental event: the session's latest output and the messages
  // appended since (the answers to its last calls, then a user turn).
  const lastMsg = (out.messages ?? []).at(-1) as { tool_calls?: { id: string }[] } | undefined;
  const appended: unknown[] = (lastMsg?.tool_calls ?? []).map((tc) => ({ role: "tool", tool_call_id: tc.id, content: "done" }));
  appended.push({ role: "user", content: "Go on with the fix." });
  check(res.output_sha256 !== undefined, "the result names its output's SHA-256");
  const inc = await c.submitEvent(session, { base: { run_id: a.runId, sha256: res.output_sha256 }, messages: appended,
    model: "gpt-4o", context_limit: 200000, preset: "offload-compact", wait_seconds: 120 });
  check(inc.finished && inc.result.status === "succeeded" && inc.runId !== a.runId, `incremental event: ${JSON.stringify(inc)}`);
  const grown = JSON.parse(await c.getOriginal(inc.runId)) as { messages: unknown[] };
  check(JSON.stringify(grown.messages.at(-1)) === JSON.stringify(appended.at(-1)), "the incremental run's original ends with the appended message");

  // The session's status names its latest run.
  const st = await c.sessionStatus(session);
  check(st.session === session && st.last_run_id === inc.runId, `status ${JSON.stringify(st)}`);
  check((st.offloads ?? 0) > 0 && st.runs?.["succeeded"] === 2, `status figures ${JSON.stringify(st)}`);

  // No webhook was registered while the runs ran: no delivery.
  check((await c.listDeliveries(a.runId)).length === 0, `deliveries of ${a.runId}`);

  await audit(c, session, a.runId, inc.runId, conv);
  await replayAndPromote(c, session + "-over", conv);
  await erase(c, session + "-erase", conv);
  await retention(c);
  await webhooks(c);

  // Errors carry the API's code.
  await expectApiError(() => c.waitRun("no-such-run", 0), 404, "not_found");
  await expectApiError(() => c.recover(session, "0".repeat(64)), 404, "not_found");
  await expectApiError(() => new Client(url, "wrong-key-0123456789").listOffloads(session), 401, "unauthorized");
  await expectApiError(() => c.submitEvent(session, { event_id: "ev-" + session, conversation: { messages: [] } }),
    409, "conflict");
  await expectApiError(() => c.redeliver("no-such-delivery"), 404, "not_found");
  await expectApiError(() => c.promoteReplay(a.runId), 409, "conflict");

  console.log(`typescript client: ok (run ${a.runId}, ${offloads.length} offloads, ${hits.length} hits)`);
}

/**
 * The audit and operator routes: runs listed (a page at a time) and
 * exported, a diff, the watermarks, an inspection, a tool result offloaded
 * and read back, a manual compaction, a bulk replay of no failed run.
 */
async function audit(c: Client, session: string, first: string, second: string, conv: string): Promise<void> {
  let page = await c.listRuns({ session, limit: 1 });
  check(JSON.stringify((page.runs ?? []).map((r) => r.id)) === JSON.stringify([second]) && page.next_after === second,
    `page 1 ${JSON.stringify(page)}`);
  page = await c.listRuns({ session, after: second });
  check(JSON.stringify((page.runs ?? []).map((r) => r.id)) === JSON.stringify([first]), `page 2 ${JSON.stringify(page)}`);
  const exported = (await c.exportRuns("jsonl", { session })).split("\n").filter((l) => l.trim() !== "")
    .map((l) => (JSON.parse(l) as { id: string }).id).sort();
  check(JSON.stringify(exported) === JSON.stringify([first, second].sort()), `export ${JSON.stringify(exported)}`);
  const d = await c.getDiff(first);
  check(d.run_id === first && (d.changes ?? []).length > 0 && (d.replaced ?? 0) > 0, `diff ${d.run_id} ${d.replaced}`);
  const w = await c.listWatermarks(session);
  check(Array.isArray(w.watermarks) && typeof w.current === "string", `watermarks ${JSON.stringify(w)}`);
  const ins = await c.inspect(session, { conversation: new RawJSON(conv), model: "gpt-4o", context_limit: 20000,
    preset: "three-tier" });
  check(ins.format === "openai" && (ins.messages ?? 0) > 0 && ins.report?.level, `inspection ${JSON.stringify(ins)}`);
  let text = "";
  for (let i = 0; i < 3000; i++) text += `line ${i} of a long tool result\n`;
  const off = await c.compressResult({ text, mode: "offload", tool_name: "bash", session: session + "-results" });
  check(off.finished && off.result.mode === "offload" && /^[0-9a-f]{64}$/.test(off.result.id ?? "") &&
    (off.result.reference ?? "").includes(off.result.id!), `offloaded ${JSON.stringify(off)}`);
  check((await c.recover(session + "-results", off.result.id!)).text === text, "the offloaded result reads back");
  const m = await c.compact(session + "-compact", { conversation: new RawJSON(conv), model: "gpt-4o", context_limit: 200000,
    wait_seconds: 120 });
  check(m.finished && m.result.status === "succeeded", `compact ${JSON.stringify(m)}`);
  check((await c.waitRun(m.runId, 0)).run.trigger === "manual", "a manual event");
  const now = Date.now();
  const iso = (t: number) => new Date(t).toISOString();
  const none = await c.replayFailed({ from: iso(now - 3_600_000), to: iso(now + 60_000), statuses: ["failed"] });
  check(none.length === 0, `no failed run to replay: ${JSON.stringify(none)}`);
}

/**
 * A run over its limit (the conversation and then a user message larger
 * than the limit), with its handoff; replayed with a larger limit, the
 * replay succeeds and is promoted, once; the session's status names it.
 */
async function replayAndPromote(c: Client, session: string, convText: string): Promise<void> {
  const doc = JSON.parse(convText) as { messages: { tool_calls?: { id: string }[] }[] };
  const msgs: unknown[] = doc.messages;
  for (const tc of doc.messages.at(-1)?.tool_calls ?? []) msgs.push({ role: "tool", tool_call_id: tc.id, content: "done" });
  let log = "";
  for (let i = 0; i < 400; i++) {
    const mm = String(Math.floor(i / 60) % 60).padStart(2, "0");
    const ss = String(i % 60).padStart(2, "0");
    log += `2025-01-02T12:${mm}:${ss}Z worker-${i % 7} processed job ${i} in ${10 + (i % 90)}ms (src/jobs/handler_${i % 13}.py)\n`;
  }
  msgs.push({ role: "user", content: log });
  const over = await c.submitEvent(session, { conversation: doc, preset: "three-tier", model: "gpt-4o", context_limit: 8000,
    wait_seconds: 120 });
  check(over.finished && over.result.status === "over_limit" && over.result.over_limit_reason, `over_limit expected: ${JSON.stringify(over)}`);
  check(over.result.handoff !== undefined && over.result.handoff_key, "an over-limit run hands off");
  const d0 = await c.waitRun(over.runId, 0);
  check(JSON.stringify(d0.handoff) === JSON.stringify(over.result.handoff), "the run's answer carries the handoff");

  const sub = await c.replayRun(over.runId, { request_id: "rp-" + session, context_limit: 200000 });
  check(sub.existing === false && sub.run_id !== over.runId, `replay ${JSON.stringify(sub)}`);
  const again = await c.replayRun(over.runId, { request_id: "rp-" + session, context_limit: 200000 });
  check(again.run_id === sub.run_id && again.existing === true, `the same replay: ${JSON.stringify(again)}`);
  const d = await c.waitFinal(sub.run_id, 240_000);
  check(d.run.status === "succeeded" && d.run.replay_of === over.runId, `replay run ${JSON.stringify(d.run)}`);

  const p = await c.promoteReplay(sub.run_id);
  check(p.run_id === sub.run_id && p.replay_of === over.runId && p.session === session && p.existing === false,
    `promotion ${JSON.stringify(p)}`);
  check((await c.promoteReplay(sub.run_id)).existing === true, "promoting again answers the same promotion");
  const st = await c.sessionStatus(session);
  check(st.last_run_id === sub.run_id && (st.promotions ?? []).length === 1, `status ${JSON.stringify(st)}`);
}

/** A session erased: the erasure is readable until erased, and the session is then gone (410) with its id. */
async function erase(c: Client, session: string, conv: string): Promise<void> {
  const r = await c.submitEvent(session, { conversation: new RawJSON(conv), model: "gpt-4o", preset: "offload-compact",
    wait_seconds: 120 });
  check(r.finished && isFinal(r.result.status), `a run to erase: ${JSON.stringify(r)}`);
  const e = await c.eraseSession(session);
  check(e.session === session && (e.status === "erasing" || e.status === "erased") && e.id, `erasure ${JSON.stringify(e)}`);
  const deadline = Date.now() + 240_000;
  let got = await c.getErasure(e.id);
  while (got.status !== "erased") {
    check(Date.now() < deadline, `erasure ${e.id} still ${got.status}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    got = await c.getErasure(e.id);
  }
  check(got.id === e.id && got.runs === 1 && got.finished_at, `tombstone ${JSON.stringify(got)}`);
  try {
    await c.sessionStatus(session);
  } catch (g) {
    check(g instanceof GoneError && g.status === 410 && g.code === "gone" && g.erasureId === e.id && g.erasedAt,
      `gone: ${String(g)}`);
    return;
  }
  throw new Error("an erased session's status answered 200");
}

/** The tenant's retention set, read and unset. */
async function retention(c: Client): Promise<void> {
  const same = (r: { days: number; set: boolean }, days: number, set: boolean) => r.days === days && r.set === set;
  check(same(await c.getRetention(), 0, false), "no retention at first");
  check(same(await c.setRetention(3650), 3650, true), "set");
  check(same(await c.getRetention(), 3650, true), "read back");
  check(same(await c.unsetRetention(), 0, false), "unset");
  check(same(await c.getRetention(), 0, false), "read back unset");
}

/** A webhook registered twice is one endpoint (the second answer without its secret); listed, rotated, deleted. */
async function webhooks(c: Client): Promise<void> {
  const url = env("CTXCOMPACT_WEBHOOK_URL");
  const first = await c.addWebhook(url, "typescript client");
  check(first.created && first.endpoint.secret?.startsWith("whsec_"), `registered ${JSON.stringify(first)}`);
  const second = await c.addWebhook(url);
  check(!second.created && second.endpoint.id === first.endpoint.id && second.endpoint.secret === undefined,
    `registered again: ${JSON.stringify(second)}`);
  const listed = (await c.listWebhooks()).filter((w) => w.url === url);
  check(listed.length === 1 && listed[0]!.id === first.endpoint.id && listed[0]!.secret === undefined, `listed ${JSON.stringify(listed)}`);
  const rotated = await c.rotateWebhook(first.endpoint.id);
  check(rotated.secret?.startsWith("whsec_") && rotated.secret !== first.endpoint.secret && rotated.previous_expires_at,
    `rotated ${JSON.stringify(rotated)}`);
  await c.deleteWebhook(first.endpoint.id);
  check((await c.listWebhooks()).every((w) => w.url !== url), "deleted");
  await expectApiError(() => c.deleteWebhook(first.endpoint.id), 404, "not_found");
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack ?? e.message : e);
  process.exitCode = 1;
});
