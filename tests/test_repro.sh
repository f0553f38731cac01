#!/usr/bin/env bash
# test_repro.sh: the reproduction check (scripts/repro_check.sh, docs/repro.md), short.
#  1. The full flow at 40 steps, eval every 10, on a 20k-token Markov corpus (3 epochs of
#     the shuffled order, so the epoch boundary is crossed): olmo.c and the PyTorch
#     reference (float32, same init, same batch stream) must give verdict MATCH (exit 0)
#     at landmarks 0 10 20 30 40, the same step-1 training loss within 1e-5, and the
#     reference's reconstruction of the batches must equal `olmo data order --batches`.
#  2. Negative control: the reference re-run with its peak LR doubled must be a MISMATCH
#     (exit 1): the check can fail.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

set +e
STEPS=40 EVAL_INTERVAL=10 TRAIN_TOKENS=20000 HELDOUT_DOCS=24 OLMO_BIN="$OLMO" PYTHON="$PY" \
  bash scripts/repro_check.sh "$T/r" >"$T/out" 2>&1
rc=$?
set -e
cat "$T/out"
[ "$rc" = 0 ] || fail "repro_check exit $rc, want 0 (match)"
grep -q '^verdict: MATCH' "$T/out" || fail "verdict line"
grep -q 'landmarks (common eval steps, 5): 0 10 20 30 40' "$T/r/compare.txt" || fail "landmarks"
grep -q 'epoch(s) of order; first 4 batches equal `olmo data order --batches`' "$T/r/ref.log" \
  || fail "batch cross-check"
grep -q '3 epoch(s)' "$T/r/ref.log" || fail "expected the order to span 3 epochs"
d=$(sed -n 's/^step 1 training loss: .*(diff \(.*\))$/\1/p' "$T/out")
[ -n "$d" ] || fail "no step-1 loss line"
"$PY" -c "import sys; sys.exit(0 if abs(float('$d')) < 1e-5 else 1)" || fail "step-1 loss diff $d"
grep -q '^token-level KL(olmo.c || reference): mean .* nats/token' "$T/out" || fail "no KL line"
echo "ok: olmo.c reproduces the reference (40 steps)"

# Negative control: the same reference with twice the learning rate.
"$PY" tests/ref/repro_ref.py train --olmo-run "$T/r/olmo" --out "$T/bad" \
  --init "$T/r/init.safetensors" --olmo "$OLMO" --threads 1 --lr-scale 2 >"$T/bad.log" 2>&1 \
  || { cat "$T/bad.log"; fail "reference with lr x2"; }
set +e
"$OLMO" compare "$T/r/olmo" "$T/bad" --kl-set "$T/r/heldout.npy" --eos 999 >"$T/cmp" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$T/cmp"; fail "lr x2: compare exit $rc, want 1 (mismatch)"; }
grep -q '^verdict: MISMATCH' "$T/cmp" || { cat "$T/cmp"; fail "lr x2 verdict"; }
echo "ok: a reference with twice the LR is a mismatch"
