#!/usr/bin/env bash
# test_heldout_on.sh: held-out evaluation is on unless turned off on purpose (issue 37).
#  1. a recipe without eval.sets is refused by `olmo train`: exit 2, the message names
#     eval.sets and eval.off, nothing written (no run directory);
#  2. eval.off=true trains, and the banner says there is no held-out evaluation;
#  3. the banner warns of a warmup longer than the run (the LR it reaches), of held-out
#     documents cut by train.seq_len (how many, what share of tokens is scored) and of
#     checkpoints that fall between evaluations; a recipe with none of these has no warning;
#  4. the OLMo 3 7B recipes name OLMo-core's v3-small-ppl-validation sets under eval.base_dir
#     with {TOKENIZER}: stage 1 with fake small files at those paths (and a tiny model over it)
#     parses, is not refused, and evaluates all 11 sets; without the files the error names the
#     resolved path; without eval.downstream_dir (its 26 downstream labels) exit 2 naming the
#     key, nothing written.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/lib.sh
export OMP_NUM_THREADS=1

/usr/bin/python3 - "$T" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
random.seed(5)
def w(path, ids):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(struct.pack(f"<{len(ids)}I", *ids))
w(f"{d}/tok.npy", [random.randrange(999) for _ in range(4000)])
# held-out set: 3 documents of 10, 100 and 20 tokens + EOS (999); at seq_len 32 one is cut
w(f"{d}/held.npy", [random.randrange(999) for _ in range(10)] + [999] + [random.randrange(999) for _ in range(100)]
  + [999] + [random.randrange(999) for _ in range(20)] + [999])
# OLMo-core's v3-small-ppl-validation layout, dolma2-tokenizer (src/olmo_core/data/mixes/v3-small-ppl-validation.txt)
for s in ["c4_en", "dolma_books", "dolma_common-crawl", "dolma_pes2o", "dolma_reddit", "dolma_stack", "dolma_wiki",
          "ice", "m2d2_s2orc", "pile", "wikitext_103"]:
    w(f"{d}/ai2-llm/eval-data/perplexity/v3_small_dolma2-tokenizer/{s}/val/part-0-00000.npy",
      [random.randrange(999) for _ in range(12)] + [999])
PY
cat >"$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 2, micro_batch: 2, max_steps: 2}
schedule: {warmup_steps: 1}
data: {paths: [$T/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
YML

# 1. refused: exit 2, both keys named, nothing written
rc=0; "$OLMO" train "$T/r.yml" train.run_dir="$T/none" >"$T/1.out" 2>"$T/1.err" || rc=$?
[ $rc = 2 ] || fail "no eval.sets: exit $rc (want 2): $(cat "$T/1.err")"
grep -q "$T/r.yml: no held-out evaluation" "$T/1.err" && grep -q "eval.sets" "$T/1.err" && grep -q "eval.off: true" "$T/1.err" \
  || fail "refusal message: $(cat "$T/1.err")"
[ ! -e "$T/none" ] && [ ! -s "$T/1.out" ] || fail "the refused run wrote something"
echo "ok 1: refused: $(head -c 160 "$T/1.err")..."

# 2. eval.off=true: trains, and says so
"$OLMO" train "$T/r.yml" train.run_dir="$T/off" eval.off=true >"$T/2.out" 2>&1 || fail "eval.off=true: $(tail -3 "$T/2.out")"
grep -q "^warning: eval.off: true: no held-out evaluation" "$T/2.out" || fail "eval.off banner: $(head -8 "$T/2.out")"
grep -q '"kind": *"eval"' "$T/off/metrics.jsonl" && fail "eval.off=true evaluated"
# eval.off=true with sets: the sets are not run in the loop either
"$OLMO" train "$T/r.yml" train.run_dir="$T/off2" eval.off=true eval.sets="h=$T/held.npy" eval.eos_id=999 >"$T/2b.out" 2>&1 \
  || fail "eval.off=true with sets: $(tail -3 "$T/2b.out")"
grep -q '"eval/h/ce"' "$T/off2/metrics.jsonl" && fail "eval.off=true with sets evaluated"
echo "ok 2: eval.off=true trains without held-out evaluation"

# 3. warnings: none on a clean recipe; each one when it applies
E=(eval.sets="h=$T/held.npy" eval.eos_id=999)
"$OLMO" train "$T/r.yml" train.run_dir="$T/clean" "${E[@]}" train.seq_len=128 >"$T/3a.out" 2>&1 || fail "clean: $(tail -3 "$T/3a.out")"
grep -q "^warning" "$T/3a.out" && fail "a clean recipe got a warning: $(grep '^warning' "$T/3a.out")"
"$OLMO" train "$T/r.yml" train.run_dir="$T/warn" "${E[@]}" schedule.warmup_steps=2000 ckpt.interval=1 eval.interval=0 \
  >"$T/3b.out" 2>&1 || fail "warned run: $(tail -3 "$T/3b.out")"
grep -q "^warning: schedule.warmup_steps 2000 >= the run's 2 steps: the LR never leaves its warmup (step 1: 1.5e-07, last step: 3e-07, optim.lr 0.0003)" "$T/3b.out" \
  || fail "warmup warning: $(grep '^warning' "$T/3b.out")"
grep -q "^warning: eval set h: 1 of 3 documents are longer than train.seq_len + 1 = 33 tokens and are cut to their first 33 (.*% of the set's tokens are scored)" "$T/3b.out" \
  || fail "cut warning: $(grep '^warning' "$T/3b.out")"
grep -q "^warning: eval.interval 0 (only at start and end) is longer than ckpt.interval 1: checkpoints between evaluations have no held-out loss" "$T/3b.out" \
  || fail "interval warning: $(grep '^warning' "$T/3b.out")"
grep '^warning' "$T/3b.out" | sed 's/^/   /'
echo "ok 3: banner warnings"

# 4. the 7B recipe's eval section: paths resolve under eval.base_dir with {TOKENIZER}
grep -c "v3_small_{TOKENIZER}" configs/olmo3-7b-stage1.yml configs/olmo3-7b-stage2.yml configs/olmo3-7b-stage3.yml \
  | grep -v ":11$" && fail "a 7B recipe does not list the 11 v3-small-ppl-validation sets"
TINY=(train.backend=cpu model.preset=olmo3-tiny train.seq_len=32 train.global_batch=2 train.micro_batch=2 train.max_steps=1
      train.precision=fp32 data.mix= data.sources="$T/tok.npy" eval.eos_id=999 perf.peak_flops=1e11 ckpt.interval=0)
rc=0; "$OLMO" train configs/olmo3-7b-stage1.yml "${TINY[@]}" train.run_dir="$T/7b-nofiles" >"$T/4a.out" 2>"$T/4a.err" || rc=$?
[ $rc = 2 ] && grep -q "cannot read /data/ai2-llm/eval-data/perplexity/v3_small_dolma2-tokenizer/c4_en/val/part-0-00000.npy" "$T/4a.err" \
  || fail "7B recipe without the files: exit $rc: $(cat "$T/4a.err")"
[ ! -e "$T/7b-nofiles" ] || fail "7B recipe without the files wrote its run directory"
# its downstream suite (eval.downstream, 26 labels) needs eval.downstream_dir, left to the user:
# without it, exit 2 naming the key, nothing written; eval.downstream= drops the suite
rc=0; "$OLMO" train configs/olmo3-7b-stage1.yml "${TINY[@]}" eval.base_dir="$T/ai2-llm" train.run_dir="$T/7b-nods" \
  >"$T/4c.out" 2>"$T/4c.err" || rc=$?
[ $rc = 2 ] && grep -q "eval.downstream: arc_challenge_test_bpb_5shot: set eval.downstream_dir" "$T/4c.err" \
  || fail "7B recipe without eval.downstream_dir: exit $rc: $(cat "$T/4c.err")"
[ ! -e "$T/7b-nods" ] || fail "7B recipe without eval.downstream_dir wrote its run directory"
"$OLMO" train configs/olmo3-7b-stage1.yml "${TINY[@]}" eval.base_dir="$T/ai2-llm" eval.downstream= train.run_dir="$T/7b" \
  >"$T/4b.out" 2>&1 || fail "7B recipe with the files: $(tail -5 "$T/4b.out")"
/usr/bin/python3 - "$T/7b/metrics.jsonl" <<'PY'
import json, sys
ev = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "eval"]
sets = sorted({k.split("/")[1] for r in ev for k in r if k.startswith("eval/") and k.endswith("/ce") and "macro" not in k})
assert len(sets) == 11 and "c4_en-validation" in sets and "wikitext_103-validation" in sets, sets
print("ok 4: the 7B stage-1 recipe evaluates", len(sets), "sets:", ", ".join(sets[:3]), "...")
PY
echo "test_heldout_on: ok"
