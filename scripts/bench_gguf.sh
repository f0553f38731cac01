#!/usr/bin/env bash
# bench_gguf.sh: the figures of docs/gguf.md. The main command's models (runs/brown, from
# scripts/main.sh) exported with `olmo export-gguf` and run in llama.cpp (node-llama-cpp's
# prebuilt CPU build, tests/gguf_llama.mjs):
#   1. held-out CE of the out-of-domain set (science_fiction) by llama.cpp vs `olmo eval`:
#      stage 2 at T = 256 on its first K2 documents and stage 3 (YaRN) at T = 1024 on its
#      first K3 (env K2, K3; default 2 and 1: node-llama-cpp hands over each position's
#      probabilities as a Map over the 100352 rows, about 0.1-0.25 s a position here, so the
#      whole set at T = 1024, 6144 positions, would take most of an hour);
#   2. a greedy continuation of PROMPT by the final (stage-3) model in llama.cpp (F32 and
#      Q8_0; prefill time, decode tokens/s at 2 threads) beside `olmo generate --greedy`.
# Usage: bash scripts/bench_gguf.sh [RUNS_DIR=runs/brown] [WORK=runs/gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/brown} WORK=${2:-runs/gguf} K2=${K2:-2} K3=${K3:-1}
OLMO=${OLMO_BIN:-build/olmo}
PY=/usr/bin/python3
SET=data/brown/tokens/science_fiction.heldout.npy
PROMPT="The old man looked at the stars and said"
N=48
for f in $RUNS/stage2/model.safetensors $RUNS/stage3/model.safetensors $SET; do
  [ -f $f ] || { echo "bench_gguf: $f missing: run scripts/main.sh first" >&2; exit 2; }
done
mkdir -p $WORK/docs
"$OLMO" export-gguf $RUNS/stage2 $WORK/stage2.gguf
# peak RSS of the export against the model's size (streamed: about the largest tensor)
/usr/bin/time -f "export-gguf stage 3 F32: peak RSS %M KiB, %e s" "$OLMO" export-gguf $RUNS/stage3 $WORK/stage3.gguf
"$OLMO" export-gguf $RUNS/stage3 $WORK/stage3-q8_0.gguf --type q8_0
ls -l $RUNS/stage3/model.safetensors $WORK/stage3.gguf $WORK/stage3-q8_0.gguf
# the set's documents, one file each (tests/gguf_llama.mjs scores a file as one document)
$PY - $SET $WORK $K2 $K3 <<'PY'
import sys, numpy as np
t = np.fromfile(sys.argv[1], dtype=np.uint32)
w, k2, k3 = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ends = np.flatnonzero(t == 100257)
start = 0
for i, e in enumerate(ends):
    t[start:e + 1].tofile(f'{w}/docs/d{i}.npy'); start = e + 1
t[:ends[k2 - 1] + 1].tofile(f'{w}/sf2.npy')   # the first K2 / K3 documents as set files for olmo eval
t[:ends[k3 - 1] + 1].tofile(f'{w}/sf3.npy')
print(f'science_fiction held-out: {len(ends)} documents, {len(t)} tokens; scored: {k2} (stage 2), {k3} (stage 3)')
PY
"$OLMO" eval $RUNS/stage2 --set sf=$WORK/sf2.npy --json >$WORK/eval2.json 2>/dev/null
"$OLMO" eval $RUNS/stage3 --set sf=$WORK/sf3.npy --json >$WORK/eval3.json 2>/dev/null
t0=$(date +%s.%N)
"$OLMO" generate $RUNS/stage3 --prompt "$PROMPT" --greedy --max-new $N --eos -1 >$WORK/olmo_gen.txt 2>$WORK/olmo_gen.err
$PY - $WORK "$PROMPT" $N $K2 $K3 <<'PY'
import json, sys
w, prompt, n, k2, k3 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
docs = [f'{w}/docs/d{i}.npy' for i in range(max(k2, k3))]
jobs = [{'model': f'{w}/stage2.gguf', 'ce': 256, 'docs': docs[:k2], 'threads': 2},
        {'model': f'{w}/stage3.gguf', 'ce': 1024, 'docs': docs[:k3], 'threads': 2},
        {'model': f'{w}/stage3.gguf', 'greedy': n, 'text': prompt, 'threads': 2},
        {'model': f'{w}/stage3-q8_0.gguf', 'greedy': n, 'text': prompt, 'threads': 2}]
json.dump(jobs, open(f'{w}/jobs.json', 'w'))
PY
node tests/gguf_llama.mjs $WORK/jobs.json >$WORK/llama.json
$PY - $WORK "$PROMPT" <<'PY'
import json, sys
w, prompt = sys.argv[1:3]
L = json.load(open(f'{w}/llama.json'))
for name, res, ev in (('stage 2, T=256, F32', L[0], 'eval2'), ('stage 3 (YaRN), T=1024, F32', L[1], 'eval3')):
    e = json.load(open(f'{w}/{ev}.json'))
    tok = sum(r['tokens'] for r in res)
    ce = sum(r['tokens'] * r['ce'] for r in res) / tok
    assert tok == e['eval/sf/tokens'], (tok, e['eval/sf/tokens'])
    print(f'science_fiction held-out, {name}: llama.cpp {ce:.8f} vs olmo eval {e["eval/sf/ce"]:.8f} '
          f'({tok} targets, {len(res)} documents; |diff| {abs(ce - e["eval/sf/ce"]):.2e}; per document '
          + ', '.join(f'{r["ce"]:.8f}' for r in res) + ')')
olmo = open(f'{w}/olmo_gen.txt').read()
for name, g in (('F32', L[2]), ('Q8_0', L[3])):
    print(f'llama.cpp {name}: prompt {json.dumps(prompt)} ({len(g["prompt"])} tokens), prefill {g["prefill_s"]*1000:.0f} ms, '
          f'decode {g["decode_tokens_per_s"]:.1f} tokens/s (2 threads)')
    print(f'  output: {json.dumps(g["text"])}')
print(f'olmo generate --greedy: {json.dumps(olmo)}')
print(f'greedy text equal (llama.cpp F32 vs olmo): {L[2]["text"] == olmo.rstrip(chr(10))}')
PY
echo "olmo generate: $(tail -1 $WORK/olmo_gen.err)"
