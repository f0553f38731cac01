#!/usr/bin/env bash
# bitwise_check.sh: does a change move any bit? The same short runs with two olmo binaries
# (the previous one and the new one), final weights compared byte for byte.
#
#   bash scripts/bitwise_check.sh OLD_OLMO NEW_OLMO
#
# Runs (olmo3-tiny, 4 steps, seq 32, global batch 8, micro-batch 2, synthetic tokens < 1000):
# one process at 2 OpenMP threads in fp32 and in bf16; under mpirun (1 thread per rank)
# W = 2 with dist.shard optim, grads and full, and context parallelism C = 2. Prints one
# line per run ("bitwise" or "DIFFER"), exit 0 when every run is bitwise, 1 otherwise.
# The CPU backend only; CUDA changes are checked in the emulation (tests/test_cuda_emu.sh).
set -uo pipefail
[ $# = 2 ] && [ -x "$1" ] && [ -x "$2" ] || { echo "usage: bash scripts/bitwise_check.sh OLD_OLMO NEW_OLMO" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2")
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
$PY - "$TMP/tok.npy" <<'PY'
import random, struct, sys
random.seed(7)
open(sys.argv[1], 'wb').write(struct.pack('<60000I', *[random.randrange(1000) for _ in range(60000)]))
PY
cat >"$TMP/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 8, micro_batch: 2, max_steps: 4, run_dir: $TMP/unused}
optim: {lr: 0.003}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
eval: {off: true}
YML
ok=1
for run in "1|" "1|train.precision=bf16" "2|" "2|dist.shard=grads" "2|dist.shard=full" "2|dist.context_parallel=2"; do
  W=${run%%|*} K=${run#*|}
  for b in old new; do
    O=$OLD; [ $b = new ] && O=$NEW
    d="$TMP/$b"; rm -rf "$d"
    if [ "$W" = 1 ]; then OMP_NUM_THREADS=2 "$O" train "$TMP/r.yml" train.run_dir="$d" $K >"$d.log" 2>&1
    else mpirun --oversubscribe -x OMP_NUM_THREADS=1 -np "$W" "$O" train "$TMP/r.yml" train.run_dir="$d" $K >"$d.log" 2>&1
    fi || { echo "W=$W $K: the $b binary failed:"; tail -3 "$d.log"; ok=0; continue 2; }
  done
  if cmp -s "$TMP/old/model.safetensors" "$TMP/new/model.safetensors"; then echo "bitwise: W=$W $K"
  else echo "DIFFER:  W=$W $K"; ok=0; fi
done
[ $ok = 1 ] && echo "every run bitwise" && exit 0
exit 1
