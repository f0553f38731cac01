#!/usr/bin/env bash
# bitwise_check.sh: does a change move any bit? The same short runs with two olmo binaries
# (the previous one and the new one), final weights compared byte for byte.
#
#   bash scripts/bitwise_check.sh OLD_OLMO NEW_OLMO
#
# Runs (tests/resume_lib.sh's olmo3-tiny recipe: seq 32, global batch 8, micro-batch 2; 4 steps):
# one process at 2 OpenMP threads in fp32 and in bf16; under mpirun (1 thread per rank)
# W = 2 with dist.shard optim, grads and full, and context parallelism C = 2; then fp32 and
# bf16 with a 3000-token vocabulary and 2048-token micro-batches (the LM head's several
# vocab blocks and token chunks). Prints one
# line per run ("bitwise" or "DIFFER"), exit 0 when every run is bitwise, 1 otherwise.
# The CPU backend only; CUDA changes are checked in the emulation (tests/test_cuda_emu.sh).
[ $# = 2 ] && [ -x "$1" ] && [ -x "$2" ] || { echo "usage: bash scripts/bitwise_check.sh OLD_OLMO NEW_OLMO" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2")
cd "$(dirname "$0")/.."
source tests/resume_lib.sh   # $TMP/tok.npy (ids < 1000) and $TMP/r.yml (olmo3-tiny, the sizes above)
set +e
STEPS=(train.max_steps=4 ckpt.interval=0)
ok=1
# The last two: a 3000-token vocabulary (padded to 3072: three of lmhead.c's 1024-column
# vocab blocks) and 2048 tokens a micro-batch (four of its 512-token chunks), fp32 and bf16.
BIG="model.vocab_size=3000 train.seq_len=256 train.micro_batch=8"
for run in "1|" "1|train.precision=bf16" "2|" "2|dist.shard=grads" "2|dist.shard=full" "2|dist.context_parallel=2" \
           "1|$BIG" "1|$BIG train.precision=bf16"; do
  W=${run%%|*} K=${run#*|}
  for b in old new; do
    O=$OLD; [ $b = new ] && O=$NEW
    d="$TMP/$b"; rm -rf "$d"
    if [ "$W" = 1 ]; then OMP_NUM_THREADS=2 "$O" train "$TMP/r.yml" train.run_dir="$d" "${STEPS[@]}" $K >"$d.log" 2>&1
    else mpirun --oversubscribe -x OMP_NUM_THREADS=1 -np "$W" "$O" train "$TMP/r.yml" train.run_dir="$d" "${STEPS[@]}" $K \
      >"$d.log" 2>&1
    fi || { echo "W=$W $K: the $b binary failed:"; tail -3 "$d.log"; ok=0; continue 2; }
  done
  if cmp -s "$TMP/old/model.safetensors" "$TMP/new/model.safetensors"; then echo "bitwise: W=$W $K"
  else echo "DIFFER:  W=$W $K"; ok=0; fi
done
[ $ok = 1 ] && echo "every run bitwise" && exit 0
exit 1
