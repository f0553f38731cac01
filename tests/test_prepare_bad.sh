#!/usr/bin/env bash
# test_prepare_bad.sh: `olmo prepare` on bad input. Each case must exit 2 with a message
# naming the file (and line where there is one), and leave no output that looks complete:
# no token file, no manifest, no temp file in a fresh OUTDIR, and an earlier good OUTDIR
# untouched. --skip-bad skips and counts bad records; empty documents are skipped and
# counted in any case.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
PY=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
good='{"text": "A good document."}'

# expect_bad NAME PATTERN ARGS...: exit 2, stderr matches PATTERN, OUTDIR $T/out_NAME empty.
expect_bad() {
  local name=$1 pat=$2; shift 2
  local out="$T/out_$name" rc=0
  "$OLMO" prepare "$@" -o "$out" > "$T/$name.log" 2>&1 || rc=$?
  [ $rc = 2 ] || { cat "$T/$name.log"; fail "$name: exit $rc, want 2"; }
  grep -qE -- "$pat" "$T/$name.log" || { cat "$T/$name.log"; fail "$name: message does not match '$pat'"; }
  if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then ls -la "$out"; fail "$name: left files in $out"; fi
  echo "ok $name: $(grep -m1 error "$T/$name.log")"
}

mkdir -p "$T/in"
printf '%s\n%s\n{"text": "unterminated\n%s\n' "$good" "$good" "$good" > "$T/in/badjson.jsonl"
printf '%s\n{"id": "x", "body": "no text field"}\n' "$good" > "$T/in/notext.jsonl"
printf '%s\n%s\n{"text": 42}\n' "$good" "$good" > "$T/in/numtext.jsonl"
printf '%s\n%s\n%s\n{"text": "bad \xff\xfe byte"}\n' "$good" "$good" "$good" > "$T/in/badutf8.jsonl"
printf 'line one\nline two \xc3\x28 bad\n' > "$T/in/badutf8.txt"
printf '%s\n{"text": ""}\n%s\n' "$good" "$good" > "$T/in/empty.jsonl"
printf 'not gzip data at all, but named .gz' > "$T/in/corrupt.jsonl.gz"
gzip -c "$T/in/empty.jsonl" | head -c 20 > "$T/in/truncated.jsonl.gz"
head -c 5000 "${OLMO_TOKENIZER:-tokenizers/dolma2-tokenizer.json}" > "$T/trunc-tokenizer.json"

expect_bad badjson "badjson.jsonl:3: malformed JSON" "$T/in/badjson.jsonl"
expect_bad notext "notext.jsonl:2: missing or non-string \"text\"" "$T/in/notext.jsonl"
expect_bad numtext "numtext.jsonl:3: missing or non-string \"text\"" "$T/in/numtext.jsonl"
expect_bad badutf8 "badutf8.jsonl:4: invalid UTF-8" "$T/in/badutf8.jsonl"
expect_bad badutf8txt "badutf8.txt:2: invalid UTF-8" "$T/in/badutf8.txt"
expect_bad missing "nonexistent.jsonl" "$T/in/nonexistent.jsonl"
expect_bad corruptgz "corrupt.jsonl.gz: not gzip data" "$T/in/corrupt.jsonl.gz"
expect_bad truncgz "truncated.jsonl.gz" "$T/in/truncated.jsonl.gz"
if command -v zstd >/dev/null; then
  zstd -q -c tests/data/prep_docs.jsonl | head -c 60 > "$T/in/truncated.jsonl.zst"
  printf 'not zstd' > "$T/in/corrupt.jsonl.zst"
  expect_bad trunczst "truncated.jsonl.zst: truncated zstd" "$T/in/truncated.jsonl.zst"
  expect_bad corruptzst "corrupt.jsonl.zst: corrupt zstd" "$T/in/corrupt.jsonl.zst"
fi
expect_bad tokenizer "trunc-tokenizer.json" --tokenizer "$T/trunc-tokenizer.json" "$T/in/empty.jsonl"
expect_bad notok "no-such-tokenizer.json" --tokenizer "$T/no-such-tokenizer.json" "$T/in/empty.jsonl"
expect_bad badfrac "heldout-frac" --heldout-frac 1.5 "$T/in/empty.jsonl"
# A good source first (sorted order: aaa < zzz), the bad one second: nothing of the good
# one may be left either (outputs are moved into place only when every source succeeded).
mkdir -p "$T/two"
printf '%s\n%s\n' "$good" "$good" > "$T/two/aaa.jsonl"
cp "$T/in/badjson.jsonl" "$T/two/zzz.jsonl"
expect_bad second "zzz.jsonl:3: malformed JSON" "$T/two"
# Two inputs with one stem.
mkdir -p "$T/dup"; cp "$T/in/empty.jsonl" "$T/dup/empty.jsonl"
expect_bad dupstem "both map to source 'empty'" "$T/in/empty.jsonl" "$T/dup/empty.jsonl"

# An earlier good OUTDIR survives a failing run unchanged.
"$OLMO" prepare "$T/two/aaa.jsonl" -o "$T/keep" 2>/dev/null || fail "good run"
sum=$(cat "$T"/keep/* | md5sum)
rc=0; "$OLMO" prepare "$T/two/aaa.jsonl" "$T/in/badjson.jsonl" -o "$T/keep" --force 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "failing run into a good OUTDIR: exit $rc"
[ "$(cat "$T"/keep/* | md5sum)" = "$sum" ] || fail "failing run changed an earlier good OUTDIR"
[ "$(ls "$T/keep" | grep -c tmp)" = 0 ] || fail "temp files left in the good OUTDIR"

# --skip-bad: bad records skipped with a warning naming file:line, counted in the manifest.
cat "$T/in/badjson.jsonl" "$T/in/notext.jsonl" "$T/in/badutf8.jsonl" "$T/in/empty.jsonl" > "$T/mixed.jsonl"
"$OLMO" prepare "$T/mixed.jsonl" -o "$T/skip" --skip-bad --heldout-frac 0 2> "$T/skip.log" || { cat "$T/skip.log"; fail "--skip-bad run"; }
grep -q "mixed.jsonl:3: malformed JSON.*skipped" "$T/skip.log" || { cat "$T/skip.log"; fail "--skip-bad warning"; }
"$PY" - "$T/skip/manifest.json" <<'EOF' || fail "--skip-bad counts"
import json, sys
m = json.load(open(sys.argv[1]))
s = m["sources"][0]
assert (s["skipped_bad"], s["skipped_empty"]) == (3, 1), s
o = m["outputs"][0]
# 4+2+4+3 records: 3 bad, 1 empty, 9 good
assert (o["split"], o["documents"]) == ("train", 9), o
EOF
# Empty documents without --skip-bad: skipped and counted, exit 0.
"$OLMO" prepare "$T/in/empty.jsonl" -o "$T/empty" 2> "$T/empty.log" || fail "empty documents must not fail"
grep -q "skipped 1 empty" "$T/empty.log" || { cat "$T/empty.log"; fail "empty documents not reported"; }
echo "test_prepare_bad: ok"
