// A webhook receiver for the e2e tests that verifies every delivery with
// the Standard Webhooks reference library (npm `standardwebhooks`), not
// with this repository's code.
//
// It listens on the socket LISTEN_FD names (else 127.0.0.1, an ephemeral
// port), prints {"port": N} on stdout, then reads the endpoint's secret
// as the first line of stdin.
// PLAN (env) lists the status codes to answer, in order ("500,200"); once
// used up it answers 200. Every request is printed as one JSON line:
// {"id", "type", "run_id", "verified", "error", "answered"}. A delivery
// that fails verification is answered 400 whatever the plan says.
import http from "node:http";
import readline from "node:readline";
import { Webhook } from "standardwebhooks";

const plan = (process.env.PLAN || "").split(",").filter(Boolean).map(Number);
let secret = null;
const waiting = [];

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (secret === null) {
    secret = line.trim();
    for (const go of waiting.splice(0)) go();
  }
});

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const handle = () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const line = { id: req.headers["webhook-id"] || "", verified: false, answered: 0 };
      try {
        const payload = new Webhook(secret).verify(body, req.headers);
        line.verified = true;
        line.type = payload.type;
        line.run_id = payload.data && payload.data.run_id;
        line.status = payload.data && payload.data.status;
      } catch (err) {
        line.error = String(err && err.message ? err.message : err);
      }
      line.answered = line.verified ? (plan.length ? plan.shift() : 200) : 400;
      process.stdout.write(JSON.stringify(line) + "\n");
      res.writeHead(line.answered, { "Content-Type": "text/plain" });
      res.end(line.answered < 300 ? "ok" : "not now");
    };
    if (secret === null) waiting.push(handle);
    else handle();
  });
});

// LISTEN_FD: a listening socket handed over by the test, whose port it
// allow-listed beforehand.
const listenOn = process.env.LISTEN_FD ? { fd: Number(process.env.LISTEN_FD) } : { port: 0, host: "127.0.0.1" };
server.listen(listenOn, () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
