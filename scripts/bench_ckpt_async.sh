#!/usr/bin/env bash
# bench_ckpt_async.sh: what a checkpoint costs the training loop on train.backend=cuda,
# ckpt.async true (the state copied to host memory at the step boundary, written in the
# background; at W > 1 each rank its own shard) vs false (one device: streamed from the
# device tensor by tensor, the loop waiting for the whole write): the "blocking_s" of every
# "checkpoint" record of metrics.jsonl, and the step times around them.
# Usage: scripts/bench_ckpt_async.sh [OLMO_BIN [PRESET [WORLD]]]
#   (default build/olmo, olmo3-20m, 1; the emulated backend: build-emu/olmo, and for
#   WORLD 2 CUEMU_DEVICES=2 so that each rank has its own device and runs NCCL ZeRO-1)
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${1:-$PWD/build/olmo}
PRESET=${2:-olmo3-20m}
W=${3:-1}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 - "$TMP/tok.npy" <<'PY'
import random, struct, sys
random.seed(7)
open(sys.argv[1], 'wb').write(struct.pack('<20000I', *[random.randrange(1000) for _ in range(20000)]))
PY
cat > "$TMP/r.yml" <<YML
model: {preset: $PRESET}
train: {seq_len: 32, global_batch: $((2 * W)), micro_batch: 1, max_steps: 6, backend: cuda}
data: {paths: [$TMP/tok.npy]}
ckpt: {interval: 2}
eval: {off: true}
YML
for async in true false; do
  d=$TMP/run-$async
  run=("$OLMO" train "$TMP/r.yml" train.run_dir="$d" ckpt.async=$async)
  [ "$W" -gt 1 ] && run=(mpirun --oversubscribe --allow-run-as-root -np "$W" -x OMP_NUM_THREADS=1 "${run[@]}")
  "${run[@]}" >"$d.log" 2>&1 || { tail -20 "$d.log"; exit 1; }
  /usr/bin/python3 - "$d/metrics.jsonl" "$async" "$W" "$PRESET" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ck = [r for r in recs if r.get('kind') == 'checkpoint']
st = [r['step_time'] for r in recs if r.get('kind') == 'train']
print('%s W=%s ckpt.async=%-5s blocking_s per checkpoint: %s (steps %s); step time median %.3fs' % (
    sys.argv[4], sys.argv[3], sys.argv[2], ' '.join('%.3f' % r['blocking_s'] for r in ck),
    ' '.join(str(r['step']) for r in ck), sorted(st)[len(st) // 2] if st else 0))
PY
done
