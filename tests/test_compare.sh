#!/usr/bin/env bash
# test_compare.sh: `olmo compare` (src/cli/cmd_compare.c, docs/report.md).
#  1. Hand-written metrics.jsonl: gaps within tolerance -> exit 0 (MATCH, sign flips
#     counted); a CE gap or a task-accuracy gap beyond tolerance -> exit 1; no common
#     eval step, a missing run directory, a run without metrics.jsonl -> exit 2 with a message.
#  2. Two tiny trained runs (olmo3-tiny, vocab 1000, 3 steps, different seeds): token-level
#     KL(A||A) is exactly 0, KL(A||B) > 0; --tol-kl 0 turns B into a mismatch (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect RC OUTFILE cmd...: run, capture stdout+stderr, check the exit status.
expect() {
  local want=$1 out=$2; shift 2
  set +e; "$@" >"$out" 2>&1; local rc=$?; set -e
  [ "$rc" = "$want" ] || { cat "$out"; fail "exit $rc, want $want: $*"; }
}

# ---- 1. synthetic metrics ------------------------------------------------------------
# run DIR: eval records from "step:ce_c4:ce_wiki:acc" items, plus train records.
mkrun() {
  local d=$1; shift
  mkdir -p "$d"
  $PY - "$d/metrics.jsonl" "$@" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for item in sys.argv[2:]:
        s, c4, wiki, acc = item.split(":")
        s = int(s)
        f.write(json.dumps({"kind": "train", "step": max(s, 1), "loss": float(c4) - 0.1}) + "\n")
        f.write(json.dumps({"kind": "eval", "step": s, "eval/c4/ce": float(c4), "eval/c4/ppl": 2.718281828 ** float(c4),
                            "eval/c4/tokens": 1000, "eval/wiki/ce": float(wiki), "eval/macro/ce": (float(c4) + float(wiki)) / 2,
                            "task/arc/acc": float(acc), "task/arc/len_norm": float(acc), "task/arc/bpb": 1.5,
                            "eval/seconds": 0.5}) + "\n")
PY
}
mkrun "$T/a" 0:7.0:7.2:0.25 100:5.0:5.3:0.30 200:4.0:4.4:0.35 300:3.5:3.9:0.40
# B: gaps +0.01, -0.01, +0.015, -0.005 on c4 (three sign flips), and an extra step 150.
mkrun "$T/b" 0:7.01:7.2:0.26 100:4.99:5.3:0.28 150:4.5:4.8:0.3 200:4.015:4.4:0.36 300:3.495:3.91:0.41
expect 0 "$T/out" "$OLMO" compare "$T/a" "$T/b"
grep -q 'landmarks (common eval steps, 4): 0 100 200 300' "$T/out" || { cat "$T/out"; fail "landmarks"; }
grep -Eq '^eval/c4/ce +0.02 +4 +0.015000 +200 .* 3  ok' "$T/out" || { cat "$T/out"; fail "c4 row (max gap, flips)"; }
grep -Eq '^eval/c4/ppl .*\(info\)' "$T/out" || { cat "$T/out"; fail "ppl is informational"; }
grep -q 'eval/c4/tokens\|eval/seconds' "$T/out" && fail "counts must not be compared"
grep -q '^verdict: MATCH' "$T/out" || { cat "$T/out"; fail "verdict"; }
echo "ok: match within tolerance"

# C: c4 CE 0.05 worse at step 200.
mkrun "$T/c" 0:7.0:7.2:0.25 100:5.0:5.3:0.30 200:4.05:4.4:0.35 300:3.5:3.9:0.40
expect 1 "$T/out" "$OLMO" compare "$T/a" "$T/c"
grep -q '^verdict: MISMATCH' "$T/out" && grep -q 'eval/c4/ce: |B-A| = 0.050000 at step 200 > 0.02' "$T/out" \
  || { cat "$T/out"; fail "CE mismatch"; }
grep -q 'eval/macro/ce: |B-A| = 0.025000' "$T/out" || { cat "$T/out"; fail "macro CE mismatch"; }
# A looser tolerance accepts it.
expect 0 "$T/out" "$OLMO" compare "$T/a" "$T/c" --tol-ce 0.06
# D: task accuracy 0.1 lower at step 300.
mkrun "$T/d" 0:7.0:7.2:0.25 100:5.0:5.3:0.30 200:4.0:4.4:0.35 300:3.5:3.9:0.30
expect 1 "$T/out" "$OLMO" compare "$T/a" "$T/d"
grep -q 'task/arc/acc: |B-A| = 0.100000 at step 300' "$T/out" || { cat "$T/out"; fail "task mismatch"; }
expect 0 "$T/out" "$OLMO" compare "$T/a" "$T/d" --tol-task 0.11
echo "ok: mismatches exit 1"

# Bad input: no common step, missing directory, no metrics, no eval records, bad option.
mkrun "$T/e" 50:5.0:5.3:0.30 250:4.0:4.4:0.35
expect 2 "$T/out" "$OLMO" compare "$T/a" "$T/e"
grep -q 'no eval step in common: A .* at steps 0 100 200 300; B .* at 50 250' "$T/out" || { cat "$T/out"; fail "no-common message"; }
expect 2 "$T/out" "$OLMO" compare "$T/a" "$T/nope"
grep -q 'run directory .*nope does not exist' "$T/out" || { cat "$T/out"; fail "missing dir message"; }
mkdir -p "$T/empty"
expect 2 "$T/out" "$OLMO" compare "$T/a" "$T/empty"
grep -q 'metrics.jsonl: cannot read' "$T/out" || { cat "$T/out"; fail "missing metrics message"; }
mkdir -p "$T/trainonly"; echo '{"kind":"train","step":1,"loss":3}' >"$T/trainonly/metrics.jsonl"
expect 2 "$T/out" "$OLMO" compare "$T/a" "$T/trainonly"
grep -q 'has no eval records' "$T/out" || { cat "$T/out"; fail "no eval records message"; }
expect 2 "$T/out" "$OLMO" compare "$T/a"
expect 2 "$T/out" "$OLMO" compare "$T/a" "$T/b" --tol-ce abc
expect 0 "$T/out" "$OLMO" compare --help
echo "ok: bad input exits 2"

# ---- 2. token-level KL between trained tiny runs -----------------------------------------
# Token files: training data, and held-out documents (EOS = 999 here: the tiny vocab is 1000).
$PY - "$T/tok.npy" "$T/heldout.npy" <<'PY'
import random, struct, sys
rng = random.Random(3)
open(sys.argv[1], "wb").write(struct.pack("<20000I", *[rng.randrange(999) for _ in range(20000)]))
toks = []
for d in range(7):
    toks += [rng.randrange(999) for _ in range(rng.randint(5, 50))] + [999]
toks += [1, 2, 3]   # an incomplete trailing document: ignored
open(sys.argv[2], "wb").write(struct.pack("<%dI" % len(toks), *toks))
PY
cat >"$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 4, micro_batch: 2, max_steps: 3}
optim: {lr: 0.003}
schedule: {warmup_steps: 1}
data: {paths: [$T/tok.npy]}
perf: {peak_flops: 1e11}
eval: {sets: ["held=$T/heldout.npy"], eos_id: 999, interval: 1}
YML
"$OLMO" train "$T/r.yml" train.run_dir="$T/ra" >"$T/ra.log" 2>&1 || { cat "$T/ra.log"; fail "train A"; }
"$OLMO" train "$T/r.yml" train.run_dir="$T/rb" train.seed=2 >"$T/rb.log" 2>&1 || { cat "$T/rb.log"; fail "train B"; }

expect 0 "$T/out" "$OLMO" compare "$T/ra" "$T/ra" --kl-set "$T/heldout.npy"
grep -q '7 documents, [0-9]* tokens: mean KL 0 nats/token (max 0)' "$T/out" || { cat "$T/out"; fail "KL(A||A) must be exactly 0"; }
grep -q '^verdict: MATCH' "$T/out" || { cat "$T/out"; fail "A vs A verdict"; }
# KL(A||B) > 0; the verdict follows the tolerance.
set +e; "$OLMO" compare "$T/ra" "$T/rb" --kl-set "$T/heldout.npy" --kl-docs 5 --kl-batch 3 >"$T/out" 2>&1; rc=$?; set -e
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { cat "$T/out"; fail "A vs B exit $rc"; }
kl=$(sed -n 's/.*5 documents, [0-9]* tokens: mean KL \([^ ]*\) nats.*/\1/p' "$T/out")
[ -n "$kl" ] || { cat "$T/out"; fail "no KL line"; }
$PY -c "import sys; sys.exit(0 if float('$kl') > 0 else 1)" || fail "KL(A||B) = $kl, want > 0"
expect 1 "$T/out" "$OLMO" compare "$T/ra" "$T/rb" --kl-set "$T/heldout.npy" --tol-kl 0 --tol-ce 100
grep -q 'mean KL(A||B) = .* > 0' "$T/out" || { cat "$T/out"; fail "KL mismatch message"; }
# The KL from an explicit checkpoint equals the default (RUN/model.safetensors).
expect 0 "$T/out2" "$OLMO" compare "$T/ra" "$T/ra" --kl-set "$T/heldout.npy" --ckpt-b "$T/ra/model.safetensors"
grep -q 'mean KL 0 nats' "$T/out2" || { cat "$T/out2"; fail "explicit ckpt"; }
expect 2 "$T/out" "$OLMO" compare "$T/ra" "$T/rb" --kl-set "$T/nope.npy"
expect 2 "$T/out" "$OLMO" compare "$T/ra" "$T/rb" --kl-set "$T/heldout.npy" --eos 5000
echo "ok: KL(A||A) = 0, KL(A||B) = $kl"
echo "test_compare: all ok"
