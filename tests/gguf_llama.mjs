// gguf_llama.mjs: llama.cpp's side of tests/test_gguf.sh, through node-llama-cpp (its
// prebuilt CPU library, never a build or a download: gpu false, build "never").
//   node tests/gguf_llama.mjs JOBS.json   runs the jobs (one process: llama.cpp loads once)
// and prints one JSON array of their results. A job is one of
//   {"model": M, "ce": T, "docs": [DOC.npy...]}   per-document held-out CE: [{tokens, ce}]
//   {"model": M, "greedy": N, "prompt": [ids]}    N greedy tokens after the prompt: [ids]; with
//                                                 "timing": true {ids, prefill_s, decode_tokens_per_s}
//                                                 (scripts/bench_scoring.sh: prompt processing speed)
//   {"model": M, "greedy": N, "text": S}          the same from a text prompt (tokenized by
//                                                 llama.cpp): {prompt, ids, text, prefill_s,
//                                                 decode_tokens_per_s} (scripts/bench_gguf.sh)
//   {"model": M, "tokenize": FILE, "special": b}  llama.cpp's ids of FILE's text: [ids]
//
// CE follows `olmo eval` (docs/eval.md): a document d[0..n) (EOS last) is scored on the
// targets d[1..m+1) from the inputs d[0..m), m = min(n - 1, T). node-llama-cpp gives no raw
// logits, only each position's next-token probabilities over the whole vocabulary
// (temperature 1, no top-k/top-p/min-p: the raw logits l), computed in float32 as
// p_i = expf(l_i - l_max) / sum. The ratio p_i / p_max = expf(l_i - l_max) (the division by
// the float32 sum cancels up to one rounding each), so d_i = ln p_i - ln p_max recovers
// l_i - l_max to about 2 float32 roundings (1.2e-7 absolute), and the log-softmax is taken
// in float64 from those: -log p_target = -(d_t - ln sum_i e^{d_i}). A token whose float32
// probability underflowed to 0 (l_i - l_max < -103) contributes below 1e-44 to the sum.
import fs from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, logLevel: LlamaLogLevel.error });
const models = new Map();
async function load(p) {
  if (!models.has(p)) models.set(p, await llama.loadModel({ modelPath: p, gpuLayers: 0 }));
  return models.get(p);
}

function readDoc(p) {
  const b = fs.readFileSync(p);
  return Array.from(new Uint32Array(b.buffer, b.byteOffset, b.length / 4));
}

let threads = 1;   // a job's "threads" sets it (scripts/bench_gguf.sh: 2)
async function context(model, n) {
  // F32 KV cache (ggml type 0), flash attention off: no rounding beyond the weights'.
  return model.createContext({ contextSize: Math.max(n, 64), batchSize: Math.max(n, 64), flashAttention: false,
                               threads, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
}

const RAW = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 };

async function ce(model, T, files) {
  const out = [];
  for (const f of files) {
    const d = readDoc(f);
    const m = Math.min(d.length - 1, T);
    const ctx = await context(model, m);
    const seq = ctx.getSequence();
    let sum = 0;
    // In pieces of 32 positions (the sequence keeps its KV cache between calls): each
    // position's probabilities are a Map over the whole vocabulary (4 MB for dolma2's).
    for (let p0 = 0; p0 < m; p0 += 32) {
      const p1 = Math.min(m, p0 + 32);
      const input = d.slice(p0, p1).map((t) => [t, { generateNext: { probabilities: true, options: RAW } }]);
      const res = await seq.controlledEvaluate(input);
      for (let i = p0; i < p1; i++) {
        const probs = res[i - p0].next.probabilities;
        let pmax = 0;
        for (const p of probs.values()) if (p > pmax) pmax = p;
        const lmax = Math.log(pmax);
        let s = 0;
        for (const p of probs.values()) if (p > 0) s += Math.exp(Math.log(p) - lmax);
        const pt = probs.get(d[i + 1]) ?? 0;
        if (!(pt > 0)) throw new Error(`${f}: target ${d[i + 1]} at ${i} has probability 0`);
        sum += -((Math.log(pt) - lmax) - Math.log(s));
      }
    }
    out.push({ tokens: m, ce: sum / m });
    await ctx.dispose();
  }
  return out;
}

async function greedy(model, n, ids, timing) {
  const ctx = await context(model, ids.length + n);
  const seq = ctx.getSequence();
  const next = { generateNext: { token: true, options: { temperature: 0 } } };
  const t0 = performance.now();
  let res = await seq.controlledEvaluate(ids.map((t, i) => (i === ids.length - 1 ? [t, next] : t)));
  const t1 = performance.now();
  const got = [];
  for (let k = 0; k < n; k++) {
    const t = res[res.length - 1].next.token;
    got.push(t);
    if (k + 1 < n) res = await seq.controlledEvaluate([[t, next]]);
  }
  const t2 = performance.now();
  await ctx.dispose();
  if (timing) timing.push((t1 - t0) / 1000, (n - 1) / ((t2 - t1) / 1000));
  return got;
}

const results = [];
for (const job of JSON.parse(fs.readFileSync(process.argv[2], "utf8"))) {
  const model = await load(job.model);
  threads = job.threads ?? 1;
  if (job.ce !== undefined) results.push(await ce(model, job.ce, job.docs));
  else if (job.greedy !== undefined && job.text !== undefined) {
    const prompt = Array.from(model.tokenize(job.text, false)), timing = [];
    const ids = await greedy(model, job.greedy, prompt, timing);
    results.push({ prompt, ids, text: model.detokenize(ids), prefill_s: timing[0], decode_tokens_per_s: timing[1] });
  } else if (job.greedy !== undefined && job.timing) {
    const timing = [], ids = await greedy(model, job.greedy, job.prompt, timing);
    results.push({ ids, prefill_s: timing[0], decode_tokens_per_s: timing[1] });
  } else if (job.greedy !== undefined) results.push(await greedy(model, job.greedy, job.prompt));
  else if (job.tokenize !== undefined) results.push(Array.from(model.tokenize(fs.readFileSync(job.tokenize, "utf8"), !!job.special)));
  else throw new Error(`unknown job ${JSON.stringify(job)}`);
}
console.log(JSON.stringify(results));
for (const m of models.values()) await m.dispose();
await llama.dispose();
