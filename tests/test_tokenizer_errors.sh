#!/usr/bin/env bash
# test_tokenizer_errors.sh: a bad tokenizer.json or bad input to `olmo tokenize` must
# exit with status 2 and a message naming the file and the field (or the byte offset).
# Also: --help, --tokenizer and OLMO_TOKENIZER select the file.
set -u
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
REAL=${OLMO_TOKENIZER:-tokenizers/dolma2-tokenizer.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect_fail NAME PATTERN CMD...: CMD must exit 2 and print PATTERN (grep -E) on stderr.
expect_fail() {
  local name=$1 pat=$2; shift 2
  local err status
  err=$("$@" 2>&1 >/dev/null </dev/null); status=$?
  if [ "$status" -ne 2 ] || ! grep -qE -- "$pat" <<<"$err"; then
    echo "FAIL: $name: status $status, stderr: $err"; fails=$((fails+1))
  else
    echo "ok: $name: $err"
  fi
}

# Mutated copies of the real file (node: JSON edits without extra dependencies).
mutate() {  # mutate OUT JS-EXPR-ON-d
  node -e "const fs=require('fs');const d=JSON.parse(fs.readFileSync(process.argv[1],'utf8'));$2;fs.writeFileSync(process.argv[2],JSON.stringify(d))" "$REAL" "$1"
}
head -c 1000000 "$REAL" > "$tmp/truncated.json"
mutate "$tmp/novocab.json" "delete d.model.vocab"
mutate "$tmp/nomerges.json" "delete d.model.merges"
mutate "$tmp/wordpiece.json" "d.model.type='WordPiece'"
mutate "$tmp/noregex.json" "d.pre_tokenizer={type:'ByteLevel'}"
mutate "$tmp/badregex.json" "d.pre_tokenizer.pretokenizers[0].pattern.Regex='(unclosed'"
mutate "$tmp/badmerge.json" "d.model.merges[5]='zzzq qqqz'"
mutate "$tmp/nobyte.json" "delete d.model.vocab['!']"
echo '[1, 2, 3]' > "$tmp/array.json"

expect_fail "missing file" "nonexistent\.json" "$OLMO" tokenize --tokenizer "$tmp/nonexistent.json"
expect_fail "truncated JSON" "truncated\.json.*(JSON|truncated)" "$OLMO" tokenize --tokenizer "$tmp/truncated.json"
expect_fail "not an object" "array\.json.*'model'" "$OLMO" tokenize --tokenizer "$tmp/array.json"
expect_fail "missing model.vocab" "novocab\.json.*model\.vocab" "$OLMO" tokenize --tokenizer "$tmp/novocab.json"
expect_fail "missing model.merges" "nomerges\.json.*model\.merges" "$OLMO" tokenize --tokenizer "$tmp/nomerges.json"
expect_fail "wrong model type" "wordpiece\.json.*model\.type.*WordPiece" "$OLMO" tokenize --tokenizer "$tmp/wordpiece.json"
expect_fail "no Split regex" "noregex\.json.*pre_tokenizer" "$OLMO" tokenize --tokenizer "$tmp/noregex.json"
expect_fail "regex does not compile" "badregex\.json.*regex" "$OLMO" tokenize --tokenizer "$tmp/badregex.json"
expect_fail "merge result not in vocab" "badmerge\.json.*model\.merges.*entry 5" "$OLMO" tokenize --tokenizer "$tmp/badmerge.json"
expect_fail "missing byte token" "nobyte\.json.*model\.vocab.*0x21" "$OLMO" tokenize --tokenizer "$tmp/nobyte.json"
expect_fail "OLMO_TOKENIZER is used" "from-env\.json" env OLMO_TOKENIZER="$tmp/from-env.json" "$OLMO" tokenize
expect_fail "unknown argument" "unknown argument" "$OLMO" tokenize --bogus
expect_fail "decode: not a number" "'12x' at byte offset 2" bash -c "printf '1 12x 3' | '$OLMO' tokenize --decode"
expect_fail "invalid UTF-8 offset (--lines)" "byte offset 9\b" bash -c "printf 'abc\ndef\nx\xff' | '$OLMO' tokenize --lines"

if ! "$OLMO" tokenize --help | grep -q -- "--decode"; then echo "FAIL: --help"; fails=$((fails+1)); else echo "ok: --help"; fi
# The loader reads the regex from the file: a changed regex changes the tokens.
mutate "$tmp/digits4.json" "const p=d.pre_tokenizer.pretokenizers[0].pattern; p.Regex=p.Regex.replace('{1,3}','{1,4}')"
a=$(printf '1234' | "$OLMO" tokenize --tokenizer "$REAL")
b=$(printf '1234' | OLMO_TOKENIZER="$tmp/digits4.json" "$OLMO" tokenize)
if [ "$a" = "$b" ]; then echo "FAIL: regex from file not used ($a vs $b)"; fails=$((fails+1)); else echo "ok: regex read from file ($a vs $b)"; fi
# Empty input: one empty line; its decode is empty.
out=$(printf '' | "$OLMO" tokenize --tokenizer "$REAL" | "$OLMO" tokenize --decode --tokenizer "$REAL" | wc -c)
if [ "$out" != 0 ]; then echo "FAIL: empty round trip gave $out bytes"; fails=$((fails+1)); else echo "ok: empty input"; fi

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all tokenizer error checks passed"
