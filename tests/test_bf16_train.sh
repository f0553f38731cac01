#!/usr/bin/env bash
# test_bf16_train.sh: training with train.precision=bf16 on the CPU (bf16 matmul operands,
# fp32 accumulation; docs/performance.md). The kernels are checked against double and
# PyTorch in test_bf16 / test_bf16_torch.py; here the whole trainer:
#   * determinism: 1, 2 and 3 threads give bitwise identical metrics and weights; 2 MPI ranks
#     equal 1 rank bitwise; a run stopped at step 5 and resumed equals the straight run;
#   * it is bf16: each of its 12 steps, from the fp32 run's state before it, differs from
#     fp32's step (loss, ce, grad norm), but within bf16's bounds (below); step by step, not
#     two 12-step runs end to end, whose distance is fp32/bf16 training's chaos
#     (tests/ref/README.md, "Why step by step");
#   * precision is a run setting, not a checkpoint property: an fp32 checkpoint resumes in
#     bf16 and the reverse, each resumed step within the same bounds of the other precision's
#     step from the same state;
#   * the emulated engine (OLMO_NO_AMX=1) and every other engine the CPU has
#     (OLMO_BF16_ENGINE=avx512bf16, emulated) are deterministic the same way (threads, ranks,
#     resume), and each of their steps is within the same bounds of fp32's from the same
#     state; an unknown engine name is exit 2.
# The bounds per step from the same state: BF16TOL, tests/resume_lib.sh.
source "$(dirname "$0")/resume_lib.sh"

# bf16_steps LABEL REF STEPS OUT RUNNER key=value...: each step of STEPS ("A B") in the other
# precision from REF's state (step_runs), checked within the bounds above, and not bitwise
# equal to REF's (the step really ran in another precision)
bf16_steps() {
  local label=$1 ref=$2 steps=$3 out=$4 runner=$5; shift 5
  step_runs "$out" "$ref" "$steps" "$runner" train.allow_recipe_change=train.precision "$@"
  step_check "$label" "$ref" "$out/{k}" "${steps/ /-}" "${BF16TOL[@]}" || fail "$label: a step beyond bf16's bounds"
  $PY - "$ref" "$out" $steps <<'PY' || fail "$label: every step's loss bitwise equal: not run in the other precision"
import json, sys
ld = lambda p, k: [r for r in map(json.loads, open(p)) if r.get('kind') == 'train' and r['step'] == k][0]['loss']
ref, out, a, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert any(ld(f'{ref}/metrics.jsonl', k) != ld(f'{out}/{k}/metrics.jsonl', k) for k in range(a, b + 1))
PY
}

for th in 1 2 3; do OMP_NUM_THREADS=$th train "$TMP/b$th" train.precision=bf16 ckpt.interval=0; done
grep -q "^backend: cpu, bf16 matmul operands" "$TMP/b1.log" || { cat "$TMP/b1.log"; fail "no bf16 backend line"; }
grep "^backend:" "$TMP/b1.log"
for th in 2 3; do
  same_metrics "$TMP/b1" "$TMP/b$th"
  cmp "$TMP/b1/model.safetensors" "$TMP/b$th/model.safetensors" || fail "bf16 weights differ between 1 and $th threads"
done
echo "bf16 determinism: 1, 2, 3 threads bitwise identical"

if command -v mpirun >/dev/null && "$OLMO" info olmo3-tiny 2>/dev/null | grep -q .; then
  mtrain 2 "$TMP/bm2" train.precision=bf16 ckpt.interval=0
  same_metrics "$TMP/b1" "$TMP/bm2"
  cmp "$TMP/b1/model.safetensors" "$TMP/bm2/model.safetensors" || fail "bf16 weights differ between 1 and 2 ranks"
  echo "bf16: 2 MPI ranks bitwise identical to 1"
fi

train "$TMP/f" ckpt.interval=1 ckpt.keep_last=12
bf16_steps "bf16 vs fp32" "$TMP/f" "1 12" "$TMP/bsteps" train train.precision=bf16
echo "bf16 vs fp32: each step from fp32's state within bf16's bounds"

# resume: bf16 stopped at 5 and resumed == straight bf16; fp32 <-> bf16 checkpoints
train "$TMP/bs" train.precision=bf16 train.stop_at=5
train "$TMP/bs" train.precision=bf16
same_metrics "$TMP/b1" "$TMP/bs"
cmp "$TMP/b1/model.safetensors" "$TMP/bs/model.safetensors" || fail "bf16 resume differs from the straight run"
echo "bf16 stop at 5 + resume: bitwise identical to the straight run"
# the resumed runs' steps 6-12 against the other precision's from each state (step 6's is the
# checkpoint the other precision wrote)
K=(ckpt.interval=1 ckpt.keep_last=12)
train "$TMP/fb" train.stop_at=5 "${K[@]}"
train "$TMP/fb" train.precision=bf16 train.allow_recipe_change=train.precision "${K[@]}"
bf16_steps "fp32 -> bf16 resume" "$TMP/fb" "6 12" "$TMP/fbsteps" train train.precision=fp32
train "$TMP/bf" train.precision=bf16 train.stop_at=5 "${K[@]}"
train "$TMP/bf" train.precision=fp32 train.allow_recipe_change=train.precision "${K[@]}"
bf16_steps "bf16 -> fp32 resume" "$TMP/bf" "6 12" "$TMP/bfsteps" train train.precision=bf16
echo "fp32 checkpoint -> bf16 and bf16 -> fp32 resume: each resumed step within bf16's bounds of the other precision's"

if grep -q "bf16 matmul operands (amx engine)" "$TMP/b1.log"; then
  OLMO_NO_AMX=1 train "$TMP/be" train.precision=bf16 ckpt.interval=0
  grep -q "bf16 matmul operands (emulated engine)" "$TMP/be.log" || fail "OLMO_NO_AMX=1 did not select the emulated engine"
  OLMO_NO_AMX=1 bf16_steps "emulated engine vs fp32" "$TMP/f" "1 12" "$TMP/besteps" train train.precision=bf16
  echo "emulated engine: each step within bf16's bounds of fp32's"
fi

# Every other engine this CPU has (OLMO_BF16_ENGINE): deterministic at 1 and 3 threads, 2
# ranks = 1 rank, stop + resume = straight (bitwise), and within bf16 noise of the default.
default=$(sed -n 's/.*bf16 matmul operands (\([a-z0-9]*\) engine).*/\1/p' "$TMP/b1.log")
engines=(emulated)
grep -qw avx512_bf16 /proc/cpuinfo && engines+=(avx512bf16)
for e in "${engines[@]}"; do
  [ "$e" = "$default" ] && continue
  export OLMO_BF16_ENGINE=$e
  for th in 1 3; do OMP_NUM_THREADS=$th train "$TMP/$e$th" train.precision=bf16 ckpt.interval=0; done
  grep -q "bf16 matmul operands ($e engine)" "$TMP/${e}1.log" || fail "OLMO_BF16_ENGINE=$e: $(grep ^backend: "$TMP/${e}1.log")"
  same_metrics "$TMP/${e}1" "$TMP/${e}3"
  cmp "$TMP/${e}1/model.safetensors" "$TMP/${e}3/model.safetensors" || fail "$e: weights differ between 1 and 3 threads"
  if command -v mpirun >/dev/null; then
    mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x OLMO_BF16_ENGINE "$OLMO" train "$TMP/r.yml" \
      train.run_dir="$TMP/${e}m2" train.precision=bf16 ckpt.interval=0 >"$TMP/${e}m2.log" 2>&1 || fail "$e 2 ranks: $(tail -5 "$TMP/${e}m2.log")"
    same_metrics "$TMP/${e}1" "$TMP/${e}m2"
    cmp "$TMP/${e}1/model.safetensors" "$TMP/${e}m2/model.safetensors" || fail "$e: weights differ between 1 and 2 ranks"
  fi
  train "$TMP/${e}s" train.precision=bf16 train.stop_at=5
  train "$TMP/${e}s" train.precision=bf16
  cmp "$TMP/${e}1/model.safetensors" "$TMP/${e}s/model.safetensors" || fail "$e: resume differs from the straight run"
  bf16_steps "$e engine vs fp32" "$TMP/f" "1 12" "$TMP/${e}steps" train train.precision=bf16
  unset OLMO_BF16_ENGINE
  echo "$e engine: 1 = 3 threads = 2 ranks = stop + resume (bitwise), each step within bf16's bounds of fp32's"
done
OLMO_BF16_ENGINE=tpu "$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/bad" train.precision=bf16 >"$TMP/bad.log" 2>&1 && fail "OLMO_BF16_ENGINE=tpu accepted"
[ $? = 2 ] && grep -q "OLMO_BF16_ENGINE: expected amx, avx512bf16 or emulated, got 'tpu'" "$TMP/bad.log" \
  || fail "OLMO_BF16_ENGINE=tpu: $(cat "$TMP/bad.log")"
echo "ok"
