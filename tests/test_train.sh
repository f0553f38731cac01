#!/usr/bin/env bash
# test_train.sh: `olmo train` and `olmo info` (issue 2): bitwise determinism across
# OMP_NUM_THREADS, bad input (exit 2, a message naming the key or file, nothing written),
# and the OLMo 3 7B figures of `olmo info` (docs/olmo3.md sections 1 and 8).
source "$(dirname "$0")/resume_lib.sh"

# --- determinism: same recipe + seed, 1 vs 2 threads: identical metrics and weights
OMP_NUM_THREADS=1 train "$TMP/t1" train.max_steps=4 ckpt.interval=0
OMP_NUM_THREADS=2 train "$TMP/t2" train.max_steps=4 ckpt.interval=0
same_metrics "$TMP/t1" "$TMP/t2"
cmp "$TMP/t1/model.safetensors" "$TMP/t2/model.safetensors" || fail "weights differ between 1 and 2 threads"
echo "determinism: 1 vs 2 threads bitwise identical"

# --- bad input: exit 2, message, run dir never created
bad() {   # bad NAME EXPECTED-SUBSTRING [args...]
  local name=$1 want=$2; shift 2
  local d="$TMP/bad-$name" rc=0
  "$OLMO" train "$@" train.run_dir="$d" >"$d.log" 2>&1 || rc=$?
  [ $rc = 2 ] || { cat "$d.log"; fail "$name: exit $rc, want 2"; }
  grep -q -- "$want" "$d.log" || { cat "$d.log"; fail "$name: message lacks '$want'"; }
  [ ! -e "$d" ] || fail "$name: wrote $d"
  echo "bad input $name: exit 2, '$want'"
}
bad unknown-key "did you mean 'optim.lr'" "$TMP/r.yml" optim.lrr=1
bad wrong-type "expected a number" "$TMP/r.yml" optim.lr=fast
bad heads-divide "d_model must be divisible by model.n_heads" "$TMP/r.yml" model.n_heads=5
bad kv-heads "multiple of model.n_kv_heads" "$TMP/r.yml" model.n_kv_heads=3
bad batch-split "micro_batch" "$TMP/r.yml" train.micro_batch=3
bad missing-file "nowhere.npy" "$TMP/r.yml" data.paths="$TMP/nowhere.npy"
head -c 100 "$TMP/tok.npy" > "$TMP/short.npy"
bad short-file "short.npy" "$TMP/r.yml" data.paths="$TMP/short.npy"
head -c 4099 "$TMP/tok.npy" > "$TMP/odd.npy"
bad odd-size "multiple of 4" "$TMP/r.yml" data.paths="$TMP/odd.npy"
$PY -c "import struct; open('$TMP/big.npy','wb').write(struct.pack('<256I', *([5]*255 + [5000])))"
bad id-too-big "big.npy" "$TMP/r.yml" data.paths="$TMP/big.npy" train.seq_len=16
bad missing-recipe "nope.yml" "$TMP/nope.yml"

# --- divergence: a loss that stays non-finite skips every step (weights untouched) and
# stops the run after 16 in a row with exit 1 and a checkpoint of finite weights
rc=0
"$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/div" optim.lr=1e4 optim.max_grad_norm=0 schedule.warmup_steps=0 \
  schedule.name=constant train.max_steps=60 ckpt.interval=0 >"$TMP/div.log" 2>&1 || rc=$?
[ $rc = 1 ] || { tail -5 "$TMP/div.log"; fail "diverged run: exit $rc, want 1"; }
grep -q "16 consecutive steps had a non-finite loss" "$TMP/div.log" || fail "no divergence message"
$PY - "$TMP/div" <<'PY' || fail "diverged run saved non-finite weights"
import glob, sys, numpy as np
sys.path.insert(0, "tests/ref")
from safetensors_io import read
d = sorted(glob.glob(sys.argv[1] + "/checkpoints/step-*"))[-1]
assert all(np.isfinite(t).all() for t in read(d + "/model.safetensors").values())
PY
echo "divergence: stopped after 16 skipped non-finite steps, weights finite"

# --- olmo info: the OLMo 3 7B numbers
out=$("$OLMO" info configs/olmo3-7b-stage1.yml --world 512)
echo "$out" | grep -q "7298617344 total" || fail "7B parameter count"
echo "$out" | grep -q "7298011136 with vocab 100278" || fail "7B parameter count at the real vocab"
echo "$out" | grep -q "OLMo-core v2.3 count.*54.21 GFLOP" || fail "7B OLMo-core v2.3 FLOPs/token"
echo "$out" | grep -q "sliding-window-aware count.*49.38 GFLOP" || fail "7B window-aware FLOPs/token"
"$OLMO" info olmo3-7b | grep -q "7298617344 total" || fail "info on the preset"
echo "info: 7,298,617,344 parameters, 54.21 / 49.38 GFLOP/token"
echo "test_train: ok"
