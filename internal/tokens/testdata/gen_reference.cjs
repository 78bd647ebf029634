// Generates the reference token counts the tests compare against, with the
// npm package "tiktoken" (JS/WASM bindings of OpenAI's tiktoken Rust core,
// vocabularies bundled, no download). Not part of the build.
//
//   cd "$(mktemp -d)" && npm install tiktoken@1.0.22
//   NODE_PATH=$PWD/node_modules node /path/to/gen_reference.cjs /path/to/internal/tokens/testdata ../shared/data
//
// Writes tiktoken_reference.json (published examples plus deterministic
// random strings over an alphabet of tricky pieces) and
// tiktoken_data_counts.json (per-message content counts of the shared
// conversations, if the data folder is given).
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");

const outDir = process.argv[2];
const dataDir = process.argv[3];
const encs = { cl100k_base: get_encoding("cl100k_base"), o200k_base: get_encoding("o200k_base") };
const count = (s) => ({
  cl100k_base: encs.cl100k_base.encode_ordinary(s).length,
  o200k_base: encs.o200k_base.encode_ordinary(s).length,
});

const fixed = [
  "", "hello world", "tiktoken is great!", "antidisestablishmentarianism", "2 + 2 = 4",
  "お誕生日おめでとう", "today\n ", "today\n \n", "today\n  \n", "rer", "'rer", " \u00850", "👍",
  "hello <|endoftext|>", "请考试我的软件！12345",
  "def f(x):\n    if x:\n        return 1\n    \n    return 2\n",
  "func main() {\n\tfmt.Println(\"hi\")\n\t\n}\n",
  "{\"command\": \"grep -r \\\"Content-Length\\\" requests\"}",
  "x".repeat(10000), " \n".repeat(2000), "\n".repeat(3000), " ".repeat(5000) + "x",
];

// mulberry32: a small deterministic PRNG, so the file is reproducible.
let seed = 20260101;
function rand() {
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const alphabet = [
  "a", "b", "Z", "Hello", "the", "É", "é", "e\u0301", "\u0301", "1", "23", "4567", "=", "/", "//",
  "'", "'s", "'RE", "-", "_", "(", ")", "{", "}", ".", ",", ":", "\"", "\\", " ", " ", " ", "  ",
  "    ", "\t", "\n", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u0085",
  "日本", "語", "😀", "👍", "<|endoftext|>", "Ω", "ß", "ǅ", "ʰ", "١٢",
];
const random = [];
for (let i = 0; i < 3000; i++) {
  const n = 1 + Math.floor(rand() * 24);
  let s = "";
  for (let k = 0; k < n; k++) s += alphabet[Math.floor(rand() * alphabet.length)];
  random.push(s);
}

const cases = [...fixed, ...random].map((text) => ({ text, ...count(text) }));
fs.writeFileSync(path.join(outDir, "tiktoken_reference.json"),
  JSON.stringify({ generator: "npm tiktoken@1.0.22 encode_ordinary", cases }, null, 0) + "\n");

if (dataDir) {
  const files = [];
  for (const sub of ["swe-agent-gemini", "swe-agent-deepseek"]) {
    for (const f of fs.readdirSync(path.join(dataDir, sub)).sort()) {
      if (!f.endsWith(".json")) continue;
      const d = JSON.parse(fs.readFileSync(path.join(dataDir, sub, f)));
      const messages = [];
      d.messages.forEach((m, i) => {
        if (typeof m.content === "string") messages.push({ index: i, ...count(m.content) });
      });
      files.push({ file: sub + "/" + f, messages });
    }
  }
  fs.writeFileSync(path.join(outDir, "tiktoken_data_counts.json"),
    JSON.stringify({ generator: "npm tiktoken@1.0.22 encode_ordinary", files }, null, 0) + "\n");
}
for (const e of Object.values(encs)) e.free();
