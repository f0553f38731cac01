#!/usr/bin/env bash
# test_cuda_shard.sh: dist.shard grads (ZeRO-2) and full (ZeRO-3/FSDP) on train.backend=cuda
# over NCCL (src/train/cuda/fsdp_cuda.cu, docs/distributed.md "Sharding on CUDA"), one
# device per rank: 2 and 4 emulated devices under tests/cuemu (tests/test_cuda_emu.sh runs
# it with the emulated binary), or the GPUs of a real machine (OLMO_TEST_NCCL_RANKS=N).
#   - one GPU (no NCCL): grads and full bitwise equal to the unsharded step;
#   - refused with exit 2, naming the key, nothing written: grads with an uneven micro-batch
#     split, grads and full without NCCL (OLMO_CUDA_NCCL=0: the host-MPI fallback lacks the
#     collectives), HSDP with context parallelism;
#   - parity with the CPU (W = 1), each step from the reference's state before it
#     (tests/step_check.py): fp32 full at W = 2 and 4 and grads at W = 2 within FP32TOL of
#     the CPU's step (bounds below); bf16 full at W = 2 within BF16TOL of bf16 ZeRO-1's at
#     W = 2 (its CPU parity is test_cuda.sh's);
#   - bitwise run to run (full, W = 2, bf16: metrics and model.safetensors);
#   - bitwise equal to CUDA ZeRO-1 where the sums are the same: one micro-batch per rank
#     (W = 4, micro-batch 2 of global 8), full and grads vs optim, bf16; and grads == full at
#     W = 2 with two micro-batches per rank (the same gradient path, only the weights differ
#     in where they live);
#   - a checkpoint of full at W = 2 resumes at W = 2 full and at W = 2 optim (ZeRO-1) on the
#     same samples: the resumed run continues the uninterrupted one (bitwise, and within
#     BF16TOL of full's step after the change of mode);
#   - the device peak in metrics.jsonl (memory_device_gib) and no plan/allocation mismatch;
#   - HSDP (dist.shard_group: 2 at W = 4: 2 groups of 2, the shard summed over its 2 replicas
#     by ncclAllReduce): fp32 full and optim each step within FP32TOL of the CPU's; bf16 full
#     twice bitwise identical and each step within BF16TOL of bf16 ZeRO-1's at W = 4; at one micro-batch per rank full and
#     grads bitwise equal to HSDP optim (the same sums); G = 1 (every rank whole, replicas
#     only) and the host-MPI fallback (OLMO_CUDA_NCCL=0) each step within FP32TOL of the CPU's; a
#     checkpoint of HSDP full resumes bitwise;
#   - a lost peer (rank 1 stopped, or killed) ends the job within a bound, naming it.
source "$(dirname "$0")/resume_lib.sh"
export CUEMU_DEVICES=${CUEMU_DEVICES:-4} OLMO_CUDA_NCCL=1
RANKS=${OLMO_TEST_NCCL_RANKS:-0}   # devices, one per rank (test_cuda_emu.sh: 4 emulated)
"$OLMO" train "$TMP/r.yml" train.backend=cuda train.max_steps=1 ckpt.interval=0 train.run_dir="$TMP/probe" >"$TMP/probe.log" 2>&1 || {
  grep -Eq "no CUDA device|built without CUDA" "$TMP/probe.log" && { echo "SKIP: no CUDA device"; exit 0; }
  cat "$TMP/probe.log"; fail "probe run failed"; }
C="train.backend=cuda ckpt.interval=0 train.max_steps=6"
# One GPU (no communicator; scripts/gpu-check.sh's shard_w1): the same parts, part buffers,
# gather stream and events with local copies only; bitwise the unsharded step (4 micro-
# batches: the shard's copy-then-add of each part equals the in-place GEMM accumulation).
for m in optim grads full; do
  train "$TMP/w1-$m" $C dist.shard=$m || { cat "$TMP/w1-$m.log"; fail "W=1 $m failed"; }
  ! grep -q "the memory plan (olmo info) says" "$TMP/w1-$m.log" || fail "W=1 $m: allocation != plan"
done
grep -q "dist.shard full on one GPU" "$TMP/w1-full.log" || { cat "$TMP/w1-full.log"; fail "W=1 full did not shard"; }
for m in grads full; do
  same_metrics "$TMP/w1-optim" "$TMP/w1-$m"
  cmp "$TMP/w1-optim/model.safetensors" "$TMP/w1-$m/model.safetensors" || fail "W=1 $m != optim"
done
echo "one GPU: dist.shard grads and full bitwise equal to the unsharded step (bf16, 4 micro-batches)"
command -v mpirun >/dev/null && ldd "$OLMO" | grep -q libmpi || { echo "SKIP: the multi-rank checks need mpirun and an MPI build"; echo "test_cuda_shard.sh: all checks passed"; exit 0; }
[ "$RANKS" -ge 2 ] || { echo "SKIP: the multi-rank checks need 2 devices (OLMO_TEST_NCCL_RANKS)"; echo "test_cuda_shard.sh: all checks passed"; exit 0; }
mrun() { local w=$1 d=$2; shift 2; mpirun --oversubscribe --allow-run-as-root -np "$w" -x OMP_NUM_THREADS=1 -x CUEMU_DEVICES \
  "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1 || { cat "$d.log"; fail "$d: exit $?"; }
  ! grep -q "the memory plan (olmo info) says" "$d.log" || { grep "memory plan" "$d.log"; fail "$d: allocation != plan"; }; }
mbad() {   # mbad W NAME WANT [args]: exit 2 with WANT in the log
  local w=$1 name=$2 want=$3 d="$TMP/bad-$2" rc=0; shift 3
  mpirun --oversubscribe --allow-run-as-root -np "$w" -x OMP_NUM_THREADS=1 -x CUEMU_DEVICES -x OLMO_CUDA_NCCL "$OLMO" train \
    "$TMP/r.yml" train.run_dir="$d" train.backend=cuda "$@" >"$d.log" 2>&1 || rc=$?
  [ $rc = 2 ] || { cat "$d.log"; fail "$name: exit $rc, want 2"; }
  grep -q -- "$want" "$d.log" || { cat "$d.log"; fail "$name: message lacks '$want'"; }
  [ ! -e "$d" ] || fail "$name: wrote its run directory"
  echo "refused $name: exit 2, '$want', nothing written"
}
mbad 3 uneven "dist.shard: grads on train.backend: cuda needs the same micro-batches" dist.shard=grads
[ "$RANKS" -lt 4 ] || mbad 4 cp-hsdp "dist.context_parallel 2 with dist.shard_group 2 on train.backend=cuda is not built" \
  dist.context_parallel=2 dist.shard_group=2
for m in full grads; do
  OLMO_CUDA_NCCL=0 mbad 2 no-nccl-$m "dist.shard: $m on train.backend: cuda needs NCCL" dist.shard=$m
done

# Parity with the CPU, fp32 and bf16, step by step: each step of a sharded GPU run from the
# reference's state before it (tests/step_check.py), not two 6-step runs end to end (Adam
# turns rounding noise into lr-sized updates that compound; tests/ref/README.md). Bounds:
# FP32TOL against the CPU's fp32 step (the GPU's and NCCL's sums are the CPU's in another
# order: the gradient within 1e-5 of its tensor's max|g|, the LM head's 1024-row sums at
# sqrt(1024) u = 1.9e-6 each side in the standard estimate, test_parity.sh's 1e-5; the loss
# terms and grad norm, sums of 256 targets' terms and of squares in double, within 1e-6);
# BF16TOL (tests/resume_lib.sh) against bf16 ZeRO-1's step. Each configuration's first 2
# steps (every step is one launch under the emulator: the checks are per step, so steps from
# two states say what six would, in a third of the time).
FP32TOL=(--rho-grad 1e-5 --rho-loss 1e-6 --rho-norm 1e-6)
S=(train.backend=cuda train.max_steps=6)
# vs_ref LABEL REF STEPS W key=value...: each step of STEPS ("A B") on W ranks from REF's state
vs_ref() {
  local label=$1 ref=$2 steps=$3 w=$4 tol=FP32TOL; shift 4
  case " $* " in *" train.precision=fp32 "*) ;; *) tol=BF16TOL ;; esac
  local -n tols=$tol
  step_runs "$TMP/$label" "$ref" "$steps" "mrun $w" "${S[@]}" train.allow_recipe_change=train.precision "$@"
  step_check "$label" "$ref" "$TMP/$label/{k}" "${steps/ /-}" "${tols[@]}" || fail "$label: a step beyond $tol of the reference's"
}
train "$TMP/cpu" train.max_steps=6 ckpt.interval=1 ckpt.keep_last=6
vs_ref f2 "$TMP/cpu" "1 2" 2 train.precision=fp32 dist.shard=full
grep -q "NCCL dist.shard full" "$TMP/f2/1.log" || { cat "$TMP/f2/1.log"; fail "f2 did not run the NCCL full shard"; }
vs_ref g2 "$TMP/cpu" "1 2" 2 train.precision=fp32 dist.shard=grads
grep -q "NCCL dist.shard grads" "$TMP/g2/1.log" || fail "g2 did not run the NCCL grads shard"
for k in 1 2; do
  cmp "$TMP/g2/$k/checkpoints/step-0000000$k/model.safetensors" "$TMP/f2/$k/checkpoints/step-0000000$k/model.safetensors" \
    || fail "fp32 W=2 step $k: grads and full differ"
done
echo "fp32 W=2: full and grads each step within FP32TOL of the CPU's, and bitwise equal to each other"
if [ "$RANKS" -ge 4 ]; then
  vs_ref f4 "$TMP/cpu" "1 2" 4 train.precision=fp32 dist.shard=full
  echo "fp32 W=4 full: each step within FP32TOL of the CPU's"
fi
# bf16 against bf16 ZeRO-1 at the same W from the same state: the sharding alone (another
# order of the same sums), so BF16TOL, which bounds a bf16 step against fp32's, covers it.
mrun 2 "$TMP/b2o" $C dist.shard=optim ckpt.interval=1 ckpt.keep_last=6
vs_ref b2s "$TMP/b2o" "1 2" 2 dist.shard=full
mrun 2 "$TMP/b2" $C dist.shard=full
mrun 2 "$TMP/b2b" $C dist.shard=full
same_metrics "$TMP/b2" "$TMP/b2b"
cmp "$TMP/b2/model.safetensors" "$TMP/b2b/model.safetensors" || fail "two bf16 W=2 full runs differ"
echo "bf16 W=2 full: each step within BF16TOL of bf16 ZeRO-1's, twice bitwise identical"
grep -q '"memory_device_gib":\[' "$TMP/b2/metrics.jsonl" || fail "no memory_device_gib in metrics.jsonl"
grep -q "device peak .* GiB on rank 0" "$TMP/b2.log" || fail "no device peak printed"

# One micro-batch per rank: every shard mode's gradient is ZeRO-1's ncclReduce of the same values.
if [ "$RANKS" -ge 4 ]; then
  for mode in optim grads full; do mrun 4 "$TMP/k-$mode" $C train.micro_batch=2 dist.shard=$mode; done
  for mode in grads full; do
    same_metrics "$TMP/k-optim" "$TMP/k-$mode"
    cmp "$TMP/k-optim/model.safetensors" "$TMP/k-$mode/model.safetensors" || fail "W=4 $mode != ZeRO-1"
  done
  echo "bf16 W=4, one micro-batch per rank: grads and full bitwise equal to ZeRO-1"
fi

# HSDP: 2 groups of 2 at W = 4 (the group's reduce, then the shard's all-reduce over the replicas).
if [ "$RANKS" -ge 4 ]; then
  H="dist.shard_group=2"
  vs_ref h4f "$TMP/cpu" "1 2" 4 train.precision=fp32 dist.shard=full $H
  grep -q "HSDP: 2 groups of 2 ranks" "$TMP/h4f/1.log" || { cat "$TMP/h4f/1.log"; fail "h4f did not run HSDP"; }
  vs_ref h4o "$TMP/cpu" "1 2" 4 train.precision=fp32 dist.shard=optim $H
  vs_ref h2r "$TMP/cpu" "1 2" 2 train.precision=fp32 dist.shard=optim dist.shard_group=1
  echo "fp32 HSDP W=4 G=2 full and optim, W=2 G=1: each step within FP32TOL of the CPU's"
  # the host-MPI fallback (no NCCL): the host's HSDP reduce (dist_reduce_scatter), as the CPU's
  OLMO_CUDA_NCCL=0 vs_ref h4m "$TMP/cpu" "1 2" 4 train.precision=fp32 $H
  grep -q "replicas reduced on the host" "$TMP/h4m/1.log" || { cat "$TMP/h4m/1.log"; fail "h4m did not run host-MPI HSDP"; }
  echo "fp32 HSDP W=4 G=2 on the host-MPI fallback (OLMO_CUDA_NCCL=0): each step within FP32TOL of the CPU's"
  mrun 4 "$TMP/h4b0" $C dist.shard=optim ckpt.interval=1 ckpt.keep_last=6
  vs_ref h4bs "$TMP/h4b0" "1 2" 4 dist.shard=full $H
  mrun 4 "$TMP/h4b" $C dist.shard=full $H
  mrun 4 "$TMP/h4bb" $C dist.shard=full $H
  same_metrics "$TMP/h4b" "$TMP/h4bb"
  cmp "$TMP/h4b/model.safetensors" "$TMP/h4bb/model.safetensors" || fail "two bf16 HSDP full runs differ"
  echo "bf16 HSDP W=4 G=2 full: each step within BF16TOL of bf16 ZeRO-1's at W=4, twice bitwise identical"
  for mode in optim grads full; do mrun 4 "$TMP/hk-$mode" $C train.micro_batch=2 dist.shard=$mode $H; done
  for mode in grads full; do
    same_metrics "$TMP/hk-optim" "$TMP/hk-$mode"
    cmp "$TMP/hk-optim/model.safetensors" "$TMP/hk-$mode/model.safetensors" || fail "HSDP W=4 $mode != HSDP optim"
  done
  echo "bf16 HSDP W=4 G=2, one micro-batch per rank: grads and full bitwise equal to HSDP optim"
  HK="train.backend=cuda train.max_steps=6 ckpt.interval=3 dist.shard=full $H"
  mrun 4 "$TMP/hu" $HK
  mrun 4 "$TMP/hs" $HK train.stop_at=3
  mrun 4 "$TMP/hs" $HK
  grep -q "resume: .*step 3" "$TMP/hs.log" || { cat "$TMP/hs.log"; fail "HSDP full did not resume at step 3"; }
  same_metrics "$TMP/hu" "$TMP/hs"
  cmp "$TMP/hu/model.safetensors" "$TMP/hs/model.safetensors" || fail "HSDP full resumed != uninterrupted"
  echo "HSDP full W=4 G=2 checkpoint: resumed bitwise"
fi

# Checkpoints: full W=2 stopped at step 3, resumed at W=2 full (bitwise) and W=2 optim.
CK="train.backend=cuda train.max_steps=6 ckpt.interval=3"
mrun 2 "$TMP/u" $CK dist.shard=full
mrun 2 "$TMP/s" $CK dist.shard=full train.stop_at=3
cp -r "$TMP/s" "$TMP/s2"
mrun 2 "$TMP/s" $CK dist.shard=full
grep -q "resume: .*step 3" "$TMP/s.log" || { cat "$TMP/s.log"; fail "full did not resume at step 3"; }
same_metrics "$TMP/u" "$TMP/s"
cmp "$TMP/u/model.safetensors" "$TMP/s/model.safetensors" || fail "full W=2 resumed != uninterrupted"
# the change of mode: resumed optim steps 4 and 5 each within BF16TOL of full's from its state
# (step 4's is the checkpoint full wrote)
mrun 2 "$TMP/s2" $CK dist.shard=optim train.allow_recipe_change=dist.shard ckpt.interval=1 ckpt.keep_last=6
vs_ref s2s "$TMP/s2" "4 5" 2 dist.shard=full train.allow_recipe_change=dist.shard
echo "full W=2 checkpoint: resumed in full bitwise, in optim each step within BF16TOL of full's"

# A lost peer: rank 1 stopped (the bounded wait names it) or killed.
source "$(dirname "$0")/nccl_lib.sh"
lost_peer STOP "the (weight all-gather|gradient reduce-scatter) did not complete within 5 s on rank 0 of 2" dist.shard=full
lost_peer KILL "rank 1 .*(exited on signal 9|Killed)|peer rank 1" dist.shard=full
echo "test_cuda_shard.sh: all checks passed"
