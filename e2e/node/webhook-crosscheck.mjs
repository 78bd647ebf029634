// Cross-checks the Python and TypeScript clients' webhook verification
// against the Standard Webhooks reference library (standardwebhooks, npm):
// the library signs, both verifiers must accept what it signed and reject
// a tampered body or id, an old or future timestamp and a wrong secret,
// exactly as the library itself does. Run by e2e/clients_test.go from the
// repository root, after tsc compiled clients/typescript:
//
//   node e2e/node/webhook-crosscheck.mjs
//
// Exits non-zero on any disagreement.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Webhook } from "standardwebhooks";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ts = await import(pathToFileURL(path.join(root, "clients/typescript/dist/src/index.js")).href);

const secret = "whsec_" + randomBytes(24).toString("base64");
const otherSecret = "whsec_" + randomBytes(24).toString("base64");
const wh = new Webhook(secret);
const other = new Webhook(otherSecret);
const now = new Date();
const minutes = (m) => new Date(now.getTime() + m * 60_000);
const payload = { type: "run.finished", data: { run_id: "run-1", session: "s-1", status: "succeeded", note: "naïve ✓ \"quoted\"" } };
const body = JSON.stringify(payload);

function signed(name, expect, { id = "msg_" + randomBytes(8).toString("hex"), at = now, by = wh, sent = body, headerId, sigs } = {}) {
  const sig = by.sign(id, at, body);
  return {
    name, expect, secret, body: sent,
    headers: {
      "webhook-id": headerId ?? id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": sigs ? sigs(sig) : sig,
    },
  };
}

const cases = [
  signed("valid", true),
  signed("valid, four minutes old", true, { at: minutes(-4) }),
  signed("valid among several signatures", true, { sigs: (s) => `v1,${randomBytes(32).toString("base64")} v1a,bm90IHVzZWQ= ${s}` }),
  signed("tampered body", false, { sent: body.replace("succeeded", "failed") }),
  signed("tampered id", false, { headerId: "msg_other" }),
  signed("old timestamp", false, { at: minutes(-6) }),
  signed("future timestamp", false, { at: minutes(6) }),
  signed("wrong secret", false, { by: other }),
  signed("signature of another version", false, { sigs: (s) => s.replace(/^v1,/, "v2,") }),
];

let failed = 0;
function agree(who, c, ok, detail) {
  if (ok !== c.expect) {
    failed++;
    console.error(`FAIL ${who}: ${c.name}: ${c.expect ? "rejected" : "accepted"} ${detail ?? ""}`);
  }
}

for (const c of cases) {
  // The library itself, so that the cases say what the spec says.
  let ok = true;
  try {
    wh.verify(c.body, c.headers);
  } catch {
    ok = false;
  }
  agree("standardwebhooks", c, ok);
  // TypeScript, with a string body, bytes and fetch Headers.
  for (const [form, b, h] of [["string", c.body, c.headers], ["bytes", new TextEncoder().encode(c.body), new Headers(c.headers)]]) {
    try {
      const got = ts.verifyWebhook(c.secret, h, b);
      agree(`typescript (${form})`, c, true);
      if (JSON.stringify(got) !== JSON.stringify(JSON.parse(c.body))) {
        failed++;
        console.error(`FAIL typescript: ${c.name}: payload ${JSON.stringify(got)}`);
      }
    } catch (e) {
      if (!(e instanceof ts.WebhookVerificationError)) {
        failed++;
        console.error(`FAIL typescript: ${c.name}: ${e}`);
      }
      agree(`typescript (${form})`, c, false, e.message);
    }
  }
}

// Python, in one process over every case.
const py = spawnSync(process.env.PYTHON || "python3", [path.join(root, "clients/python/tests/webhook_check.py")],
  { input: JSON.stringify(cases), encoding: "utf8" });
if (py.status !== 0) {
  console.error(`FAIL python: exit ${py.status}: ${py.error ?? ""} ${py.stderr}`);
  process.exit(1);
}
const results = JSON.parse(py.stdout);
if (results.length !== cases.length) {
  console.error(`FAIL python: ${results.length} answers for ${cases.length} cases`);
  process.exit(1);
}
results.forEach((r, i) => {
  const c = cases[i];
  agree("python", c, r.ok, r.error);
  if (r.ok && JSON.stringify(r.payload) !== JSON.stringify(payload)) {
    failed++;
    console.error(`FAIL python: ${c.name}: payload ${JSON.stringify(r.payload)}`);
  }
});

if (failed > 0) {
  console.error(`${failed} disagreements`);
  process.exit(1);
}
console.log(`webhook cross-check: ok (${cases.length} cases; standardwebhooks, typescript, python agree)`);
