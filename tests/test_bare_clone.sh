#!/usr/bin/env bash
# test_bare_clone.sh: the repository is self-contained (issue 15). A user clones it alone,
# with no sibling folders: every default must resolve inside the clone.
#  1. no file of src/, scripts/, configs/, tests/, fuzz/ or the Makefile names a path
#     in a sibling "shared" folder;
#  2. the shipped tokenizers/dolma2-tokenizer.json is the documented file (NOTICE's sha256);
#  3. a copy of the checkout's files (git's tracked + untracked-not-ignored, i.e. what a
#     clone or a commit of this tree holds) in a fresh temp folder with nothing beside it,
#     with the built binary: `olmo tokenize` (from the clone root, and from / through the
#     binary's own location) gives cl100k/dolma2 ids, and a short `olmo prepare` writes
#     token files whose manifest names the shipped tokenizer's fingerprint;
#  4. a binary outside any repository, without the tokenizer, fails with exit 2 and a
#     message that says where the tokenizer is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OLMO=${OLMO_BIN:-$ROOT/build/olmo}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset OLMO_TOKENIZER

# 1. nothing reads a sibling folder (pattern split so this file does not match itself)
sib='\.\./'"shared"
if grep -rnE "$sib" src scripts configs tests fuzz Makefile .ci 2>/dev/null; then
  fail "the files above read outside the repository"
fi

# 2. the shipped tokenizer is the one NOTICE describes
TOK=tokenizers/dolma2-tokenizer.json
[ -f "$TOK" ] && [ -f tokenizers/NOTICE ] && [ -f tokenizers/LICENSE-Apache-2.0 ] ||
  fail "tokenizers/ must hold dolma2-tokenizer.json, NOTICE and LICENSE-Apache-2.0"
sum=$(sha256sum "$TOK" | cut -d' ' -f1)
grep -q "sha256   $sum" tokenizers/NOTICE || fail "tokenizers/NOTICE does not state the sha256 of $TOK ($sum)"

# 3. a bare copy with nothing beside it
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "not a git checkout: cannot list the clone's files"
B=$tmp/alone/olmo
mkdir -p "$B/build"
git ls-files -z -co --exclude-standard | (cd "$ROOT" && xargs -0 cp --parents -t "$B" 2>/dev/null || true)
for f in Makefile README.md scripts/main.sh scripts/test.sh "$TOK"; do
  [ -f "$B/$f" ] || fail "bare copy lacks $f"
done
[ "$(ls -A "$tmp/alone")" = olmo ] || fail "the bare copy has something beside it"
cp "$OLMO" "$B/build/olmo"

# "Hello world" is [9906, 1917] in cl100k_base (= dolma2 below id 100256); EOS by id.
want="9906 1917 100257"
got=$(cd "$B" && printf 'Hello world<|endoftext|>' | build/olmo tokenize --allow-special | tr -s ' \n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || fail "tokenize in the bare clone: got '$got', want '$want'"
got=$(cd / && printf 'Hello world<|endoftext|>' | "$B/build/olmo" tokenize --allow-special | tr -s ' \n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || fail "tokenize from / (binary-relative default): got '$got', want '$want'"

mkdir -p "$tmp/in"
for i in 1 2 3 4 5 6 7 8; do
  printf '{"text": "Document %d of the bare-clone test. It has a few sentences, numbers 12345 and caf\\u00e9."}\n' "$i"
done > "$tmp/in/docs.jsonl"
(cd "$B" && build/olmo prepare "$tmp/in/docs.jsonl" -o "$tmp/prep" --heldout-frac 0.25 --threads 1 >"$tmp/prep.log" 2>&1) ||
  fail "prepare in the bare clone: $(tail -5 "$tmp/prep.log")"
[ -s "$tmp/prep/docs.npy" ] || fail "prepare wrote no docs.npy"
grep -Eq "\"fingerprint\":[[:space:]]*\"$sum\"" "$tmp/prep/manifest.json" || fail "manifest does not name the shipped tokenizer"
ntok=$(( $(stat -c %s "$tmp/prep/docs.npy") + $(stat -c %s "$tmp/prep/docs.heldout.npy" 2>/dev/null || echo 0) ))
[ $((ntok % 4)) = 0 ] && [ $ntok -gt $((8 * 4 * 10)) ] || fail "token files hold $ntok bytes"

# 4. a lone binary: clear error, exit 2
mkdir -p "$tmp/lone/bin"
cp "$OLMO" "$tmp/lone/bin/olmo"
set +e
(cd "$tmp/lone" && printf 'hi' | bin/olmo tokenize >/dev/null 2>"$tmp/lone.err"); rc=$?
set -e
[ $rc = 2 ] || fail "lone binary: exit $rc, want 2"
grep -q "tokenizers/dolma2-tokenizer.json" "$tmp/lone.err" && grep -q "OLMO_TOKENIZER" "$tmp/lone.err" ||
  fail "lone binary message: $(cat "$tmp/lone.err")"
echo "bare clone: tokenize and prepare work with nothing beside the clone"
