# resume_lib.sh: shared setup of the checkpoint / resume / distributed tests (sourced):
# a synthetic token file (ids < 1000), a tiny recipe, helpers. Run directly it does nothing.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && { echo "helper sourced by test_resume.sh, test_checkpoint_bad.sh, test_dist.sh, test_stage.sh, test_train.sh"; exit 0; }
set -euo pipefail
OLMO=${OLMO_BIN:-$PWD/build/olmo}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
$PY - "$TMP/tok.npy" <<'PY'
import random, struct, sys
random.seed(7)
n = 60000
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % n, *[random.randrange(1000) for _ in range(n)]))
PY
cat > "$TMP/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 8, micro_batch: 2, max_steps: 12, run_dir: $TMP/run}
optim: {lr: 0.003}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 5}
eval: {off: true}
YML
fail() { echo "FAIL: $*" >&2; exit 1; }
# train DIR [key=value...]: single process, output in DIR.log
train() { local d=$1; shift; "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1; }
# mtrain W DIR [key=value...]: W ranks under mpirun
mtrain() { local w=$1 d=$2; shift 2; mpirun --oversubscribe --allow-run-as-root -np "$w" -x OMP_NUM_THREADS=1 "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1; }
# wait_for SECONDS CONDITION: poll CONDITION (a shell expression) every 0.05 s until it
# holds (status 0) or SECONDS have passed (status 1). The deadline is generous on purpose:
# a loaded or slow machine only makes the wait longer, never the test fail.
wait_for() { local end=$((SECONDS + $1)); shift; until eval "$1"; do [ $SECONDS -lt $end ] || return 1; sleep 0.05; done; }
# step_runs OUT REF STEPS RUNNER [key=value...]: for each step k of `seq STEPS` ("1 10"),
# step k alone, run by RUNNER (a command and its first words, e.g. "mtrain 2", called as
# RUNNER DIR key=value...) in OUT/k from REF's state after step k-1 (REF ran with
# ckpt.interval=1; a fresh start for k = 1: the same seed, the same initial weights).
# tests/step_check.py then holds each against REF's step k: one step's rounding, not a
# trajectory's chaos (tests/ref/README.md, "Why step by step").
step_runs() {
  local out=$1 ref=$2 steps=$3 k; local -a runner=($4); shift 4; mkdir -p "$out"
  for k in $(seq $steps); do
    local from=(); [ "$k" = 1 ] || from=(train.resume=$ref/checkpoints/step-$(printf %08d $((k - 1))))
    "${runner[@]}" "$out/$k" "${from[@]}" train.stop_at=$k "$@" || fail "step $k alone (${runner[*]} $*): $(tail -20 "$out/$k.log")"
  done
}
# step_check LABEL REF PATTERN STEPS --rho-grad X --rho-loss X --rho-norm X: tests/step_check.py,
# its summary line (and every failing row)
step_check() {
  local out rc=0
  out=$($PY tests/step_check.py "$@") || rc=$?
  grep -E "FAIL|worst fraction" <<<"$out"
  return $rc
}
# BF16TOL: a bf16 step against an fp32 one (or against another bf16 one whose fp32 sums ran
# in another order) from the same state (step_check): loss and ce within 2^-9 = 1.95e-3
# relative (bf16's unit roundoff: every matmul operand is rounded once, relative error
# <= 2^-9, and the loss is the mean over 256 targets of terms whose errors take both signs,
# so first order it moves by less than one operand rounding; measured <= 3e-5 on an AMD EPYC with AVX512_BF16), the
# grad norm within sqrt(100) 2^-9 = 2e-2 (the path from the loss to layer 0's gradient rounds
# about 100 matmul operands: per block ~22 in the backward (the MLP's 3 products, attention's
# 4 and the projections' 4, two operands each) and the forward's activations, plus the LM
# head's; each rounding at most 2^-9, independent roundings adding in quadrature; measured
# <= 8.7e-3, on the bf16 -> fp32 resume). The gradients themselves are test_bf16's and
# test_bf16_torch.py's. (The figures: tests/test_bf16_train.sh.)
BF16TOL=(--rho-grad none --rho-loss 1.95e-3 --rho-norm 2e-2)
# same_metrics A B [tol]: train records (loss, ce, z_loss, grad_norm, lr per step) equal
# (exactly, or within relative tol), and each run has every step exactly once.
same_metrics() {
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" "${3:-0}" <<'PY'
import json, sys
def load(p):
    recs = [json.loads(l) for l in open(p)]
    tr = [r for r in recs if r.get('kind') == 'train']
    steps = [r['step'] for r in tr]
    assert steps == list(range(1, len(steps) + 1)), f'{p}: steps {steps}'
    return tr
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert len(a) == len(b), (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    for k in ('loss', 'ce', 'z_loss', 'grad_norm', 'lr'):
        d = abs(x[k] - y[k]) / max(abs(x[k]), 1e-30)
        worst = max(worst, d)
        if (tol == 0 and x[k] != y[k]) or d > tol:
            sys.exit(f'step {x["step"]} {k}: {x[k]!r} vs {y[k]!r}')
print(f'metrics match ({len(a)} steps, max rel diff {worst:.3g})')
PY
}
