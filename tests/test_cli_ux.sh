#!/usr/bin/env bash
# test_cli_ux.sh: the first hour of a new user (issue 37, item 4):
#  1. `olmo --version`; an unknown command gets "did you mean" (olmo trian -> train);
#  2. a tab in a recipe's indentation is named as such (not libyaml's raw message);
#  3. a token file given where a checkpoint is expected: "looks like a token file";
#  4. `olmo prepare` on Dolma's layout (a/part-0000.json.gz, b/part-0000.json.gz): refused by
#     default with a message naming --source-from, named by --source-from path or dir;
#  5. `olmo eval RUN --attach` appends its record (with the step) to RUN/evals.jsonl and
#     `olmo report` shows it; --attach outside a run is refused with nothing written;
#  6. `olmo eval HF_DIR --set ...` runs without a recipe (the HF directory's own shape);
#  7. `olmo compare` on an LR ablation prints the recipe diff and which run is better on each
#     held-out set, by how much.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/lib.sh
export OMP_NUM_THREADS=1
# refuse NAME PATTERN CMD...: exit 2 and stderr matching PATTERN (grep -E)
refuse() {
  local name=$1 pat=$2; shift 2
  local rc=0; "$@" >"$T/r.out" 2>"$T/r.err" || rc=$?
  [ $rc = 2 ] && grep -Eq -- "$pat" "$T/r.err" || fail "$name: exit $rc (want 2): $(cat "$T/r.err")"
  echo "ok $name: $(head -c 200 "$T/r.err")"
}

# 1. --version, did you mean
"$OLMO" --version | grep -Eq '^olmo\.c [^ ]+ \(' || fail "--version: $("$OLMO" --version 2>&1)"
echo "ok version: $("$OLMO" --version)"
refuse did-you-mean "unknown command 'trian' \(did you mean 'train'\?\)" "$OLMO" trian
refuse unknown-command "unknown command 'frobnicate'" "$OLMO" frobnicate

# 2. a tab in the indentation
printf 'model:\n  preset: olmo3-tiny\ntrain:\n  seq_len: 8\n\tmax_steps: 1\n' >"$T/tab.yml"
refuse yaml-tab "tab.yml:5:1: a tab character in the indentation: YAML indents with spaces only" "$OLMO" train "$T/tab.yml"

/usr/bin/python3 - "$T" <<'PY'
import random, struct, sys
d = sys.argv[1]
random.seed(9)
def w(name, ids): open(f"{d}/{name}", "wb").write(struct.pack(f"<{len(ids)}I", *ids))
w("tok.npy", [random.randrange(999) for _ in range(6000)])
held = []
for n in (12, 20, 9, 15): held += [random.randrange(999) for _ in range(n)] + [999]
w("held.npy", held)
other = []
for n in (10, 14): other += [random.randrange(500) for _ in range(n)] + [999]
w("other.npy", other)
PY

# 3. a token file where a checkpoint is expected
refuse token-as-ckpt "tok.npy is not a checkpoint: .*it looks like a token file \(raw uint32, 6000 tokens" \
  "$OLMO" eval "$T/tok.npy" --set "h=$T/held.npy"
printf 'model: {preset: olmo3-tiny}\ntrain: {seq_len: 32}\neval: {eos_id: 999}\n' >"$T/ev.yml"
refuse token-as-ckpt-recipe "looks like a token file" "$OLMO" eval "$T/tok.npy" --recipe "$T/ev.yml" --set "h=$T/held.npy"

# 4. Dolma's layout: two sources called part-0000
mkdir -p "$T/dolma/cc/a" "$T/dolma/cc/b"
printf '{"text": "alpha one"}\n{"text": "alpha two"}\n' | gzip -c >"$T/dolma/cc/a/part-0000.json.gz"
printf '{"text": "beta one"}\n{"text": "beta two"}\n' | gzip -c >"$T/dolma/cc/b/part-0000.json.gz"
refuse prepare-collision "both map to source 'part-0000'.*--source-from path" "$OLMO" prepare "$T/dolma/cc" -o "$T/p0"
[ ! -e "$T/p0" ] || fail "the refused prepare wrote its output directory"
"$OLMO" prepare "$T/dolma/cc" -o "$T/p1" --source-from path --threads 1 2>"$T/p1.err" || fail "--source-from path: $(cat "$T/p1.err")"
[ -f "$T/p1/a_part-0000.npy" ] || [ -f "$T/p1/a_part-0000.heldout.npy" ] || fail "--source-from path: $(ls "$T/p1")"
"$OLMO" prepare --list "$T/p1" | grep -q "^b_part-0000 " || fail "--source-from path: manifest"
"$OLMO" prepare "$T/dolma/cc" -o "$T/p2" --source-from dir --threads 1 2>/dev/null || fail "--source-from dir"
"$OLMO" prepare --list "$T/p2" | awk 'NR > 2 {print $1}' | sort -u | tr '\n' ' ' | grep -qx "a b " || fail "--source-from dir: $("$OLMO" prepare --list "$T/p2")"
refuse source-from-bad "--source-from: 'folder' is not stem, dir or path" "$OLMO" prepare "$T/dolma/cc" -o "$T/p3" --source-from folder
echo "ok prepare --source-from path / dir"

# 5. olmo eval RUN --attach, shown by olmo report
cat >"$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 4, micro_batch: 2, max_steps: 4}
optim: {lr: 0.003}
schedule: {warmup_steps: 1}
data: {paths: [$T/tok.npy]}
eval: {sets: ["held=$T/held.npy"], eos_id: 999, interval: 2}
perf: {peak_flops: 1e11}
ckpt: {interval: 2}
YML
"$OLMO" train "$T/r.yml" train.run_dir="$T/A" >"$T/A.log" 2>&1 || fail "train A: $(tail -3 "$T/A.log")"
"$OLMO" train "$T/r.yml" train.run_dir="$T/B" optim.lr=0.001 >"$T/B.log" 2>&1 || fail "train B: $(tail -3 "$T/B.log")"
"$OLMO" eval "$T/A" --attach --set "other=$T/other.npy" >"$T/att.out" 2>"$T/att.err" || fail "--attach: $(cat "$T/att.err")"
grep -q "eval: attached to $T/A/evals.jsonl (step 4)" "$T/att.err" || fail "--attach message: $(cat "$T/att.err")"
"$OLMO" eval "$T/A/checkpoints/step-00000002" --attach >/dev/null 2>"$T/att2.err" || fail "--attach a checkpoint: $(cat "$T/att2.err")"
/usr/bin/python3 - "$T/A/evals.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in recs] == [4, 2], [r["step"] for r in recs]
assert all(r["source"] == "olmo eval --attach" and r["kind"] == "eval" for r in recs)
assert "eval/other/ce" in recs[0] and "eval/held/ce" in recs[0] and "eval/held/ce" in recs[1], recs
print("ok attach: records at steps 4 and 2, other CE %.4f" % recs[0]["eval/other/ce"])
PY
cp "$T/A/model.safetensors" "$T/lone.safetensors"
refuse attach-lone "--attach: $T/lone.safetensors is not in a run directory" "$OLMO" eval "$T/lone.safetensors" --attach --recipe "$T/r.yml"
[ ! -e "$T/evals.jsonl" ] || fail "a refused --attach wrote evals.jsonl"
"$OLMO" report "$T/A" -o "$T/A.html" >/dev/null || fail "report"
/usr/bin/python3 - "$T/A.html" "$T/A/evals.jsonl" <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
rec = json.loads(open(sys.argv[2]).readline())
m = re.search(r'<table class="attached">(.*?)</table>', html, re.S)
assert m, "no attached-evaluations table"
assert "eval/other/ce" in m.group(1) and ("%.4f" % rec["eval/other/ce"]) in m.group(1), m.group(1)[:400]
print("ok report shows the attached records")
PY

# 6. an HF directory without a recipe
"$OLMO" export-hf "$T/A" "$T/hf" 2>/dev/null || fail "export-hf"
"$OLMO" eval "$T/hf" --set "held=$T/held.npy" eval.eos_id=999 train.micro_batch=2 --json >"$T/hf.json" 2>"$T/hf.err" || fail "eval HF without a recipe: $(cat "$T/hf.err")"
grep -q "no recipe.yml for $T/hf: its own shape" "$T/hf.err" || fail "HF eval note: $(cat "$T/hf.err")"
# the same numbers as with the run's recipe (same micro_batch; the documents are shorter than either seq_len)
"$OLMO" eval "$T/hf" --recipe "$T/r.yml" --json >"$T/hf2.json" 2>/dev/null || fail "eval HF with the recipe"
/usr/bin/python3 - "$T/hf.json" "$T/hf2.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["eval/held/ce"]
b = json.load(open(sys.argv[2]))["eval/held/ce"]
assert a == b, (a, b)
print(f"ok HF eval without a recipe: held CE {a:.6f}, as with the run's recipe")
PY

# 7. compare on an LR ablation: the recipe diff and who is better by how much
rc=0; "$OLMO" compare "$T/A" "$T/B" >"$T/cmp.out" 2>&1 || rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "compare: exit $rc: $(cat "$T/cmp.out")"
grep -A1 "^recipe diff (A -> B):" "$T/cmp.out" | grep -q "^  optim.lr: 0.003 -> 0.001" || fail "compare recipe diff: $(cat "$T/cmp.out")"
grep -Eq "^  eval/held/ce +[AB] is better by [0-9.]+ nats \(A [0-9.]+, B [0-9.]+\)" "$T/cmp.out" || fail "compare better: $(cat "$T/cmp.out")"
grep -E "^recipe diff|^  optim.lr|is better by" "$T/cmp.out" | sed 's/^/   /'
echo "test_cli_ux: ok"
