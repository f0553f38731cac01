#!/usr/bin/env bash
# test_cp.sh: context parallelism (dist.context_parallel: C; docs/distributed.md) on the CPU
# (on CUDA: tests/test_cuda_cp.sh)
# over OpenMPI (mpirun --oversubscribe, 1 thread per rank), exact against C = 1.
#  1. tool_cp_exact: logits, loss sums and every parameter's gradient of C = 2 and C = 4
#     against those of the whole instance (C = 1), document mask on, window 100 < T,
#     T = 1024 (YaRN on the full layers) and 4096 (head_stride 2): the loss sums within 1e-6,
#     the logits and each gradient within 1e-5 of their max |ref| in every element (two
#     orders of the gradient's 2048-4096-token sums: 2 sqrt(4096) u = 7.6e-6 in the standard
#     estimate; the derivation in tests/tool_cp_exact.c). The forward is bitwise (the logits)
#     where OpenBLAS's sgemm gives a row the same bits wherever it sits in the call (its
#     SkylakeX kernels); the gradients are not (their token sums are split over the members:
#     docs/distributed.md).
#  2. Ten steps at C = 2 (2 ranks, one group) and at W = 4 (2 groups of 2), each step done
#     alone from C = 1's state before it (a C = 1 run checkpointed after every step):
#     tests/step_check.py holds the step's loss terms, grad norm, gradient (through Adam's m),
#     v and parameters to bounds derived below from the fp32 sums' reordering; edited steps
#     (a gradient element 10x off, a missing all-reduce term, the loss 1e-5 off) fail it.
#     Not two ten-step runs end to end: AdamW turns any rounding difference into an O(lr)
#     move of the elements whose gradient is near 0, compounding over steps, so their
#     distance measures fp32 training's chaos (a ratio of two such distances failed at 4.8x
#     on one CPU and passed at 0.3x on another). Exact where it can be: C = 2 at 2 threads
#     per rank is bitwise 1 thread's, and C = 2 stopped at step 5 and resumed is bitwise the
#     straight run.
#  3. Resume across C: C = 2 stopped at step 5 (bitwise the straight run's step-5 state),
#     resumed at C = 1 on 1 rank and on 2 ranks: the same samples (no loader alarm, the same
#     final loader state as C = 1's), and each resumed step matched by C = 2 from its state.
#  4. Refused with exit 2 and nothing written: C not dividing the world, T not divisible
#     by 2C, a head stride not dividing n_kv_heads. (C > 1 on the cuda backend runs:
#     tests/test_cuda_cp.sh.)
#     olmo data order --context-parallel C: a rank is served its group's instances.
#  5. olmo info --context-parallel 8 prints the per-GPU plan: activations / C plus the
#     K/V gather buffers; a C not dividing --world is refused (exit 2).
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"
TOL=1e-6
MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)

# 1. the step's numbers against C = 1
for a in "2 1024 2 1 1" "4 1024 2 1 1" "2 4096 1 2 0"; do
  set -- $a
  out=$("${MPI[@]}" -np $1 build/tests/tool_cp_exact $2 $3 $4 $5 $TOL 2>&1) || fail "tool_cp_exact C=$1 T=$2: $out"
  echo "$out" | grep "^C=" || fail "tool_cp_exact printed nothing: $out"
done

# data with documents (EOS 999 after runs of 1..299 tokens) for the training runs
$PY - "$TMP/docs.npy" <<'PY'
import random, struct, sys
random.seed(11)
ids = []
while len(ids) < 120000:
    ids += [random.randrange(998) for _ in range(random.randrange(1, 300))] + [999]
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
cat > "$TMP/cp.yml" <<YML
model: {preset: olmo3-tiny, sliding_window: 100, full_attn_every: 2}
train: {seq_len: 1024, global_batch: 4, micro_batch: 2, max_steps: 10, run_dir: $TMP/run}
optim: {lr: 0.003}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/docs.npy], document_mask: true, eos_id: 999}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
eval: {off: true}
YML
cptrain() { local w=$1 d=$2; shift 2; "${MPI[@]}" -np "$w" "$OLMO" train "$TMP/cp.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1; }
# Tolerances of each step against C = 1's from the same state (tests/step_check.py derives
# the moments' and parameters' allowances from them). C > 1 computes the same sums as C = 1
# in another order: each member sums its T/C tokens' terms of a weight gradient and the
# group's all-reduce adds the members' partials; attention's key sums are split at the chunk
# boundaries. Each order's rounding error is at most gamma_n sum|a_i b_i| (Higham s.3.1) and
# in the standard estimate (independent roundings) sqrt(n) u sum|a_i b_i|, u = 2^-24; the
# longest token sum here is n = 4096 (the global batch's tokens, 2 micro-batches of 2 x 1024),
# sqrt(n) u = 3.8e-6 relative to sum|a_i b_i|, so two orders differ by about 2 x 3.8e-6 =
# 7.6e-6 of it. The gradient tolerance, 1e-5 of the tensor's max|g| (per element), is that
# estimate (test_parity.sh's 1e-5, the same number; tests/ref/README.md). The loss terms and
# the grad norm are sums of 4096 per-token terms or of squares, accumulated in double: they
# move by the logits' reordering averaged over the tokens, held to 1e-6 as part 1's loss
# sums.
TOLS=(--rho-grad 1e-5 --rho-loss 1e-6 --rho-norm 1e-6)

# 2. ten steps at C = 2, each from C = 1's state before it (not two ten-step trajectories:
# AdamW turns any rounding difference into an O(lr) move of the elements whose gradient is
# near 0, and those moves compound over steps, so two whole runs are as far apart as fp32
# training is chaotic, not as far as the implementations differ; tests/ref/README.md). C = 1
# writes a checkpoint after every step; C = 2 does each step alone from it.
cptrain 1 $TMP/c1 ckpt.interval=1 ckpt.keep_last=10 || fail "C=1: $(tail -5 $TMP/c1.log)"
step_runs $TMP/s2 $TMP/c1 "1 10" "cptrain 2" dist.context_parallel=2
grep -q "context parallel: 2 ranks per instance" $TMP/s2/1.log || fail "C=2 banner does not say so: $(head -5 $TMP/s2/1.log)"
step_check "C=2" $TMP/c1 "$TMP/s2/{k}" 1-10 "${TOLS[@]}" || fail "C=2: a step beyond its bound from C=1's state"
echo "ok 10 steps C=2, each from C=1's state"
# The check is not vacuous: C = 2's step 3 edited as a planted mistake would move it fails:
# one gradient element off by 1e-4 of its tensor's max (10x the tolerance, through m), a
# tensor's gradient missing a member's all-reduce term (half of it, through m and v), or the
# step's loss off by 1e-5.
$PY - $TMP/c1 $TMP/s2/3 $TMP/bad <<'PY'
import json, os, shutil, sys
import numpy as np
sys.path.insert(0, 'tests/ref')
from safetensors_io import read, write
ref, good, bad = sys.argv[1:]
ck = lambda r, k: f'{r}/checkpoints/step-{k:08d}'
m0 = read(ck(ref, 2) + '/optim.safetensors')
def plant(name, edit):
    d = f'{bad}/{name}'
    shutil.copytree(good, d)
    o, meta = read(ck(d, 3) + '/optim.safetensors', with_metadata=True)
    edit(o, d)
    write(ck(d, 3) + '/optim.safetensors', o, metadata=meta)
n = 'model.layers.1.self_attn.k_proj.weight'
def one_element(o, d):
    g = (o[n + '.exp_avg'] - 0.9 * m0[n + '.exp_avg']) / 0.1
    o[n + '.exp_avg'] = o[n + '.exp_avg'].copy(); o[n + '.exp_avg'].flat[7] += np.float32(0.1 * 1e-4 * abs(g).max())
def half_term(o, d):
    g = (o[n + '.exp_avg'] - 0.9 * m0[n + '.exp_avg']) / 0.1
    o[n + '.exp_avg'] = (o[n + '.exp_avg'] - 0.1 * g / 2).astype(np.float32)
    o[n + '.exp_avg_sq'] = (o[n + '.exp_avg_sq'] - 0.05 * 0.75 * g * g).astype(np.float32)
def loss(o, d):
    rows = [json.loads(l) for l in open(d + '/metrics.jsonl')]
    for r in rows:
        if r.get('kind') == 'train': r['loss'] *= 1 + 1e-5
    open(d + '/metrics.jsonl', 'w').write(''.join(json.dumps(r) + '\n' for r in rows))
for name, edit in (('one_element', one_element), ('half_term', half_term), ('loss', loss)):
    plant(name, edit)
PY
for b in one_element half_term loss; do
  $PY tests/step_check.py "planted $b" $TMP/c1 "$TMP/bad/$b" 3 "${TOLS[@]}" >$TMP/bad.out && fail "planted $b passed the step check: $(cat $TMP/bad.out)"
  echo "planted $b fails as it must: $(grep -m1 FAIL $TMP/bad.out)"
done
# two groups of two (data parallel over the groups): the same bounds
step_runs $TMP/s4 $TMP/c1 "1 10" "cptrain 4" dist.context_parallel=2
grep -q "context parallel: 2 ranks per instance, 2 groups" $TMP/s4/1.log || fail "W=4 C=2 banner: $(head -5 $TMP/s4/1.log)"
step_check "W=4 C=2" $TMP/c1 "$TMP/s4/{k}" 1-10 "${TOLS[@]}" || fail "W=4 C=2: a step beyond its bound from C=1's state"
echo "ok 10 steps W=4 C=2 (2 groups), each from C=1's state"
# whole runs where they must be bitwise: C = 2 at 1 and 2 threads per rank, and a C = 2 run
# stopped at step 5 and resumed at C = 2
cptrain 2 $TMP/c2 dist.context_parallel=2 ckpt.interval=5 || fail "C=2: $(tail -20 $TMP/c2.log)"
mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=2 -np 2 "$OLMO" train "$TMP/cp.yml" train.run_dir=$TMP/c2t2 dist.context_parallel=2 >$TMP/c2t2.log 2>&1 \
  || fail "C=2 at 2 threads: $(tail -20 $TMP/c2t2.log)"
cmp $TMP/c2/model.safetensors $TMP/c2t2/model.safetensors || fail "C=2 at 2 threads per rank differs from 1 thread"
echo "ok C=2 bitwise at 1 and 2 threads per rank"
cptrain 2 $TMP/c2r dist.context_parallel=2 train.resume=$TMP/c2/checkpoints/step-00000005 || fail "C=2 resumed: $(tail -20 $TMP/c2r.log)"
cmp $TMP/c2/model.safetensors $TMP/c2r/model.safetensors || fail "C=2 stopped at step 5 and resumed differs from the straight run"
echo "ok C=2 stopped at step 5 and resumed: bitwise the straight run"

# 3. resume across C: C = 2 to step 5, then C = 1 to step 10: the loader continues where
# the C = 2 run stopped (no alarm: no gap, no repeat), ending in the same loader state as
# C = 1's; the stop wrote the straight C = 2 run's step-5 state (bitwise); and each step of
# the resumed run, from the state before it, matched by C = 2 from that state (step 6's is
# the checkpoint C = 2 wrote, so a state misread at the change of C shows there).
# resume_c1 DIR W WHAT: C = 2 on 2 ranks to step 5, then C = 1 on W ranks to step 10
resume_c1() {
  local d=$1 w=$2 what=$3 f
  cptrain 2 $d dist.context_parallel=2 train.stop_at=5 ckpt.interval=1 ckpt.keep_last=10 || fail "C=2 stop: $(tail -20 $d.log)"
  for f in model optim; do
    cmp $d/checkpoints/step-00000005/$f.safetensors $TMP/c2/checkpoints/step-00000005/$f.safetensors \
      || fail "C=2 stopped at step 5 wrote another $f state than the straight C=2 run's step 5"
  done
  cptrain $w $d ckpt.interval=1 ckpt.keep_last=10 || fail "resume $what: $(tail -20 $d.log)"
  [ $w = 1 ] && { grep -q "saved by 2 ranks, now 1" $d.log || fail "$what did not resume from the C=2 checkpoint"; }
  grep -q "loader alarm" $d.log && fail "C=2 -> $what loader alarm: $(grep 'loader alarm' $d.log)"
  $PY - $TMP/c1 $d <<'PY' || fail "C=2 -> $what: another loader state than C=1's"
import json, sys
st = [json.load(open(f'{r}/checkpoints/step-00000010/train_state.json'))['loader'] for r in sys.argv[1:]]
assert st[0] == st[1], st
PY
  step_runs $d.steps $d "6 10" "cptrain 2" dist.context_parallel=2
  step_check "C=2 -> $what" $d "$d.steps/{k}" 6-10 "${TOLS[@]}" || fail "C=2 -> $what: a step beyond its bound from the resumed run's state"
}
resume_c1 $TMP/c2to1 1 "C=1"
echo "ok resume C=2 -> C=1 (the same samples, each step within its bound)"
# the same W: C = 2 on 2 ranks, then C = 1 on 2 ranks (data parallel)
resume_c1 $TMP/c2to1w2 2 "C=1 W=2"
echo "ok resume C=2 -> C=1 at the same world size 2"

# olmo data order --context-parallel C: rank r is served its group's instances (the loader
# at W / C readers, rank r / C), and says which positions of them it holds
ord() { "$OLMO" data order "$TMP/cp.yml" --count 6 "$@"; }
[ "$(ord --rank 3 --world 4 --context-parallel 2 2>$TMP/ord.err)" = "$(ord --rank 1 --world 2)" ] \
  && [ "$(ord --rank 2 --world 4 --context-parallel 2 2>/dev/null)" = "$(ord --rank 1 --world 2)" ] \
  || fail "data order --context-parallel 2: ranks 2, 3 of 4 are not served group 1's instances"
grep -q "rank 3: member 1 of context-parallel group 1 of 2 (C = 2): positions \[256, 512) and \[512, 768)" $TMP/ord.err \
  || fail "data order --context-parallel: positions line: $(cat $TMP/ord.err)"
echo "ok olmo data order --context-parallel 2: $(cat $TMP/ord.err)"

# 4. refused: exit 2, nothing written
refuse() {   # refuse WHAT GREP W key=value...
  local what=$1 pat=$2 w=$3 d=$TMP/bad; shift 3; rm -rf $d
  if [ "$w" = 1 ]; then "$OLMO" train "$TMP/cp.yml" train.run_dir=$d "$@" >$d.log 2>&1; rc=$?
  else "${MPI[@]}" -np $w "$OLMO" train "$TMP/cp.yml" train.run_dir=$d "$@" >$d.log 2>&1; rc=$?; fi
  [ $rc = 2 ] || fail "$what: exit $rc, not 2: $(tail -3 $d.log)"
  grep -q "$pat" $d.log || fail "$what: no '$pat' in: $(tail -3 $d.log)"
  [ ! -e $d ] || fail "$what: $d was written"
  echo "ok refused: $what"
}
set +e
refuse "C=2 over 3 ranks" "dist.context_parallel 2 must divide the world size 3" 3 dist.context_parallel=2
refuse "C=2 without mpirun" "dist.context_parallel 2 must divide the world size 1" 1 dist.context_parallel=2
refuse "T=1000 at C=8" "dist.context_parallel 8 needs train.seq_len divisible by 2 x 8 = 16" 1 dist.context_parallel=8 train.seq_len=1000
refuse "head stride 3" "dist.cp_head_stride must divide model.n_kv_heads = 2" 1 dist.context_parallel=2 dist.cp_head_stride=3
set -e

# 5. the plan: olmo info --context-parallel C (OLMo 3's stage 3 on 64 GPUs, C = 8, head stride 4)
info() { "$OLMO" info configs/olmo3-7b-stage3.yml --backend cuda --world 64 "$@"; }
act() { grep "activations saved, no recompute" | awk '{print $(NF-1)}'; }
out8=$(info --context-parallel 8 dist.cp_head_stride=4) || fail "olmo info --context-parallel 8"
grep -q "context parallel 8 (8 groups of 8 GPUs" <<<"$out8" || fail "no context-parallel plan line: $out8"
a1=$(info | act); a8=$(act <<<"$out8")
# 1/8 of the activations plus the gathered K/V of 4 heads (4 buffers of 65536 x 512 bf16 = 256 MiB)
$PY -c "import sys; a1, a8 = int(sys.argv[1]), int(sys.argv[2]); d = a8 - a1 / 8; sys.exit(0 if 0 < d < 2**29 else 1)" "$a1" "$a8" \
  || fail "activations per GPU at C=8 ($a8 bytes) are not those of C=1 ($a1) / 8 plus the K/V gather"
set +e
info --context-parallel 3 >$TMP/i3.log 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "context-parallel 3: needs C >= 1 dividing --world 64" $TMP/i3.log || fail "info C=3: exit $rc: $(cat $TMP/i3.log)"
echo "ok olmo info --context-parallel 8: activations $a8 bytes per GPU (C = 1: $a1)"
echo "test_cp: ok"
