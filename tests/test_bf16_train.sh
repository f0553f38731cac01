#!/usr/bin/env bash
# test_bf16_train.sh: training with train.precision=bf16 on the CPU (bf16 matmul operands,
# fp32 accumulation; docs/performance.md). The kernels are checked against double and
# PyTorch in test_bf16 / test_bf16_torch.py; here the whole trainer:
#   * determinism: 1, 2 and 3 threads give bitwise identical metrics and weights; 2 MPI ranks
#     equal 1 rank bitwise; a run stopped at step 5 and resumed equals the straight run;
#   * it is bf16: the metrics differ from fp32, but stay within bf16 noise of it (loss 5e-3
#     relative per step over 12 steps of the tiny model);
#   * precision is a run setting, not a checkpoint property: an fp32 checkpoint resumes in
#     bf16 and the reverse;
#   * the emulated engine (OLMO_NO_AMX=1) trains within bf16 noise of AMX;
#   * every other engine the CPU has (OLMO_BF16_ENGINE=avx512bf16, emulated) is deterministic
#     the same way (threads, ranks, resume) and within bf16 noise of the default one; an
#     unknown engine name is exit 2.
source "$(dirname "$0")/resume_lib.sh"

# close A B TOL: per-step loss/ce relative difference <= TOL, and some difference at all
close() {
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "${4:-differ}" <<'PY'
import json, sys
ld = lambda p: {r['step']: r for r in map(json.loads, open(p)) if r.get('kind') == 'train'}
a, b, tol = ld(sys.argv[1]), ld(sys.argv[2]), float(sys.argv[3])
common = sorted(set(a) & set(b))
assert common, 'no common steps'
worst = max(abs(a[s][k] - b[s][k]) / abs(a[s][k]) for s in common for k in ('loss', 'ce'))
assert worst <= tol, f'max rel loss/ce diff {worst:.3g} > {tol}'
if sys.argv[4] == 'differ':
    assert worst > 0, 'identical: the run was not in bf16'
print(f'{len(common)} steps within {tol} (max rel diff {worst:.3g})')
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

train "$TMP/f" ckpt.interval=0
close "$TMP/f" "$TMP/b1" 5e-3
echo "bf16 vs fp32: within bf16 noise"

# resume: bf16 stopped at 5 and resumed == straight bf16; fp32 <-> bf16 checkpoints
train "$TMP/bs" train.precision=bf16 train.stop_at=5
train "$TMP/bs" train.precision=bf16
same_metrics "$TMP/b1" "$TMP/bs"
cmp "$TMP/b1/model.safetensors" "$TMP/bs/model.safetensors" || fail "bf16 resume differs from the straight run"
echo "bf16 stop at 5 + resume: bitwise identical to the straight run"
train "$TMP/fb" train.stop_at=5
train "$TMP/fb" train.precision=bf16 train.allow_recipe_change=train.precision
close "$TMP/f" "$TMP/fb" 5e-3
train "$TMP/bf" train.precision=bf16 train.stop_at=5
train "$TMP/bf" train.precision=fp32 train.allow_recipe_change=train.precision
close "$TMP/f" "$TMP/bf" 5e-3
echo "fp32 checkpoint -> bf16 and bf16 -> fp32 resume: within bf16 noise of fp32"

if grep -q "bf16 matmul operands (amx engine)" "$TMP/b1.log"; then
  OLMO_NO_AMX=1 train "$TMP/be" train.precision=bf16 ckpt.interval=0
  grep -q "bf16 matmul operands (emulated engine)" "$TMP/be.log" || fail "OLMO_NO_AMX=1 did not select the emulated engine"
  close "$TMP/b1" "$TMP/be" 5e-3 any
  echo "emulated engine: within bf16 noise of AMX"
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
  close "$TMP/b1" "$TMP/${e}1" 5e-3 any
  unset OLMO_BF16_ENGINE
  echo "$e engine: 1 = 3 threads = 2 ranks = stop + resume (bitwise), within bf16 noise of $default"
done
OLMO_BF16_ENGINE=tpu "$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/bad" train.precision=bf16 >"$TMP/bad.log" 2>&1 && fail "OLMO_BF16_ENGINE=tpu accepted"
[ $? = 2 ] && grep -q "OLMO_BF16_ENGINE: expected amx, avx512bf16 or emulated, got 'tpu'" "$TMP/bad.log" \
  || fail "OLMO_BF16_ENGINE=tpu: $(cat "$TMP/bad.log")"
echo "ok"
