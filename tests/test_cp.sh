#!/usr/bin/env bash
# test_cp.sh: context parallelism (dist.context_parallel: C; docs/distributed.md) on the CPU
# over OpenMPI (mpirun --oversubscribe, 1 thread per rank), exact against C = 1.
#  1. tool_cp_exact: logits, loss sums and every parameter's gradient of C = 2 and C = 4
#     equal those of the whole instance (C = 1) within 1e-6 (per tensor ||d||_2/||ref||_2),
#     document mask on, window 100 < T, T = 1024 (YaRN on the full layers) and 4096
#     (head_stride 2); the forward is bitwise (the logits) where OpenBLAS's sgemm gives a row
#     the same bits wherever it sits in the call (its SkylakeX kernels), the gradients are not
#     (their token sums are split over the members: docs/distributed.md). On kernels that tile
#     rows unevenly (Haswell/Zen) the members' smaller calls round differently: there the
#     logits' and gradients' tolerances are 2x the floor tool_cp_exact measures (C = 1 with
#     other sgemm blockings), when that exceeds 1e-6.
#  2. A 10-step run at C = 2 (2 ranks, one group) against C = 1 (1 rank): its first loss
#     within 1e-6, its final weights and every step's loss and norm within 2x what a mere
#     reordering of C = 1's own gradient sums gives (micro-batches of 1 instead of 2): AdamW
#     turns any rounding difference into ~1e-5 after ten steps (see section 2 below). The
#     same for 4 ranks in 2 groups of 2; C = 2 at 2 threads per rank is bitwise 1 thread's.
#  3. Resume across C: C = 2 stopped at step 5, resumed at C = 1 on 1 rank and on 2 ranks:
#     the same samples (no loader alarm, the same final loader state as C = 1's), steps as
#     close as in 2.
#  4. Refused with exit 2 and nothing written: C not dividing the world, T not divisible
#     by 2C, C > 1 on the cuda backend, a head stride not dividing n_kv_heads.
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
# runs_close REF A FLOOR FACTOR: A's final weights (per tensor ||d||_2/||ref||_2, the worst
# tensor) and its per-step loss, ce, z_loss and grad_norm (relative) against REF's, at most
# FACTOR x those of FLOOR against REF; step 1's loss within 1e-6 (its forward is exact).
runs_close() {
  $PY - "$@" <<'PY'
import json, struct, sys
import numpy as np
def weights(d):
    b = open(d + '/model.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], np.float32).astype(np.float64)
            for k, v in h.items() if k != '__metadata__'}
def train(d):
    t = [r for r in map(json.loads, open(d + '/metrics.jsonl')) if r.get('kind') == 'train']
    assert [r['step'] for r in t] == list(range(1, len(t) + 1)), d
    return t
def diff(x, y):
    wx, wy = weights(x), weights(y)
    w = max((np.linalg.norm(wx[k] - wy[k]) / np.linalg.norm(wx[k]), k) for k in wx)
    tx, ty = train(x), train(y)
    assert len(tx) == len(ty)
    m = max(abs(a[k] - b[k]) / max(abs(a[k]), 1e-30) for a, b in zip(tx, ty) for k in ('loss', 'ce', 'z_loss', 'grad_norm'))
    return w, m, abs(tx[0]['loss'] - ty[0]['loss']) / tx[0]['loss']
ref, a, floor, f = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
(wa, ka), ma, s1 = diff(ref, a)
(wf, kf), mf, _ = diff(ref, floor)
print(f'weights: worst tensor {ka} {wa:.3g} (floor {wf:.3g}, {kf}); steps: {ma:.3g} (floor {mf:.3g}); step 1 loss {s1:.3g}')
sys.exit(0 if wa <= f * wf and ma <= f * mf and s1 <= 1e-6 else 1)
PY
}

# 2. ten steps, C = 2 vs C = 1. Ten AdamW steps amplify any rounding difference: an element
# whose gradient is near 0 moves by +-lr on its sign, so no reordering of the gradient's
# sums stays within 1e-6 after them (measured: C = 1 itself with micro-batches of 1
# instead of 2, the same samples, differs by ~1e-5 in its weights). The floor: that run;
# C = 2 must stay within 2x it (and its first step's loss within 1e-6).
cptrain 1 $TMP/c1 || fail "C=1: $(tail -5 $TMP/c1.log)"
cptrain 1 $TMP/m1 train.micro_batch=1 || fail "C=1, micro_batch 1: $(tail -5 $TMP/m1.log)"
cptrain 2 $TMP/c2 dist.context_parallel=2 || fail "C=2: $(tail -20 $TMP/c2.log)"
grep -q "context parallel: 2 ranks per instance" $TMP/c2.log || fail "C=2 banner does not say so: $(head -5 $TMP/c2.log)"
runs_close $TMP/c1 $TMP/c2 $TMP/m1 2 || fail "C=2 beyond 2x the reordering floor of C=1"
echo "ok 10 steps C=2 vs C=1"
# two groups of two (data parallel over the groups): as close; and 2 threads per rank: bitwise
cptrain 4 $TMP/w4c2 dist.context_parallel=2 || fail "W=4 C=2: $(tail -20 $TMP/w4c2.log)"
grep -q "context parallel: 2 ranks per instance, 2 groups" $TMP/w4c2.log || fail "W=4 C=2 banner: $(head -5 $TMP/w4c2.log)"
runs_close $TMP/c1 $TMP/w4c2 $TMP/m1 2 || fail "W=4 C=2 beyond 2x the reordering floor of C=1"
echo "ok 10 steps W=4 C=2 (2 groups) vs C=1"
mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=2 -np 2 "$OLMO" train "$TMP/cp.yml" train.run_dir=$TMP/c2t2 dist.context_parallel=2 >$TMP/c2t2.log 2>&1 \
  || fail "C=2 at 2 threads: $(tail -20 $TMP/c2t2.log)"
cmp $TMP/c2/model.safetensors $TMP/c2t2/model.safetensors || fail "C=2 at 2 threads per rank differs from 1 thread"
echo "ok C=2 bitwise at 1 and 2 threads per rank"

# 3. resume across C: C = 2 to step 5, then C = 1 to step 10: the loader continues where
# the C = 2 run stopped (no alarm: no gap, no repeat), ending in the same loader state, and
# steps 6-10 match the uninterrupted runs as closely as C = 2 matches C = 1.
# resume_c1 DIR W WHAT: C = 2 on 2 ranks to step 5, then C = 1 on W ranks to step 10
resume_c1() {
  local d=$1 w=$2 what=$3
  cptrain 2 $d dist.context_parallel=2 train.stop_at=5 || fail "C=2 stop: $(tail -20 $d.log)"
  cptrain $w $d || fail "resume $what: $(tail -20 $d.log)"
  [ $w = 1 ] && { grep -q "saved by 2 ranks, now 1" $d.log || fail "$what did not resume from the C=2 checkpoint"; }
  grep -q "loader alarm" $d.log && fail "C=2 -> $what loader alarm: $(grep 'loader alarm' $d.log)"
  $PY - $TMP/c1 $d <<'PY' || fail "C=2 -> $what: another loader state than C=1's"
import json, sys
st = [json.load(open(f'{r}/checkpoints/step-00000010/train_state.json'))['loader'] for r in sys.argv[1:]]
assert st[0] == st[1], st
PY
  runs_close $TMP/c1 $d $TMP/m1 2 || fail "C=2 -> $what beyond 2x the reordering floor of C=1"
}
resume_c1 $TMP/c2to1 1 "C=1"
echo "ok resume C=2 -> C=1 (the same samples)"
# the same W: C = 2 on 2 ranks, then C = 1 on 2 ranks (data parallel)
resume_c1 $TMP/c2to1w2 2 "C=1 W=2"
echo "ok resume C=2 -> C=1 at the same world size 2"

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
refuse "C=2 on cuda" "dist.context_parallel 2 needs train.backend=cpu" 1 dist.context_parallel=2 train.backend=cuda
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
