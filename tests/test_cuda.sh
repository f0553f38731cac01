#!/usr/bin/env bash
# test_cuda.sh: `olmo train` with train.backend=cuda (issue 9, docs/cuda.md).
# Always: bad backend/precision values and, on a machine without a GPU (or a binary built
# without CUDA), train.backend=cuda exit 2 with a clear message and nothing written.
# With a device: checkpoints cross backends: a CPU checkpoint resumed on the GPU (bf16, and
# fp32), and a GPU checkpoint resumed on the CPU, each resumed step within the bounds of the
# other backend's step from the same state (tests/step_check.py: BF16TOL, FP32TOL below);
# two GPU runs (1 and 2 host threads) are bitwise identical; with mpirun, 2 and 4 GPU ranks
# are bitwise identical.
# In-loop evaluation on the device (eval.device=auto): its held-out CE at the last step
# matches `olmo eval` (CPU, fp32) of the run's model.safetensors within 1e-5 relative in
# fp32 mode and within 1e-2 in bf16 mode (a bound set before any GPU run: measure it on
# the first one and tighten it); eval.device=cpu (the host copy) matches it to 1e-12.
source "$(dirname "$0")/resume_lib.sh"

bad() {   # bad NAME EXPECTED-SUBSTRING [args...]
  local name=$1 want=$2; shift 2
  local d="$TMP/bad-$name" rc=0
  "$OLMO" train "$TMP/r.yml" "$@" train.run_dir="$d" >"$d.log" 2>&1 || rc=$?
  [ $rc = 2 ] || { cat "$d.log"; fail "$name: exit $rc, want 2"; }
  grep -q -- "$want" "$d.log" || { cat "$d.log"; fail "$name: message lacks '$want'"; }
  [ ! -e "$d" ] || fail "$name: wrote $d"
  echo "bad input $name: exit 2, '$want'"
}
bad backend-name "train.backend must be cpu or cuda" train.backend=gpu
bad precision-name "train.precision must be fp32 or bf16" train.precision=fp16
bad precision-case "train.precision must be fp32 or bf16" train.precision=FP32   # names are lower case

# Is there a device? A CUDA run on a machine without one must fail cleanly.
d="$TMP/probe"; rc=0
"$OLMO" train "$TMP/r.yml" train.backend=cuda train.max_steps=1 ckpt.interval=0 train.run_dir="$d" >"$d.log" 2>&1 || rc=$?
if [ $rc != 0 ]; then
  [ $rc = 2 ] || { cat "$d.log"; fail "train.backend=cuda without a device: exit $rc, want 2"; }
  grep -Eq "no CUDA device|built without CUDA" "$d.log" || { cat "$d.log"; fail "no clear message"; }
  [ ! -e "$d" ] || fail "train.backend=cuda without a device wrote $d"
  echo "train.backend=cuda here: exit 2, '$(grep -o 'train.backend=cuda: .*' "$d.log" | head -1)'"
  echo "SKIP: no CUDA device (the cross-backend resume checks need one)"
  exit 0
fi
grep "^backend:" "$d.log" || true

# Checkpoints cross backends. Resumed steps (4 and 5) are checked against the other backend's
# step from the same state (tests/step_check.py; step 4's state is the checkpoint the other
# backend wrote, so a lost or stale moment or weight shows there), not the 6-step runs end to
# end: Adam turns rounding noise into lr-sized updates, so three bf16 steps alone put a
# CPU-only run's grad norm 6% away by step 6 (measured under tests/cuemu), which says nothing
# of the checkpoint. Bounds: BF16TOL (tests/resume_lib.sh) where one side is bf16; in fp32
# FP32TOL: the GPU's sums are the CPU's in another order (cuBLASLt's and the flash tiles'
# against OpenBLAS's), so the gradient within 1e-5 of its tensor's max|g| (the longest sum,
# the LM head's 1024 padded vocabulary rows, sqrt(1024) u = 1.9e-6 each side in the standard
# estimate: test_parity.sh's 1e-5), the loss terms and the grad norm within 1e-6 (sums of
# 256 targets' terms and of squares in double, the logits' reordering carried through).
FP32TOL=(--rho-grad 1e-5 --rho-loss 1e-6 --rho-norm 1e-6)
K=(train.max_steps=6 ckpt.interval=1 ckpt.keep_last=6)
# cross LABEL DIR FIRST THEN OTHER TOL: DIR runs steps 1-3 with FIRST's keys, 4-6 with THEN's;
# steps 4 and 5 are each matched by OTHER's keys from DIR's state before it (step 4's state is
# the other backend's checkpoint; every emulated step is one launch, so two steps)
cross() {
  local label=$1 d=$2 first=$3 then=$4 other=$5 tol=$6
  train "$d" "${K[@]}" train.stop_at=3 $first
  train "$d" "${K[@]}" $then train.allow_recipe_change=train.precision
  grep -q "resume: .*step 3" "$d.log" || { cat "$d.log"; fail "$label did not resume at step 3"; }
  step_runs "$d.steps" "$d" "4 5" train "${K[@]}" $other train.allow_recipe_change=train.precision
  local -n tols=$tol
  step_check "$label" "$d" "$d.steps/{k}" 4-5 "${tols[@]}" || fail "$label: a resumed step beyond its bound"
}
cross "CPU -> GPU (bf16)" "$TMP/c2g" "" "train.backend=cuda" "" BF16TOL
echo "CPU checkpoint resumed on the GPU (bf16): each step within bf16's bounds of the CPU's from its state"
cross "GPU (bf16) -> CPU" "$TMP/g2c" "train.backend=cuda" "" "train.backend=cuda" BF16TOL
echo "GPU checkpoint resumed on the CPU: each step within bf16's bounds of the GPU's from its state"
cross "CPU -> GPU (fp32)" "$TMP/c2g32" "" "train.backend=cuda train.precision=fp32" "" FP32TOL
echo "CPU checkpoint resumed on the GPU (fp32): each step within fp32's bounds of the CPU's from its state"
# Determinism on the GPU: same recipe + seed = same run, bitwise, whatever the host's thread
# count (the second run at 2 OpenMP threads: the emulated cuBLASLt once followed it)
train "$TMP/ga" train.max_steps=4 ckpt.interval=0 train.backend=cuda
OMP_NUM_THREADS=2 train "$TMP/gb" train.max_steps=4 ckpt.interval=0 train.backend=cuda
same_metrics "$TMP/ga" "$TMP/gb"
cmp "$TMP/ga/model.safetensors" "$TMP/gb/model.safetensors" || fail "two GPU runs differ"
echo "GPU determinism: two runs (1 and 2 host threads) bitwise identical"
# Checkpoints do not stall the GPU (ckpt.async, the default): the state is copied to host
# memory at the step boundary (backend_snapshot_range) and written in the background; the
# files are byte for byte those of the synchronous stream from the device (ckpt.async=false;
# train_state.json differs only by the recipe's ckpt.async),
# and the run's weights those of a run without checkpoints. blocking_s: what each checkpoint
# cost the loop (the metrics' "checkpoint" records).
train "$TMP/gca" train.max_steps=4 ckpt.interval=2 train.backend=cuda
train "$TMP/gcs" train.max_steps=4 ckpt.interval=2 train.backend=cuda ckpt.async=false
grep -q "writing in the background" "$TMP/gca.log" || fail "async GPU checkpoint did not write in the background"
for s in 2 4; do
  for f in model.safetensors optim.safetensors; do
    cmp "$TMP/gca/checkpoints/step-0000000$s/$f" "$TMP/gcs/checkpoints/step-0000000$s/$f" \
      || fail "GPU checkpoint step $s: $f of the async snapshot differs from the device stream's"
  done
  cmp <(sed '/^file train_state.json/,$d' "$TMP/gca/checkpoints/step-0000000$s/checksums.txt") \
      <(sed '/^file train_state.json/,$d' "$TMP/gcs/checkpoints/step-0000000$s/checksums.txt") \
    || fail "GPU checkpoint step $s: the checksums of the async snapshot differ"
done
cmp "$TMP/ga/model.safetensors" "$TMP/gca/model.safetensors" || fail "GPU run with async checkpoints differs"
# A host without room for the snapshot (OLMO_MEM_LIMIT: 1 MB here) streams instead, with a warning.
OLMO_MEM_LIMIT=1000000 train "$TMP/gcm" train.max_steps=4 ckpt.interval=2 train.backend=cuda
grep -q "checkpoints stream from the device synchronously instead" "$TMP/gcm.log" || fail "no snapshot fallback warning"
cmp "$TMP/gcs/checkpoints/step-00000004/optim.safetensors" "$TMP/gcm/checkpoints/step-00000004/optim.safetensors" \
  || fail "the streamed fallback differs"
blocking() { $PY -c "import json,sys; print(' '.join('%.4f' % r['blocking_s'] for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'checkpoint'))" "$1/metrics.jsonl"; }
echo "GPU checkpoints: async snapshot = device stream byte for byte; loop blocked (s per checkpoint): async $(blocking $TMP/gca), sync $(blocking $TMP/gcs)"
# In-loop evaluation on the device vs `olmo eval` on the CPU (fp32, the yardstick) of the
# same final weights. A held-out set of 12 documents of ids < 999 (EOS 999 for the 1000-id
# preset), some longer than seq_len (truncated), so batches are partial and of varying T.
$PY - "$TMP/held.npy" <<'PY'
import random, struct, sys
random.seed(11)
ids = []
for d in range(12):
    ids += [random.randrange(999) for _ in range(random.randrange(1, 50))] + [999]
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
{ grep -v "^eval:" "$TMP/r.yml"; echo "eval: {sets: [\"held=$TMP/held.npy\"], eos_id: 999, interval: 2}"; } >"$TMP/ev.yml"
# eval_vs_cpu DIR DEVICE TOL [key=value...]: train 3 steps with evaluation, then compare
# the last in-loop record with `olmo eval DIR/model.safetensors` (relative TOL).
eval_vs_cpu() {
  local d=$1 dev=$2 tol=$3; shift 3
  "$OLMO" train "$TMP/ev.yml" train.run_dir="$d" train.max_steps=3 ckpt.interval=0 train.backend=cuda "$@" >"$d.log" 2>&1 \
    || { cat "$d.log"; fail "$d: train failed"; }
  "$OLMO" eval "$d/model.safetensors" --recipe "$TMP/ev.yml" --json >"$d.eval.json" 2>"$d.eval.log" \
    || { cat "$d.eval.log"; fail "$d: olmo eval failed"; }
  $PY - "$d/metrics.jsonl" "$d.eval.json" "$dev" "$tol" <<'PY' || fail "$d: in-loop evaluation vs olmo eval"
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'eval']
assert [r['step'] for r in recs] == [0, 2, 3], [r['step'] for r in recs]
last, ref, tol = recs[-1], json.load(open(sys.argv[2])), float(sys.argv[4])
assert all(r['eval/device'] == sys.argv[3] for r in recs), [r['eval/device'] for r in recs]
for k in ('eval/held/ce', 'eval/held/bpb'):
    d = abs(last[k] - ref[k]) / abs(ref[k])
    print(f'{sys.argv[3]} in-loop {k} {last[k]!r} vs olmo eval (cpu fp32) {ref[k]!r}: rel {d:.3g} (tol {tol:g})')
    assert d <= tol, k
assert last['eval/held/tokens'] == ref['eval/held/tokens']
PY
}
eval_vs_cpu "$TMP/ev32" "cuda fp32" 1e-5 train.precision=fp32
eval_vs_cpu "$TMP/ev16" "cuda bf16" 1e-2
eval_vs_cpu "$TMP/evcpu" "cpu fp32" 1e-12 eval.device=cpu
echo "in-loop evaluation on the device: fp32 within 1e-5 and bf16 within 1e-2 of olmo eval (CPU fp32); eval.device=cpu within 1e-12"
# Data parallel on the GPU (mpirun, ranks share the device here): NCCL refuses two ranks
# on one device, so this runs the host-MPI fallback (OLMO_CUDA_NCCL=0). Its step is
# bitwise identical for 2 and 4 ranks (2 and 1 micro-batches per rank: the in-place
# sequential sum of 2 equals the pairwise tree), and within bf16 noise of the CPU. The
# NCCL path needs one GPU per rank (docs/cuda.md).
if command -v mpirun >/dev/null && ldd "$OLMO" | grep libmpi >/dev/null; then
  export OLMO_CUDA_NCCL=0
  mtrain 2 "$TMP/m2" train.max_steps=4 ckpt.interval=0 train.backend=cuda
  mtrain 4 "$TMP/m4" train.max_steps=4 ckpt.interval=0 train.backend=cuda
  same_metrics "$TMP/m2" "$TMP/m4"
  cmp "$TMP/m2/model.safetensors" "$TMP/m4/model.safetensors" || fail "2 vs 4 GPU ranks differ"
  # each step of 2 and 3 GPU ranks from the CPU's state before it, within bf16's bounds
  train "$TMP/c4" train.max_steps=4 ckpt.interval=1 ckpt.keep_last=4
  for w in 2 3; do
    step_runs "$TMP/m$w.steps" "$TMP/c4" "1 2" "mtrain $w" train.max_steps=4 train.backend=cuda train.allow_recipe_change=train.precision
    step_check "$w GPU ranks" "$TMP/c4" "$TMP/m$w.steps/{k}" 1-2 "${BF16TOL[@]}" || fail "$w GPU ranks: a step beyond bf16's bounds of the CPU's"
  done
  # 3 ranks: the 4 micro-batches split unevenly (2, 1, 1; docs/distributed.md)
  grep -q "uneven: rank 0 takes 2" "$TMP/m3.steps/1.log" || fail "3 GPU ranks: $(grep '^olmo train' $TMP/m3.steps/1.log)"
  echo "GPU data parallel (host-MPI fallback): 2 vs 4 ranks bitwise identical; 2 and 3 (uneven) ranks each step within bf16's bounds of the CPU's"
  unset OLMO_CUDA_NCCL
else
  echo "SKIP: multi-rank GPU check (no mpirun, or a binary built with MPI=0)"
fi

# NCCL ZeRO-1: one device per rank, so it needs OLMO_TEST_NCCL_RANKS >= 2 devices (set by
# tests/test_cuda_emu.sh, whose emulated machine has two; on a real machine, the number of
# GPUs). docs/cuda.md promises: the same world size repeats bit for bit; another world size
# rounds differently (NCCL's sums), so each step of W = 2 from W = 1's state is within
# FP32TOL in fp32 and BF16TOL in bf16 of W = 1's.
if [ "${OLMO_TEST_NCCL_RANKS:-0}" -ge 2 ] && command -v mpirun >/dev/null && ldd "$OLMO" | grep libmpi >/dev/null; then
  for prec in bf16 fp32; do
    tol=BF16TOL tols=("${BF16TOL[@]}"); [ $prec = fp32 ] && tol=FP32TOL tols=("${FP32TOL[@]}")
    mtrain 2 "$TMP/n2-$prec" train.max_steps=4 ckpt.interval=0 train.backend=cuda train.precision=$prec
    grep -q "NCCL ZeRO-1" "$TMP/n2-$prec.log" || { cat "$TMP/n2-$prec.log"; fail "W=2 did not run the NCCL path"; }
    mtrain 2 "$TMP/n2b-$prec" train.max_steps=4 ckpt.interval=0 train.backend=cuda train.precision=$prec
    same_metrics "$TMP/n2-$prec" "$TMP/n2b-$prec"
    cmp "$TMP/n2-$prec/model.safetensors" "$TMP/n2b-$prec/model.safetensors" || fail "two NCCL W=2 runs ($prec) differ"
    train "$TMP/n1-$prec" train.max_steps=4 ckpt.interval=1 ckpt.keep_last=4 train.backend=cuda train.precision=$prec
    step_runs "$TMP/n2s-$prec" "$TMP/n1-$prec" "1 2" "mtrain 2" train.max_steps=4 train.backend=cuda train.precision=$prec
    step_check "NCCL W=2 ($prec)" "$TMP/n1-$prec" "$TMP/n2s-$prec/{k}" 1-2 "${tols[@]}" || fail "NCCL W=2 ($prec): a step beyond $tol of W=1's"
    echo "NCCL ZeRO-1 ($prec): W=2 twice bitwise identical, each step within $tol of W=1's from its state"
    # Sharded checkpoints from the devices (src/train/ckpt_shard.h): each rank snapshots its
    # own shard of master and Adam to host memory and writes its byte ranges in the
    # background; stopped at step 2 and resumed, the run ends bitwise on the uninterrupted one.
    d="$TMP/n2r-$prec"
    mtrain 2 "$d" train.max_steps=4 ckpt.interval=2 train.stop_at=2 train.backend=cuda train.precision=$prec
    grep -q "each rank its part, writing in the background" "$d.log" || { cat "$d.log"; fail "NCCL W=2: no sharded async checkpoint"; }
    "$OLMO" ckpt verify "$d/checkpoints/step-00000002" >/dev/null || fail "NCCL W=2 sharded checkpoint does not verify"
    mtrain 2 "$d" train.max_steps=4 ckpt.interval=2 train.backend=cuda train.precision=$prec
    cmp "$TMP/n2-$prec/model.safetensors" "$d/model.safetensors" || fail "NCCL W=2 ($prec) resumed from its sharded checkpoint differs"
    echo "NCCL ZeRO-1 ($prec): sharded device checkpoint at step 2 (verifies), the resume bitwise the uninterrupted run"
  done
  source "$(dirname "$0")/nccl_lib.sh"   # rank_pid, lost_peer
  lost_peer KILL "rank 1 .*(exited on signal 9|Killed)|peer rank 1"
  lost_peer STOP "did not complete within 5 s on rank 0 of 2"
  if grep -q "cuemu emulated" "$TMP/lost-STOP.log"; then   # the emulated NCCL says whom it waited for
    grep -q "waiting for rank 1" "$TMP/lost-STOP.log" || fail "lost peer (STOP): the emulated NCCL did not name the peer"
  fi
else
  echo "SKIP: NCCL ZeRO-1 checks (OLMO_TEST_NCCL_RANKS=${OLMO_TEST_NCCL_RANKS:-0} devices; they need one per rank)"
fi
echo "test_cuda.sh: all checks passed"
