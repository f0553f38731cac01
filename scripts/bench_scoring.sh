#!/usr/bin/env bash
# bench_scoring.sh: held-out scoring speed of olmo.c against llama.cpp on the same model
# (issue 50 item 6; a benchmark, not a test: one run, figures printed). CKPT (an HF
# directory, a run, a checkpoint) is exported to a bf16 GGUF (`olmo export-gguf --type
# bf16`) for llama.cpp (node-llama-cpp's prebuilt CPU build, tests/gguf_llama.mjs), then one
# document of 512 tokens (DOC, raw uint32 ids ending in EOS 100257; default: 512 random ids
# < 100000 then EOS, seed 0) is
#   - scored by `olmo eval` (weights as stored: bf16 kept bf16, fp32 maths): tokens/s from
#     its eval/seconds (the forward and the LM head, loading excluded), and its CE;
#   - prefilled by llama.cpp (one batch of the 512 positions, THREADS threads): tokens/s of
#     its prompt processing; and scored by it (per-position probabilities, tests/gguf_llama.mjs
#     "ce": about 0.1-0.25 s a position for a 100k vocabulary, not timed) for its CE.
# Prints both speeds, both CEs and their difference. llama.cpp computes the bf16 GGUF with
# bf16 activations in its matmuls, olmo.c in fp32 on the same bf16 weights: the CEs agree to
# that rounding, not bitwise.
# Usage: bash scripts/bench_scoring.sh CKPT [DOC.npy] [WORK=runs/bench_scoring]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash scripts/bench_scoring.sh CKPT [DOC.npy] [WORK]" >&2; exit 2; }
CKPT=$1 DOC=${2:-} WORK=${3:-runs/bench_scoring}
OLMO=${OLMO_BIN:-build/olmo} PY=/usr/bin/python3 THREADS=${THREADS:-2}
mkdir -p $WORK
if [ -z "$DOC" ]; then
  DOC=$WORK/doc512.npy
  $PY -c 'import random, struct, sys; random.seed(0); ids = [random.randrange(100000) for _ in range(512)] + [100257]
open(sys.argv[1], "wb").write(struct.pack("<%dI" % len(ids), *ids))' $DOC
fi
[ -f $WORK/model.gguf ] || "$OLMO" export-gguf $CKPT $WORK/model.gguf --type bf16 2>$WORK/export.log
OMP_NUM_THREADS=$THREADS "$OLMO" eval $CKPT --set doc=$DOC eval.eos_id=100257 train.seq_len=512 --json \
  >$WORK/olmo.json 2>$WORK/olmo.err
$PY - $DOC $WORK/model.gguf $THREADS >$WORK/jobs.json <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); ids = list(struct.unpack('<%dI' % (len(b) // 4), b))
m, th = sys.argv[2], int(sys.argv[3])
print(json.dumps([{'model': m, 'greedy': 1, 'prompt': ids[:-1][:512], 'timing': True, 'threads': th},
                  {'model': m, 'ce': 512, 'docs': [sys.argv[1]], 'threads': th}]))
PY
node tests/gguf_llama.mjs $WORK/jobs.json >$WORK/llama.json
$PY - $WORK <<'PY'
import json, sys
w = sys.argv[1]
o, l = json.load(open(f'{w}/olmo.json')), json.load(open(f'{w}/llama.json'))
n = int(o['eval/doc/tokens']); ot = n / o['eval/seconds']; lt = len(json.load(open(f'{w}/jobs.json'))[0]['prompt']) / l[0]['prefill_s']
lce = l[1][0]['ce']
print(f'olmo.c  eval:    {n} tokens in {o["eval/seconds"]:.2f} s = {ot:.1f} tokens/s, ce {o["eval/doc/ce"]:.6f}')
print(f'llama.cpp prefill: {l[0]["prefill_s"]:.2f} s = {lt:.1f} tokens/s, ce {lce:.6f} (bf16 GGUF)')
print(f'olmo.c / llama.cpp speed {ot / lt:.2f}; ce difference {o["eval/doc/ce"] - lce:+.3g} nats')
PY
