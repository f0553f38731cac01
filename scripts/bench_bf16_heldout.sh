#!/usr/bin/env bash
# bench_bf16_heldout.sh: what train.precision=bf16 (CPU: bf16 matmul operands, fp32
# accumulation) does to held-out loss, measured against seed-to-seed noise. Trains the
# default corpus's stage-1 recipe (configs/brown-stage1.yml, olmo3-20m, 640 steps of 4 x 256) three
# times: fp32 (train.seed 42), bf16 (seed 42) and fp32 with another init seed (43); prints
# the in-domain held-out and out-of-domain CE at every evaluation, the bf16 - fp32 gap next
# to the seed gap, and tokens/s of each run. Needs the prepared corpus (scripts/main.sh or
# scripts/prepare_default_corpus.sh). Usage: scripts/bench_bf16_heldout.sh [key=value ...]
# (overrides for all three runs, e.g. train.max_steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
[ -f data/brown/tokens/heldout_indomain.npy ] || { echo "bench_bf16_heldout: run scripts/prepare_default_corpus.sh first" >&2; exit 2; }
OUT=${OUT_DIR:-runs/bench-bf16}
mkdir -p "$OUT"
run() {  # NAME key=value...
  local name=$1; shift
  "$OLMO" train configs/brown-stage1.yml train.run_dir="$OUT/$name" train.resume=never ckpt.interval=0 "$@" \
    >"$OUT/$name.log" 2>&1 || { tail -20 "$OUT/$name.log"; exit 1; }
  echo "$name: done ($(grep -o '[0-9.]* tok/s)' "$OUT/$name.log" | tail -1 | tr -d ')'))"
}
run fp32 train.precision=fp32 "$@"
run bf16 train.precision=bf16 "$@"
run fp32-seed43 train.precision=fp32 train.seed=43 "$@"
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def evals(name):
    recs = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    return {r["step"]: r for r in recs if r.get("kind") == "eval"}
def tps(name):
    t = [r["tokens_per_s"] for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl"))
         if r.get("kind") == "train" and r["step"] > 1]
    return sum(t) / len(t)
f, b, s = evals("fp32"), evals("bf16"), evals("fp32-seed43")
sets = ["brown_heldout", "scifi_ood"]
print(f"{'step':>5} | " + " | ".join(f"{x:>13} fp32   bf16 (bf16-fp32) seed43 (seed-fp32)" for x in sets))
worst_b = worst_s = 0.0
for step in sorted(f):
    cols = []
    for x in sets:
        k = f"eval/{x}/ce"
        fv, bv, sv = f[step][k], b[step][k], s[step][k]
        if step > 0:
            worst_b, worst_s = max(worst_b, abs(bv - fv)), max(worst_s, abs(sv - fv))
        cols.append(f"{fv:>18.4f} {bv:6.4f} ({bv - fv:+.4f}) {sv:6.4f} ({sv - fv:+.4f})")
    print(f"{step:>5} | " + " | ".join(cols))
print(f"largest |bf16 - fp32| held-out CE gap after step 0: {worst_b:.4f} nats; "
      f"largest |seed 43 - seed 42| gap: {worst_s:.4f} nats")
print(f"tokens/s (mean over steps > 1): fp32 {tps('fp32'):.0f}, bf16 {tps('bf16'):.0f}, "
      f"ratio {tps('bf16') / tps('fp32'):.2f}x")
PY
