#!/usr/bin/env bash
# repro_check.sh: the reproduction check, end to end (docs/repro.md).
#
#   bash scripts/repro_check.sh [OUTDIR]          (or: make repro-check)
#
# 1. data    a seeded sparse Markov-chain corpus (vocab 1000, EOS 999): OUTDIR/train.npy,
#            OUTDIR/heldout.npy (tests/ref/repro_ref.py data)
# 2. init    initial weights drawn once by the PyTorch reference: OUTDIR/init.safetensors
# 3. olmo.c  build/olmo train (olmo3-tiny, z-loss, warmup + cosine, held-out eval every
#            EVAL_INTERVAL steps) from init.safetensors -> OUTDIR/olmo
# 4. ref     tests/ref/repro_ref.py train: the independent PyTorch implementation
#            (tests/ref/olmo_ref.py, float32), same config/init/batches/schedule/eval
#            -> OUTDIR/ref
# 5. compare build/olmo compare OUTDIR/olmo OUTDIR/ref --kl-set OUTDIR/heldout.npy --eos 999
#            (compare's default tolerances) -> verdict; exits with compare's status
#            (0 match, 1 mismatch, 2 bad input).
#
# Environment (defaults = the full check): STEPS=300 EVAL_INTERVAL=25 SEQ_LEN=64
# GLOBAL_BATCH=16 MICRO_BATCH=4 LR=5e-3 WARMUP=20 Z_LOSS=1e-4 TRAIN_TOKENS=200000
# HELDOUT_DOCS=40 DATA_SEED=7 INIT_SEED=0 OLMO_BIN=build/olmo PYTHON=/usr/bin/python3
# THREADS=1 (OpenMP threads of olmo.c, torch threads of the reference)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-runs/repro}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
OLMO=${OLMO_BIN:-$ROOT/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-300}
EVAL_INTERVAL=${EVAL_INTERVAL:-25}
SEQ_LEN=${SEQ_LEN:-64}
GLOBAL_BATCH=${GLOBAL_BATCH:-16}
MICRO_BATCH=${MICRO_BATCH:-4}
LR=${LR:-5e-3}
WARMUP=${WARMUP:-20}
Z_LOSS=${Z_LOSS:-1e-4}
TRAIN_TOKENS=${TRAIN_TOKENS:-200000}
HELDOUT_DOCS=${HELDOUT_DOCS:-40}
DATA_SEED=${DATA_SEED:-7}
INIT_SEED=${INIT_SEED:-0}
THREADS=${THREADS:-1}
export OMP_NUM_THREADS=$THREADS
[ -x "$OLMO" ] || { echo "repro_check: $OLMO not built (make -j2)" >&2; exit 2; }

now() { date +%s.%N; }
declare -a TIMES=()
timed() {  # timed NAME LOG cmd...: run, log to LOG, record the wall time
  local name=$1 log=$2; shift 2
  local t0; t0=$(now)
  if ! "$@" >"$log" 2>&1; then
    echo "repro_check: $name failed (log: $log):" >&2
    tail -20 "$log" >&2
    exit 2
  fi
  local dt; dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')
  TIMES+=("$name ${dt}s")
  echo "[$name ${dt}s] $(tail -1 "$log")"
}

rm -rf "$OUT/olmo" "$OUT/ref"
echo "repro_check: $OUT  ($STEPS steps, seq $SEQ_LEN, batch $GLOBAL_BATCH/$MICRO_BATCH, lr $LR, eval every $EVAL_INTERVAL)"
timed data "$OUT/data.log" "$PY" tests/ref/repro_ref.py data "$OUT" \
  --train-tokens "$TRAIN_TOKENS" --heldout-docs "$HELDOUT_DOCS" --seed "$DATA_SEED"
timed init "$OUT/init.log" "$PY" tests/ref/repro_ref.py init "$OUT/init.safetensors" --seed "$INIT_SEED"

cat >"$OUT/recipe.yml" <<YML
# reproduction check (scripts/repro_check.sh): olmo.c side
model: {preset: olmo3-tiny}
train:
  seq_len: $SEQ_LEN
  global_batch: $GLOBAL_BATCH
  micro_batch: $MICRO_BATCH
  max_steps: $STEPS
  z_loss: $Z_LOSS
  load_path: "$OUT/init.safetensors"
  run_dir: "$OUT/olmo"
  resume: never
  log_every: $EVAL_INTERVAL
optim: {lr: $LR, max_grad_norm: 1.0, weight_decay: 0.1, skip_step: false}
schedule: {name: cosine, warmup_steps: $WARMUP, alpha_f: 0.1}
data: {paths: ["$OUT/train.npy"], order: shuffle}
eval: {sets: ["heldout=$OUT/heldout.npy"], eos_id: 999, interval: $EVAL_INTERVAL}
ckpt: {interval: 0, async: false}
perf: {peak_flops: 1e11}
YML
timed olmo.c "$OUT/olmo.log" "$OLMO" train "$OUT/recipe.yml"
timed reference "$OUT/ref.log" "$PY" tests/ref/repro_ref.py train --olmo-run "$OUT/olmo" \
  --out "$OUT/ref" --init "$OUT/init.safetensors" --olmo "$OLMO" --threads "$THREADS"

t0=$(now)
set +e
"$OLMO" compare "$OUT/olmo" "$OUT/ref" --kl-set "$OUT/heldout.npy" --eos 999 >"$OUT/compare.txt" 2>&1
rc=$?
set -e
TIMES+=("compare $(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}')s")
[ "$rc" = 2 ] && { cat "$OUT/compare.txt" >&2; echo "repro_check: compare: bad input" >&2; exit 2; }

# summary: step-1 training loss (same init, same batch: equal up to float32 rounding),
# the verdict, the worst held-out CE gap, sign flips and the KL
"$PY" - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
def train(p):
    return {r["step"]: r for r in map(json.loads, open(p)) if r.get("kind") == "train"}
a, b = train(f"{out}/olmo/metrics.jsonl"), train(f"{out}/ref/metrics.jsonl")
s1 = min(a)
print(f"step {s1} training loss: olmo.c {a[s1]['loss']:.7f}  reference {b[s1]['loss']:.7f}  "
      f"(diff {b[s1]['loss'] - a[s1]['loss']:+.2e})")
last = max(set(a) & set(b))
print(f"step {last} training loss: olmo.c {a[last]['loss']:.5f}  reference {b[last]['loss']:.5f}")
txt = open(f"{out}/compare.txt").read()
m = re.search(r"^eval/macro/ce\s+\S+\s+(\d+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\d+)", txt, re.M)
if m:
    print(f"held-out CE: worst |gap| {float(m.group(2)):.6f} nats at step {m.group(3)} "
          f"over {m.group(1)} landmarks, mean gap {m.group(4)}, sign flips {m.group(5)}")
k = re.search(r"mean KL (\S+) nats/token \(max (\S+)\)", txt)
if k:
    print(f"token-level KL(olmo.c || reference): mean {k.group(1)} nats/token (max {k.group(2)})")
v = re.search(r"^verdict: .*$", txt, re.M)
print(v.group(0) if v else "verdict: (none)")
PY
echo "timings: ${TIMES[*]}"
echo "full comparison: $OUT/compare.txt"
exit "$rc"
