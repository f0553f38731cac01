#!/usr/bin/env bash
# test_cuda_cp.sh: context parallelism on the CUDA backend (dist.context_parallel: C with
# train.backend=cuda; docs/distributed.md), on the emulated devices of tests/cuemu (one per
# rank, CUEMU_DEVICES=C; NCCL over MPI). Builds build-emu (make CUDA_EMU=1) if needed.
#  1. tool_cuda_cp_exact: logits, loss sums and every parameter's gradient of CUDA C = 2
#     and C = 4 against CUDA C = 1 at T = 256 (window 100 < T, document mask on, documents
#     of 1..300 tokens crossing the chunks; head stride 1 and 2), and (fp32) against the
#     CPU's context parallelism at the same C; two CUDA runs bitwise equal. CP computes the
#     same sums in another order (its SIMT attention's dot products and key order, the
#     chunks' dK/dV partials summed in member order), so the tolerances are derived bounds
#     of a reordering (tests/tool_cuda_cp_exact.c): fp32: the loss sums 1e-6, the logits and
#     each gradient 1e-5 of their max |ref| in every element; bf16: two bf16 runs are within
#     twice the bf16 error E of one (the triangle inequality), E measured on the same step as
#     CUDA C = 1 against the CPU's fp32 C = 1 (L2-relative). Measured on the emulator: fp32
#     gradients 2.4e-6 (C = 2), 1.8e-6 (C = 4), logits 8.4e-7 and 9.4e-7 of max |ref|; bf16
#     gradients 1.9e-2 against 2E = 7.3e-2, logits 1.0e-2 against 2.5e-2.
#     Bitwise against C = 1 is not reachable: the attention of C = 1 is the flash kernels'
#     tiles, CP's a chunk's own SIMT order, and the token sums of the weight gradients are
#     split over the members.
#  2. olmo train at C = 2 on 2 emulated GPUs, fp32: two runs, the second with activation
#     recompute, bitwise equal (weights), and
#     with held-out evaluation (on the CPU model: the device graph holds only a member's
#     rows) whose last record equals `olmo eval` of the final weights.
#  3. Without NCCL (OLMO_CUDA_NCCL=0), and with dist.shard: grads: C > 1 on cuda refused, exit
#     2, nothing written.
cd "$(dirname "$0")/.."
B=${BUILD_EMU:-build-emu}
if ! make -s CUDA_EMU=1 BUILD=$B -j"$(nproc)" $B/olmo $B/tests/tool_cuda_cp_exact >/dev/null 2>&1; then
  echo "FAIL: make CUDA_EMU=1 BUILD=$B" >&2; exit 1
fi
# Always the emulated binary: the suite's OLMO_BIN (tests/run.sh) is build/olmo, which on a
# machine with nvcc and no GPU is a real CUDA build without a device.
OLMO_BIN=$PWD/$B/olmo
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"
run_np() { local np=$1; shift; CUEMU_DEVICES=$np mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUEMU_DEVICES -np "$np" "$@"; }

# 1. one step's numbers against C = 1 and the CPU's C
for a in "2 256 1 1 fp32" "4 256 1 2 fp32" "2 256 1 1 bf16" "4 256 1 2 bf16"; do
  set -- $a
  out=$(run_np $1 $B/tests/tool_cuda_cp_exact $2 $3 $4 $5 1e-6 2>&1) || fail "tool_cuda_cp_exact C=$1 $5: $out"
  echo "$out" | grep "^cuda C=" || fail "tool_cuda_cp_exact printed nothing: $out"
done

# 2. training at C = 2: bitwise run to run; held-out evaluation on the CPU model
$PY - "$TMP/docs.npy" "$TMP/held.npy" <<'PY'
import random, struct, sys
random.seed(11)
for f, n in ((sys.argv[1], 40000), (sys.argv[2], 3000)):
    ids = []
    while len(ids) < n:
        ids += [random.randrange(998) for _ in range(random.randrange(1, 300))] + [999]
    open(f, 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
cat > "$TMP/cp.yml" <<YML
model: {preset: olmo3-tiny, sliding_window: 100, full_attn_every: 2}
train: {seq_len: 256, global_batch: 2, micro_batch: 1, max_steps: 3, run_dir: $TMP/run, backend: cuda, precision: fp32}
optim: {lr: 0.003}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/docs.npy], document_mask: true, eos_id: 999}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
eval: {sets: ["held=$TMP/held.npy"], eos_id: 999, interval: 2}
dist: {context_parallel: 2}
YML
for d in a b; do   # b with activation recompute (its attention kept: GRAPH_RECOMPUTE_KEEP_ATT)
  rc=off; [ $d = b ] && rc=on
  run_np 2 "$OLMO" train "$TMP/cp.yml" train.run_dir=$TMP/$d train.recompute=$rc >$TMP/$d.log 2>&1 \
    || fail "C=2 on cuda ($d): $(tail -20 $TMP/$d.log)"
done
grep -q "activation recompute on" $TMP/b.log || fail "run b without recompute: $(grep backend: $TMP/b.log)"
grep -q "context parallel: 2 ranks per instance" $TMP/a.log || fail "no context-parallel banner: $(head -5 $TMP/a.log)"
grep -q "backend: cuda" $TMP/a.log || fail "not the cuda backend: $(head -5 $TMP/a.log)"
cmp $TMP/a/model.safetensors $TMP/b/model.safetensors || fail "two C=2 cuda runs (recompute off, on) differ"
echo "ok C=2 on cuda: two runs (recompute off and on) bitwise equal"
"$OLMO" eval $TMP/a/model.safetensors --recipe "$TMP/cp.yml" --json >$TMP/a.eval.json 2>$TMP/a.eval.log \
  || fail "olmo eval: $(cat $TMP/a.eval.log)"
$PY - $TMP/a/metrics.jsonl $TMP/a.eval.json <<'PY' || fail "C=2 on cuda: in-loop evaluation vs olmo eval"
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'eval']
assert [r['step'] for r in recs] == [0, 2, 3], [r['step'] for r in recs]
assert all(r['eval/device'] == 'cpu fp32' for r in recs), [r['eval/device'] for r in recs]
last, ref = recs[-1], json.load(open(sys.argv[2]))
d = abs(last['eval/held/ce'] - ref['eval/held/ce']) / abs(ref['eval/held/ce'])
print(f"in-loop held-out CE {last['eval/held/ce']!r} vs olmo eval {ref['eval/held/ce']!r}: rel {d:.3g}")
assert d <= 1e-12 and last['eval/held/tokens'] == ref['eval/held/tokens']
PY
echo "ok C=2 on cuda: held-out evaluation (cpu fp32) equals olmo eval"

# 3. no NCCL, no context parallelism on cuda
set +e
OLMO_CUDA_NCCL=0 CUEMU_DEVICES=2 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUEMU_DEVICES \
  -x OLMO_CUDA_NCCL -np 2 "$OLMO" train "$TMP/cp.yml" train.run_dir=$TMP/nn eval.off=true >$TMP/nn.log 2>&1; rc=$?
set -e
[ $rc = 2 ] || fail "C=2 on cuda without NCCL: exit $rc, not 2: $(tail -5 $TMP/nn.log)"
grep -q "dist.context_parallel 2 with train.backend=cuda needs NCCL" $TMP/nn.log || fail "no message naming the key: $(tail -5 $TMP/nn.log)"
[ ! -e $TMP/nn ] || fail "C=2 on cuda without NCCL wrote $TMP/nn"
echo "ok refused: C=2 on cuda without NCCL (exit 2, nothing written)"
set +e
CUEMU_DEVICES=2 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x CUEMU_DEVICES -np 2 "$OLMO" train \
  "$TMP/cp.yml" train.run_dir=$TMP/ns dist.shard=grads eval.off=true >$TMP/ns.log 2>&1; rc=$?
set -e
[ $rc = 2 ] || fail "C=2 with dist.shard=grads on cuda: exit $rc, not 2: $(tail -5 $TMP/ns.log)"
grep -q "dist.context_parallel 2 with dist.shard: grads on train.backend=cuda is not built" $TMP/ns.log \
  || fail "no message naming the keys: $(tail -5 $TMP/ns.log)"
[ ! -e $TMP/ns ] || fail "C=2 with dist.shard=grads on cuda wrote $TMP/ns"
echo "ok refused: C=2 with dist.shard=grads on cuda (exit 2, nothing written)"
echo "test_cuda_cp: ok"
