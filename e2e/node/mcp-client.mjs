// A client nobody here wrote: the official MCP TypeScript SDK against the
// orchestrator's /mcp (streamable HTTP, bearer API key). It lists the
// tools, calls each on a real conversation, checks every structured result
// against its tool's output schema (with ajv, the SDK's own dependency,
// besides the SDK's own check) and exits non-zero on any failure. Run by
// e2e/mcp_test.go (TestMCPNodeClient) with:
//
//   MCP_URL, MCP_KEY        the endpoint and the tenant's API key
//   MCP_OTHER_KEY           another tenant's key (must not read the run)
//   MCP_CONVERSATION        path of a conversation file (JSON)
//   MCP_SESSION             the session to use
//   MCP_CONTEXT_LIMIT, MCP_PRESET  the checkpoint's settings
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Ajv2020 from "ajv/dist/2020.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

// canonical is JSON with object keys sorted, to compare JSON values.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function connect(key) {
  const client = new Client({ name: "ctxcompact-e2e-node", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(env("MCP_URL")), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

async function main() {
  const session = env("MCP_SESSION");
  const conversation = JSON.parse(readFileSync(env("MCP_CONVERSATION"), "utf8"));
  const client = await connect(env("MCP_KEY"));

  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ["compress_to_checkpoint", "recover_context", "search_context", "context_status"]) {
    check(byName[name], `tool ${name} is listed`);
    check(byName[name].inputSchema?.type === "object", `${name} has an object input schema`);
    check(byName[name].outputSchema?.type === "object", `${name} has an object output schema`);
  }
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = Object.fromEntries(tools.map((t) => [t.name, ajv.compile(t.outputSchema)]));

  // call calls a tool that must succeed and checks its structured result
  // against the tool's output schema.
  async function call(name, args) {
    const res = await client.callTool({ name, arguments: args }, undefined, { timeout: 180_000 });
    const text = (res.content ?? []).map((c) => c.text ?? "").join("");
    check(!res.isError, `${name} succeeded: ${text}`);
    check(res.structuredContent && typeof res.structuredContent === "object", `${name} has structuredContent`);
    const validate = validators[name];
    check(validate(res.structuredContent), `${name}'s result matches its output schema: ${ajv.errorsText(validate.errors)}`);
    for (const req of byName[name].outputSchema.required ?? []) {
      check(req in res.structuredContent, `${name}'s result has required property ${req}`);
    }
    console.log(`${name}: ok`);
    return res.structuredContent;
  }
  // fail calls a tool that must answer a tool error naming field.
  async function fail(name, args, field) {
    const res = await client.callTool({ name, arguments: args });
    const text = (res.content ?? []).map((c) => c.text ?? "").join("");
    check(res.isError === true, `${name} with ${JSON.stringify(args).slice(0, 80)} is a tool error`);
    check(text.includes(field), `${name}'s error names ${field}: ${text}`);
  }

  const cp = await call("compress_to_checkpoint", {
    session,
    conversation,
    model: "gpt-4o",
    context_limit: Number(env("MCP_CONTEXT_LIMIT")),
    preset: env("MCP_PRESET"),
    wait_seconds: 150,
  });
  check(cp.final === true && cp.status === "succeeded", `the checkpoint run succeeded: ${cp.status}`);
  check(cp.outcome.run_id === cp.run_id, "the outcome is the run's");
  check(cp.outcome.tokens_after < cp.outcome.tokens_before, "the run compacted");
  check(cp.conversation === undefined, "the compacted conversation is not repeated in the result (read output_uri)");
  check(cp.handoff && typeof cp.handoff === "object", "a checkpoint makes a handoff");
  const compacted = JSON.parse((await client.readResource({ uri: cp.output_uri })).contents[0].text);

  const ids = [...JSON.stringify(compacted).matchAll(/id: ([0-9a-f]{64}(?:\.m[0-9]+(?:-[0-9]+|b[0-9]+))?)/g)].map((m) => m[1]);
  check(ids.length > 0, "the compacted conversation names ids to recover");
  const rec = await call("recover_context", { session, id: ids[0] });
  check(rec.id === ids[0] && rec.text.length > 0 && rec.total_lines > 0, "recover_context reads the id back");
  const part = await call("recover_context", { session, id: ids[0], lines: "1-1" });
  check(part.lines === "1-1", "a line range is answered");
  await fail("recover_context", { session, id: ids[0], lines: "100000-100001" }, "lines");
  await fail("recover_context", { session, id: "not-an-id" }, "id");
  await fail("recover_context", { session }, "id");

  const found = await call("search_context", { session, query: "django" });
  check(found.hits.length > 0 && found.hits[0].id, "search_context finds hits with ids");
  await fail("search_context", { session, query: " " }, "query");

  const st = await call("context_status", { session });
  check(st.session === session && st.last_run_id === cp.run_id, "context_status reports the run");
  check(typeof st.level === "string" && st.context_limit === Number(env("MCP_CONTEXT_LIMIT")), "level and limit");
  check(st.recent_runs.some((r) => r.run_id === cp.run_id), "recent runs list the run");
  await fail("context_status", { session: "a/b" }, "session");

  await fail("compress_to_checkpoint", { session, conversation: 5 }, "conversation");
  await fail("compress_to_checkpoint", { session, conversation, wait_seconds: -1 }, "wait_seconds");

  const { resourceTemplates } = await client.listResourceTemplates();
  check(resourceTemplates.some((t) => t.uriTemplate === "ctxcompact://runs/{run}/output"), "the output template is listed");
  const out = await client.readResource({ uri: cp.output_uri });
  const sha = createHash("sha256").update(out.contents[0].text, "utf8").digest("hex");
  check(sha === cp.outcome.output_sha256, "the output resource is the run's output, byte for byte");
  check(canonical(JSON.parse(out.contents[0].text)) === canonical(compacted), "the output resource is the compacted conversation");
  console.log("resources: ok");

  const other = await connect(env("MCP_OTHER_KEY"));
  let leaked = false;
  try {
    await other.readResource({ uri: cp.output_uri });
    leaked = true;
  } catch {
    // not found, as it must be
  }
  check(!leaked, "another tenant cannot read the run's output");
  await other.close();

  let refused = false;
  try {
    const anon = new Client({ name: "anon", version: "1.0.0" });
    await anon.connect(new StreamableHTTPClientTransport(new URL(env("MCP_URL"))));
  } catch (err) {
    refused = err?.code === 401 || String(err).includes("401");
  }
  check(refused, "no key: 401");

  await client.close();
  console.log("mcp-client: ok");
}

main().catch((err) => {
  console.error("mcp-client: FAILED:", err?.stack ?? err);
  process.exit(1);
});
