#!/usr/bin/env bash
# test_prepare.sh: `olmo prepare` on good inputs: every output token file is the
# `olmo tokenize` ids of its documents, each followed by EOS, in input order; 1 and 2
# threads give identical bytes; the held-out split depends only on the documents (not on
# input order or threads) and has about the requested size; the manifest's counts and
# sha256 are right; .gz/.zst inputs match plain ones; a rerun skips, --force redoes;
# `olmo data verify` passes the outputs (manifest or recipe), names a changed file (exit 2),
# and shows a progress bar with GB/s on large data.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
PY=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$T/in"
cp tests/data/prep_docs.jsonl "$T/in/docs.jsonl"
cp tests/data/prep_note.txt "$T/in/note.txt"
gzip -c tests/data/prep_docs.jsonl > "$T/in/gzdocs.jsonl.gz"
have_zstd=0
if command -v zstd >/dev/null; then
  zstd -q -c tests/data/prep_docs.jsonl > "$T/in/zdocs.jsonl.zst"; have_zstd=1
else
  echo "note: zstd CLI missing, .zst input not tested"
fi
# Many small documents: the held-out fraction is checked on these.
"$PY" - "$T/in/many.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(3000):
        f.write(json.dumps({"id": i, "text": f"document number {i}: " + "word " * (i % 7)}) + "\n")
EOF

# 1. One run per thread count: identical bytes, manifest included (up to input mtimes).
"$OLMO" prepare "$T/in" -o "$T/o1" --threads 1 --heldout-frac 0.3 --heldout-seed 7 2> "$T/log1" || { cat "$T/log1"; fail "prepare (1 thread)"; }
"$OLMO" prepare "$T/in" -o "$T/o2" --threads 2 --heldout-frac 0.3 --heldout-seed 7 2> "$T/log2" || { cat "$T/log2"; fail "prepare (2 threads)"; }
n=0
for f in "$T"/o1/*.npy; do
  cmp -s "$f" "$T/o2/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 2 threads"
  n=$((n+1))
done
[ "$(ls "$T"/o2/*.npy | wc -l)" = "$n" ] || fail "different file sets at 1 and 2 threads"
cmp -s "$T/o1/manifest.json" "$T/o2/manifest.json" || fail "manifest differs between 1 and 2 threads"
ls "$T"/o1 | grep -q tmp && fail "temp files left behind"
grep -q "skipped 1 empty" "$T/log1" || fail "empty document not reported as skipped"

# Batches of 7 documents (crossing batch boundaries) give the same bytes.
OLMO_PREPARE_BATCH_DOCS=7 "$OLMO" prepare "$T/in" -o "$T/o7" --threads 2 --heldout-frac 0.3 --heldout-seed 7 2>/dev/null || fail "prepare (batches of 7)"
for f in "$T"/o1/*.npy; do cmp -s "$f" "$T/o7/$(basename "$f")" || fail "$(basename "$f") differs with batches of 7"; done

# 2. gz / zst inputs give the same bytes as the plain file.
for s in gzdocs $([ $have_zstd = 1 ] && echo zdocs); do
  cmp -s "$T/o1/docs.npy" "$T/o1/$s.npy" || fail "$s.npy differs from docs.npy"
  cmp -s "$T/o1/docs.heldout.npy" "$T/o1/$s.heldout.npy" || fail "$s.heldout.npy differs"
done

# 3. Contents vs `olmo tokenize`, manifest counts and sha256, held-out fraction.
"$PY" - "$OLMO" "$T" <<'EOF' || fail "content/manifest check"
import json, os, struct, subprocess, sys, hashlib
olmo, T = sys.argv[1], sys.argv[2]
EOS = 100257
m = json.load(open(f"{T}/o1/manifest.json"))
assert m["tokenizer"]["eos_id"] == EOS and len(m["tokenizer"]["fingerprint"]) == 64
outs = {(o["source"], o["split"]): o for o in m["outputs"]}

def ids_of(path):
    b = open(path, "rb").read()
    assert len(b) % 4 == 0
    return list(struct.unpack(f"<{len(b)//4}I", b))

def docs_of(ids):
    docs, cur = [], []
    for t in ids:
        cur.append(t)
        if t == EOS: docs.append(cur); cur = []
    assert not cur, "file does not end with EOS"
    return docs

def tokenize(text):
    r = subprocess.run([olmo, "tokenize"], input=text.encode(), capture_output=True, check=True)
    return [int(x) for x in r.stdout.split()]

# Every output: sha256, token and document counts as recorded, and the exact size.
for (src, split), o in outs.items():
    p = os.path.join(T, "o1", o["path"])
    b = open(p, "rb").read()
    assert hashlib.sha256(b).hexdigest() == o["sha256"], (src, split, "sha256")
    sh = subprocess.run(["sha256sum", p], capture_output=True, text=True, check=True).stdout.split()[0]
    assert sh == o["sha256"], (src, split, "sha256sum")
    ids = ids_of(p)
    assert len(ids) == o["tokens"], (src, split, "tokens")
    assert len(docs_of(ids)) == o["documents"] and ids.count(EOS) == o["documents"], (src, split, "documents")

# docs: train and heldout interleave back into the input order, each doc = tokenize + EOS.
texts = [json.loads(l)["text"] for l in open(f"{T}/in/docs.jsonl") if l.strip()]
texts = [t for t in texts if t]   # the empty document is skipped
train = docs_of(ids_of(f"{T}/o1/docs.npy")) if ("docs", "train") in outs else []
held = docs_of(ids_of(f"{T}/o1/docs.heldout.npy")) if ("docs", "heldout") in outs else []
assert len(train) + len(held) == len(texts), "document count"
ti = hi = 0
bytes_ = {"train": 0, "heldout": 0}
for t in texts:
    want = tokenize(t) + [EOS]
    if ti < len(train) and train[ti] == want: ti += 1; bytes_["train"] += len(t.encode())
    elif hi < len(held) and held[hi] == want: hi += 1; bytes_["heldout"] += len(t.encode())
    else: raise AssertionError(f"document {t[:30]!r} not next in either split")
for split in ("train", "heldout"):
    if ("docs", split) in outs: assert outs[("docs", split)]["utf8_bytes"] == bytes_[split], split
assert len(held) > 0 and len(train) > 0, "expected both splits non-empty at frac 0.3 (fixed hash)"

# Plain text file: one document, the whole file.
note = open(f"{T}/in/note.txt").read()
note_ids = ids_of(f"{T}/o1/note.npy") if ("note", "train") in outs else ids_of(f"{T}/o1/note.heldout.npy")
assert note_ids == tokenize(note) + [EOS], "note.txt"

# Held-out fraction on 3000 documents at 0.3.
h = outs[("many", "heldout")]["documents"]; n = h + outs[("many", "train")]["documents"]
assert n == 3000 and 0.25 < h / n < 0.35, (h, n)
print("content ok: docs", len(texts), "heldout", len(held), "many heldout", h)
EOF

# 4. Held-out stability: reversed input order gives the same held-out documents, and
#    `olmo prepare --list` (the manifest reader API) shows the same counts.
mkdir -p "$T/rev"
tac "$T/in/many.jsonl" > "$T/rev/many.jsonl"
"$OLMO" prepare "$T/rev/many.jsonl" -o "$T/o3" --heldout-frac 0.3 --heldout-seed 7 --threads 2 2>/dev/null || fail "prepare reversed"
"$PY" - "$T" <<'EOF' || fail "held-out stability"
import struct, sys
T = sys.argv[1]
def docs(p):
    b = open(p, "rb").read(); ids = struct.unpack(f"<{len(b)//4}I", b); out, cur = [], []
    for t in ids:
        cur.append(t)
        if t == 100257: out.append(tuple(cur)); cur = []
    return out
a, b = docs(f"{T}/o1/many.heldout.npy"), docs(f"{T}/o3/many.heldout.npy")
assert a == b[::-1], "held-out set or order changed with input order"
EOF
"$OLMO" prepare --list "$T/o1" > "$T/list" || fail "prepare --list"
grep -qE '^many +heldout +[0-9]+ ' "$T/list" || { cat "$T/list"; fail "--list output"; }

# 5. Rerun: everything up to date, files untouched; --force redoes; a touched input is redone.
before=$(stat -c %Y.%i "$T"/o1/*.npy | md5sum)
"$OLMO" prepare "$T/in" -o "$T/o1" --threads 2 --heldout-frac 0.3 --heldout-seed 7 2> "$T/log3" || fail "rerun"
[ "$(grep -c 'up to date, skipped' "$T/log3")" = "$(ls "$T/in" | wc -l)" ] || { cat "$T/log3"; fail "rerun did not skip every source"; }
[ "$(stat -c %Y.%i "$T"/o1/*.npy | md5sum)" = "$before" ] || fail "rerun rewrote outputs"
"$OLMO" prepare "$T/in" -o "$T/o1" --threads 2 --heldout-frac 0.3 --heldout-seed 7 --force 2> "$T/log4" || fail "--force"
grep -q 'up to date, skipped' "$T/log4" && fail "--force skipped a source"
touch -d '2001-01-01' "$T/in/note.txt"
"$OLMO" prepare "$T/in" -o "$T/o1" --threads 2 --heldout-frac 0.3 --heldout-seed 7 2> "$T/log5" || fail "rerun after touch"
grep -q 'note: up to date' "$T/log5" && fail "changed input was skipped"
grep -q 'docs: up to date' "$T/log5" || fail "unchanged input was redone"
"$OLMO" prepare "$T/in" -o "$T/o1" --threads 2 --heldout-frac 0.2 --heldout-seed 7 2> "$T/log6" || fail "rerun other frac"
grep -q 'up to date, skipped' "$T/log6" && fail "changed options did not redo"
# 6. olmo data verify: the manifest's files, a recipe's files, one flipped bit, large data.
"$OLMO" data verify "$T/o2" > "$T/dv" || { cat "$T/dv"; fail "data verify of a fresh prepare"; }
[ "$(grep -c '^ok ' "$T/dv")" = "$(ls "$T"/o2/*.npy | wc -l)" ] || fail "data verify: one ok line per file: $(cat "$T/dv")"
tr0=$(ls "$T"/o2/*.npy | grep -v heldout | head -1)
"$PY" -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<64I', *range(64)))" "$T/loose.npy"
cat > "$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 8, global_batch: 2, micro_batch: 1, max_steps: 1}
data: {paths: [$tr0, $T/loose.npy]}
YML
"$OLMO" data verify "$T/r.yml" > "$T/dv" || { cat "$T/dv"; fail "data verify RECIPE"; }
grep -q "^ok  $tr0 " "$T/dv" && grep -q "^UNLISTED $T/loose.npy" "$T/dv" || fail "data verify RECIPE lines: $(cat "$T/dv")"
"$PY" -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//3]^=4; open(p,'wb').write(b)" "$tr0"
set +e; "$OLMO" data verify "$T/r.yml" > "$T/dv" 2> "$T/dv.err"; rc=$?; set -e
[ $rc = 2 ] || fail "data verify of a flipped file: exit $rc, want 2"
grep -q "^BAD $tr0: sha256 .*, its manifest records" "$T/dv" || fail "data verify: flipped file not named: $(cat "$T/dv")"
# 300 MB (sparse): the progress bar and GB/s
mkdir -p "$T/big"
truncate -s 300M "$T/big/big.npy"
"$PY" - "$T/o2/manifest.json" "$T/big" <<'EOF'
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
h = hashlib.sha256()
with open(sys.argv[2] + "/big.npy", "rb") as f:
    for b in iter(lambda: f.read(1 << 24), b""): h.update(b)
o = dict(m["outputs"][0], path="big.npy", sha256=h.hexdigest())
m["outputs"] = [o]
json.dump(m, open(sys.argv[2] + "/manifest.json", "w"))
EOF
"$OLMO" data verify "$T/big/manifest.json" > "$T/dv" 2> "$T/dv.err" || fail "data verify big: $(cat "$T/dv" "$T/dv.err")"
grep -q "100.0%  0.31 / 0.31 GB  .* GB/s" "$T/dv.err" || fail "data verify: no progress bar: $(cat "$T/dv.err")"
echo "ok: data verify (manifest, recipe, a flipped bit named, progress bar on 300 MB)"
echo "test_prepare: ok"
