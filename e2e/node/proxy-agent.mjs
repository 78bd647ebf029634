// A multi-turn, streaming, tool-using agent on an official SDK (the
// Anthropic TypeScript SDK or the OpenAI Node SDK), pointed at the
// compactor's proxy as its provider's base URL, the way a host changes
// one URL. Run by e2e/proxy_test.go, which plays the provider behind the
// proxy.
//
// Env: PROXY_URL (the route's base URL), PROVIDER (anthropic | openai),
// AGENT_KEY (the agent's own provider key), COMPACTOR_KEY, TASK, TOOL_OUTPUTS
// (a JSON file: the outputs the agent's bash tool returns, in turn),
// TURNS. Prints "proxy-agent: ok <json>" at the end.
import { readFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is required`);
  return v;
};
const provider = env("PROVIDER");
const outputs = JSON.parse(readFileSync(env("TOOL_OUTPUTS"), "utf8"));
const turns = Number(env("TURNS"));
const headers = { "X-Compactor-Key": env("COMPACTOR_KEY"), "X-Compactor-Session": `sdk-${provider}` };
const states = [];
let toolCalls = 0;

// bash is the agent's one tool: it answers each call with the next
// recorded output.
function bash() {
  const out = outputs[toolCalls % outputs.length];
  toolCalls++;
  return out;
}

async function anthropicAgent() {
  const client = new Anthropic({ baseURL: env("PROXY_URL"), apiKey: env("AGENT_KEY"), defaultHeaders: headers, maxRetries: 3 });
  const tools = [{ name: "bash", description: "Run a shell command", input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } }];
  const messages = [{ role: "user", content: env("TASK") }];
  let final = "";
  for (let turn = 0; turn < turns; turn++) {
    const { data: stream, response } = await client.messages
      .create({ model: "claude-sonnet-4-5", max_tokens: 1024, system: "You are a coding agent.", tools, messages, stream: true })
      .withResponse();
    states.push(response.headers.get("x-compactor-state"));
    // The content blocks, built from the stream's events.
    const blocks = [];
    let stop = "";
    for await (const ev of stream) {
      if (ev.type === "content_block_start") blocks[ev.index] = { ...ev.content_block, _json: "" };
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") blocks[ev.index].text += ev.delta.text;
      if (ev.type === "content_block_delta" && ev.delta.type === "input_json_delta") blocks[ev.index]._json += ev.delta.partial_json;
      if (ev.type === "message_delta") stop = ev.delta.stop_reason;
    }
    const content = blocks.map(({ _json, ...b }) => (b.type === "tool_use" ? { ...b, input: JSON.parse(_json || "{}") } : b));
    messages.push({ role: "assistant", content });
    if (stop !== "tool_use") {
      final = content.filter((b) => b.type === "text").map((b) => b.text).join("");
      break;
    }
    messages.push({
      role: "user",
      content: content.filter((b) => b.type === "tool_use").map((b) => ({ type: "tool_result", tool_use_id: b.id, content: bash(b.input.command) })),
    });
  }
  return { final, messages: messages.length };
}

async function openaiAgent() {
  const client = new OpenAI({ baseURL: env("PROXY_URL"), apiKey: env("AGENT_KEY"), defaultHeaders: headers, maxRetries: 3 });
  const tools = [{ type: "function", function: { name: "bash", description: "Run a shell command", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } }];
  const messages = [{ role: "system", content: "You are a coding agent." }, { role: "user", content: env("TASK") }];
  let final = "";
  for (let turn = 0; turn < turns; turn++) {
    const { data: stream, response } = await client.chat.completions
      .create({ model: "gpt-4o", tools, messages, stream: true })
      .withResponse();
    states.push(response.headers.get("x-compactor-state"));
    let text = "";
    const calls = [];
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta ?? {};
      if (d.content) text += d.content;
      for (const tc of d.tool_calls ?? []) {
        calls[tc.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
        if (tc.id) calls[tc.index].id = tc.id;
        if (tc.function?.name) calls[tc.index].function.name += tc.function.name;
        if (tc.function?.arguments) calls[tc.index].function.arguments += tc.function.arguments;
      }
    }
    const msg = { role: "assistant", content: text || null };
    if (calls.length) msg.tool_calls = calls;
    messages.push(msg);
    if (!calls.length) {
      final = text;
      break;
    }
    for (const c of calls) {
      messages.push({ role: "tool", tool_call_id: c.id, content: bash(JSON.parse(c.function.arguments).command) });
    }
  }
  return { final, messages: messages.length };
}

const result = provider === "anthropic" ? await anthropicAgent() : await openaiAgent();
console.log("proxy-agent: ok " + JSON.stringify({ ...result, toolCalls, states }));
