#!/usr/bin/env node
// tok_bench_tiktoken.mjs: encoding speed of the npm package tiktoken (WASM build of
// OpenAI's tiktoken, cl100k_base, one thread) on a text file: best of N runs of
// encode_ordinary, the same work `olmo tokenize --bench N` times. Prints one line in the
// same format on stdout. usage: node scripts/tok_bench_tiktoken.mjs FILE [N]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { get_encoding } = require("tiktoken");
// The package does not export its package.json; read it next to the resolved entry.
function tiktokenVersion() {
  const dir = path.dirname(require.resolve("tiktoken"));
  return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
}
const [file, reps = "3"] = process.argv.slice(2);
if (!file) { console.error("usage: node scripts/tok_bench_tiktoken.mjs FILE [N]"); process.exit(2); }
const bytes = fs.readFileSync(file);
const text = bytes.toString("utf8");
const enc = get_encoding("cl100k_base");
let best = Infinity, n = 0;
for (let r = 0; r < Number(reps); r++) {
  const t0 = process.hrtime.bigint();
  n = enc.encode_ordinary(text).length;
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  if (dt < best) best = dt;
}
enc.free();
console.log(`tiktoken (npm ${tiktokenVersion()}, wasm): ${bytes.length} bytes, ${n} tokens, best of ${reps}: ${best.toFixed(3)} s, ${(n / best).toFixed(0)} tokens/s, ${(bytes.length / best / 1e6).toFixed(2)} MB/s`);
