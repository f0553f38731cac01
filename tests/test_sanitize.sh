#!/usr/bin/env bash
# test_sanitize.sh: the whole project + the C tests built with gcc -fsanitize=address,undefined
# (-fno-sanitize-recover: any UB report is fatal) into build-asan/ (MPI=0: single process),
# then, under the sanitized binaries: every C unit test (build-asan/tests/test_*), a short
# `olmo train` on a tiny synthetic recipe (with a checkpoint and a resume), `olmo prepare` on
# the test corpus, an `olmo tokenize` encode/decode round trip, `olmo export-gguf` (f16, q8_0)
# and export-hf -> import-hf of the trained run. Any ASan/UBSan report fails.
# Leak checking: on (detect_leaks=1) for the CLI runs, off for the unit tests (they do not
# free their fixtures before exiting); see docs/robustness.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SAN_BUILD:-build-asan}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
OLMO=$PWD/$B/olmo
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
CFLAGS="-O1 -g -march=native $SAN" LDFLAGS="$SAN" nice make -s BUILD="$B" MPI=0 -j2 all >"$T/make.log" 2>&1 ||
  { tail -30 "$T/make.log"; fail "sanitized build"; }
# san_check LOG: no sanitizer report in LOG.
san_check() { ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" || { grep -E -A20 'Sanitizer|runtime error' "$1" | head -40; fail "sanitizer report in $1"; }; }

# 1. C unit tests (the tool_* programs are benchmarks, not tests).
for t in "$B"/tests/test_*; do
  [[ -x $t && $t != *.o && $t != *.d ]] || continue
  n=$(basename "$t")
  rc=0; ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 "$t" >"$T/$n.log" 2>&1 || rc=$?
  [ $rc = 0 ] || { tail -30 "$T/$n.log"; fail "$n (sanitized) exit $rc"; }
  san_check "$T/$n.log"
  echo "ok: $n"
done

# 2. olmo train: tiny model, 6 steps, a checkpoint at 3, then resume to 8.
/usr/bin/python3 - "$T/tok.npy" <<'PY'
import random, struct, sys
random.seed(7)
n = 20000
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % n, *[random.randrange(1000) for _ in range(n)]))
PY
cat > "$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 4, micro_batch: 2, max_steps: 6, run_dir: $T/run}
optim: {lr: 0.003}
schedule: {warmup_steps: 2}
data: {paths: [$T/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 3}
eval: {off: true}
YML
"$OLMO" train "$T/r.yml" >"$T/train.log" 2>&1 || { tail -30 "$T/train.log"; fail "olmo train (sanitized)"; }
san_check "$T/train.log"
"$OLMO" train "$T/r.yml" train.max_steps=8 train.allow_recipe_change=train.max_steps >"$T/train2.log" 2>&1 || { tail -30 "$T/train2.log"; fail "olmo train resume (sanitized)"; }
san_check "$T/train2.log"
grep -q '"step":8' "$T/run/metrics.jsonl" || grep -q '"step": 8' "$T/run/metrics.jsonl" || fail "resumed run did not reach step 8"
echo "ok: train + resume"

# 3. olmo prepare on the test corpus (2 threads), then a bad line with --skip-bad absent: exit 2, clean.
mkdir -p "$T/in"
cp tests/data/prep_docs.jsonl "$T/in/docs.jsonl"
cp tests/data/prep_note.txt "$T/in/note.txt"
"$OLMO" prepare "$T/in" -o "$T/out" --threads 2 --heldout-frac 0.3 >"$T/prep.log" 2>&1 || { tail -20 "$T/prep.log"; fail "olmo prepare (sanitized)"; }
san_check "$T/prep.log"
printf '{"text": "ok"}\n{"text": 5}\n' > "$T/in/bad.jsonl"
set +e; "$OLMO" prepare "$T/in" -o "$T/out2" >"$T/prep2.log" 2>&1; rc=$?; set -e
[ $rc = 2 ] || { tail -20 "$T/prep2.log"; fail "prepare with a bad line: exit $rc, expected 2"; }
san_check "$T/prep2.log"
echo "ok: prepare"

# 4. tokenize round trip (stress text: every script, emoji, long runs).
"$OLMO" tokenize < tests/data/tokenizer_stress.txt > "$T/ids" 2>"$T/tok.log" || { cat "$T/tok.log"; fail "tokenize"; }
"$OLMO" tokenize --decode < "$T/ids" > "$T/back" 2>>"$T/tok.log" || { cat "$T/tok.log"; fail "tokenize --decode"; }
san_check "$T/tok.log"
cmp -s tests/data/tokenizer_stress.txt "$T/back" || fail "tokenize round trip differs"
echo "ok: tokenize round trip"

# 5. export-gguf (the streaming writer, the tokenizer arrays, Q8_0) and the HF round trip.
for ty in f16 q8_0; do
  "$OLMO" export-gguf "$T/run" "$T/m-$ty.gguf" --type $ty >"$T/gguf-$ty.log" 2>&1 || { tail -20 "$T/gguf-$ty.log"; fail "export-gguf $ty (sanitized)"; }
  san_check "$T/gguf-$ty.log"
done
"$OLMO" export-hf "$T/run" "$T/hf" >"$T/hf.log" 2>&1 && "$OLMO" import-hf "$T/hf" "$T/imp" >>"$T/hf.log" 2>&1 \
  || { tail -20 "$T/hf.log"; fail "export-hf / import-hf (sanitized)"; }
san_check "$T/hf.log"
echo "ok: export-gguf, export-hf, import-hf"
echo "sanitizers clean"
