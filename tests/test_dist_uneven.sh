#!/usr/bin/env bash
# test_dist_uneven.sh: world sizes that do not divide the global batch's micro-batches. Ranks
# take contiguous blocks, the first M % W one micro-batch more (loader_rank_block); the loss is
# normalised by the global target count as always.
#  1. 5 micro-batches on 3 ranks (blocks 2, 2, 1): the blocks are subtrees of the single
#     process's binary-counter gradient tree and the ranks' tree joins them in its order, so
#     weights and every loss are bitwise those of W = 1.
#  2. 16 on 7 (blocks 3, 3, 2, 2, 2, 2, 2): another summation tree. Each of 6 steps from
#     W = 1's state before it (tests/step_check.py, bounds below): not the two 6-step runs
#     end to end, since Adam's first steps turn fp32 reorderings of near-zero gradient
#     components into parameter differences of order lr, which compound (grad norm 2.4e-5
#     apart by step 6 end to end; tests/ref/README.md, "Why step by step").
#  3. Resume on another, uneven world: W = 8 stopped at step 3, continued at W = 7: the same
#     sample stream (no loader alarm: a replay or skip raises one), each resumed step matched
#     by W = 8 from the resumed run's state before it (step 4's is the checkpoint W = 8
#     wrote), and every rank's peak memory reported.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"

# Bounds of a step from the same state in another summation tree: the loss bitwise (each
# micro-batch's loss sum is added in global order, in double); the grad norm within 1e-6;
# every gradient element within 1e-5 of its tensor's max|g| (16 fp32 partials p_j summed in
# two trees: within 2 gamma_15 sum_j |p_j| = 1.8e-6 sum_j |p_j| of each other, so 1e-5
# allows sum_j |p_j| up to 5.6 max|g|; test_parity.sh's 1e-5); the moments and parameters:
# tests/step_check.py's first-order AdamW band.
TOLS=(--rho-grad 1e-5 --rho-loss 0 --rho-norm 1e-6)

# 1. 5 on 3: bitwise
F=(train.global_batch=5 train.micro_batch=1 train.max_steps=4 ckpt.interval=0)
train $TMP/f1 "${F[@]}" || fail "5 on 1: $(tail -5 $TMP/f1.log)"
mtrain 3 $TMP/f3 "${F[@]}" || fail "5 on 3: $(tail -20 $TMP/f3.log)"
grep -q "| 3 ranks x 1 threads .* | 1-2 micro-batches of 1 per rank (uneven: ranks 0-1 take 2)" $TMP/f3.log \
  || fail "banner: $(grep '^olmo train' $TMP/f3.log)"
cmp $TMP/f1/model.safetensors $TMP/f3/model.safetensors || fail "5 micro-batches on 3 ranks: weights differ from W=1"
same_metrics $TMP/f1 $TMP/f3 0 || fail "5 on 3: losses differ from W=1"
grep -q "loader alarm" $TMP/f3.log && fail "5 on 3: $(grep 'loader alarm' $TMP/f3.log)"
echo "ok 5 micro-batches on 3 ranks: bitwise equal to W=1"

# 2. 16 on 7: within fp32 rounding
S=(train.global_batch=16 train.micro_batch=1 train.max_steps=6 ckpt.interval=1 ckpt.keep_last=6)
train $TMP/s1 "${S[@]}" || fail "16 on 1: $(tail -5 $TMP/s1.log)"
step_runs $TMP/s7 $TMP/s1 "1 6" "mtrain 7" "${S[@]}"
grep -q "| 2-3 micro-batches of 1 per rank (uneven: ranks 0-1 take 3)" $TMP/s7/1.log \
  || fail "banner: $(grep '^olmo train' $TMP/s7/1.log)"
grep -q "loader alarm" $TMP/s7/*.log && fail "16 on 7: $(grep 'loader alarm' $TMP/s7/*.log)"
step_check "16 on 7" $TMP/s1 "$TMP/s7/{k}" 1-6 "${TOLS[@]}" || fail "16 on 7: a step beyond its bound from W=1's state"
echo "ok 16 micro-batches on 7 ranks: each of 6 steps from W=1's state within fp32 rounding"

# 3. a node lost: W=8 -> W=7 on resume
mtrain 8 $TMP/r87 "${S[@]}" train.stop_at=3 || fail "8 ranks, stop at 3: $(tail -20 $TMP/r87.log)"
mtrain 7 $TMP/r87 "${S[@]}" || fail "resume on 7: $(tail -20 $TMP/r87.log)"
grep -q "saved by 8 ranks, now 7" $TMP/r87.log || fail "7 ranks did not resume the 8-rank checkpoint: $(tail -5 $TMP/r87.log)"
grep -q "loader alarm" $TMP/r87.log && fail "8 -> 7: $(grep 'loader alarm' $TMP/r87.log)"
step_runs $TMP/r87.steps $TMP/r87 "4 6" "mtrain 8" "${S[@]}"
step_check "8 -> 7" $TMP/r87 "$TMP/r87.steps/{k}" 4-6 "${TOLS[@]}" || fail "8 -> 7: a resumed step beyond its bound from its state"
$PY - $TMP/r87/metrics.jsonl <<'PY' || fail "memory record"
import json, sys
m = [r for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'memory']
assert m and len(m[-1]['peak_rss_gib']) == 7, m
PY
echo "ok resume 8 -> 7 ranks: the same sample stream, each resumed step matched by 8 ranks from its state"
